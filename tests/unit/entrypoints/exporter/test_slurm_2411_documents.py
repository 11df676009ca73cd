"""The exporter's series and the pending demand over what a real Slurm 24.11.5 printed.

tests/unit/data/slurm-24.11/ holds the four documents one poll reads (`scontrol --future show nodes
--json`, `squeue --json`, `scontrol show partitions --json`, `sdiag --json`), captured from an emulated
cluster of the chart's defaults and trimmed to the fields slurmpod reads. The cluster was in this state:

- spmetrics-worker-0 runs job 1 (--exclusive); spmetrics-worker-1 runs job 2 and was then drained with
  `slurmpod: k8s: node cordoned` (DRAINING); spmetrics-worker-2 is a FUTURE placeholder with the nodeset's
  feature (`scontrol create NodeName=... State=FUTURE`), so that a job of 3 nodes is accepted;
- pending: 3 held (--hold); 4 an array 0-9%2; 5 asks 3 nodes (ReqNodeNotAvail); 6 depends on job 1;
  7 names spmetrics-worker-0 (--nodelist; Priority); 8 begins in an hour; 9 has a name of newlines and
  quotes; 10 is in main,preempt with --constraint=workers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import paths
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

from slurmpod import demand
from slurmpod.commands import Result
from slurmpod.demand import NodeSetShape
from slurmpod.entrypoints.exporter import collect
from slurmpod.nodestate import parse_nodes
from slurmpod.slurm import CliSlurmClient, Report

DATA = paths.UNIT / "data" / "slurm-24.11"
FILES = {Report.NODES: "nodes.json", Report.JOBS: "squeue.json", Report.PARTITIONS: "partitions.json",
         Report.DIAG: "sdiag.json"}
WORKERS = NodeSetShape("workers", "workers", ("main", "preempt", "high"), cpus=0, gpus=0)
HOSTILE_NAME = 'x"} 1\nslurm_nodes 99'


def _text(which: Report) -> str:
    return (DATA / FILES[which]).read_text(encoding="utf-8")


class FileRunner:
    """Answers each of the exporter's commands with the document Slurm printed for it."""

    def __call__(self, argv: Sequence[str], timeout: float) -> Result:
        # squeue: the whole listing, or its pending jobs (SlurmClient.pending_jobs): the same document
        which = Report.JOBS if argv[0] == "squeue" else next(r for r in Report if r.argv == tuple(argv))
        return Result(tuple(argv), 0, _text(which), "")


def _docs() -> dict[Report, dict[str, Any]]:
    client = CliSlurmClient(FileRunner())
    return {which: client.report(which) for which in Report}


class _Families:
    def __init__(self, families: Sequence[Metric]) -> None:
        self._families = families

    def collect(self) -> Sequence[Metric]:
        return self._families


def _exposition() -> str:
    docs = _docs()
    snap = collect.Snapshot(docs[Report.NODES], docs[Report.JOBS], docs[Report.PARTITIONS], docs[Report.DIAG])
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(collect.slurm_families(snap, (WORKERS,))))  # type: ignore[arg-type]
    return generate_latest(registry).decode("utf-8")


def _samples(text: str) -> dict[str, float]:
    """`name{label="value",...}` (labels sorted) -> value."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


def test_the_documents_are_slurm_24_11s() -> None:
    for which in Report:
        meta = json.loads(_text(which))["meta"]
        assert meta["slurm"]["release"] == "24.11.5" and meta["plugin"]["data_parser"] == "data_parser/v0.0.42"


def test_every_node_record_parses() -> None:
    nodes = {n.name: n for n in parse_nodes(_text(Report.NODES))}
    assert {name: (n.base, sorted(n.flags)) for name, n in nodes.items()} == {
        "spmetrics-worker-0": ("ALLOCATED", ["DYNAMIC_NORM"]),
        "spmetrics-worker-1": ("ALLOCATED", ["DRAIN", "DYNAMIC_NORM"]),
        "spmetrics-worker-2": ("FUTURE", ["DYNAMIC_NORM"]),
    }
    assert nodes["spmetrics-worker-1"].reason == "slurmpod: k8s: node cordoned"
    assert nodes["spmetrics-worker-0"].features == ("workers",) and nodes["spmetrics-worker-0"].cpus == 2


def test_pending_jobs_count_only_the_nodes_new_pods_could_give() -> None:
    """Held (3), dependent (6), begin-time (8): none. The array: its throttle, 2 tasks of one node. The job
    of 3 nodes waiting for nodes that do not run yet: 3. The job that names a busy node (7, reason
    Priority): none, a new pod is never the node it names."""
    pending = CliSlurmClient(FileRunner()).pending_jobs()
    assert {j.job_id: j.nodes for j in pending} == {4: 2, 5: 3, 9: 1, 10: 1}
    assert {j.job_id: j.partitions for j in pending}[10] == ("main", "preempt")
    shape = demand.with_capacity(WORKERS, parse_nodes(_text(Report.NODES)))
    assert (shape.cpus, shape.gpus) == (2, 0)
    assert demand.demand_nodes(pending, shape) == 7


@pytest.mark.parametrize(("series", "value"), [
    ("slurm_nodes", 3), ("slurm_nodes_alloc", 2), ("slurm_nodes_future", 1), ("slurm_nodes_idle", 0),
    ("slurm_nodes_mixed", 0), ("slurm_nodes_draining", 1), ("slurm_nodes_drained", 0), ("slurm_nodes_dyn_normal", 3),
    ('slurm_node_cpus{node="spmetrics-worker-0"}', 2), ('slurm_node_cpus_effective{node="spmetrics-worker-0"}', 1),
    ('slurm_node_cpus_alloc{node="spmetrics-worker-0"}', 1), ('slurm_node_cpus_idle{node="spmetrics-worker-0"}', 0),
    ('slurm_node_memory_bytes{node="spmetrics-worker-0"}', 24105),
    ('slurm_node_memory_effective_bytes{node="spmetrics-worker-0"}', 1024),
    ('slurm_node_memory_alloc_bytes{node="spmetrics-worker-0"}', 1024),
    ("slurm_jobs", 19), ("slurm_jobs_pending", 17), ("slurm_jobs_hold", 1), ("slurm_jobs_running", 2),
    ("slurm_jobs_cpus_alloc", 2), ("slurm_jobs_nodes_alloc", 2),
    ('slurm_partition_jobs_pending{partition="main"}', 17), ('slurm_partition_jobs_pending{partition="preempt"}', 0),
    ('slurm_partition_jobs_running{partition="main"}', 2), ('slurm_partition_jobs_max_job_nodes{partition="main"}', 3),
    ('slurm_partition_nodes{partition="main"}', 3), ('slurm_partition_cpus{partition="main"}', 6),
    ('slurm_partition_nodes_future{partition="high"}', 1), ('slurm_partition_nodes_draining{partition="high"}', 1),
    ("slurm_schedule_cycle_cnt", 4), ("slurm_sdiag_jobs_submitted", 19), ("slurm_sdiag_jobs_pending", 17),
    ('slurmpod_nodeset_demand_nodes{nodeset="workers"}', 7),
    ('slurmpod_nodeset_nodes{nodeset="workers",state="allocated"}', 1),
    ('slurmpod_nodeset_nodes{nodeset="workers",state="draining"}', 1),
    ('slurmpod_nodeset_nodes{nodeset="workers",state="future"}', 1),
    ('slurmpod_nodeset_nodes{nodeset="workers",state="idle"}', 0),
    ('slurmpod_drained_nodes{owner="k8s"}', 1), ('slurmpod_drained_nodes{owner="admin"}', 0),
], ids=lambda v: v if isinstance(v, str) else None)
def test_series_from_the_documents(series: str, value: float) -> None:
    assert _samples(_exposition())[series] == value


def test_a_hostile_job_name_is_in_no_line_of_the_exposition() -> None:
    assert HOSTILE_NAME in {j["name"] for j in json.loads(_text(Report.JOBS))["jobs"]}
    text = _exposition()
    assert "slurm_nodes 99" not in text and 'x"}' not in text
    assert _samples(text)["slurm_nodes"] == 3
