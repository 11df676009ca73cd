"""The exporter's series and the pending demand over what a real Slurm 24.11.5 printed.

tests/unit/data/slurm-24.11/ holds what one poll reads, captured from an emulated cluster of the chart's
defaults within the same second: `scontrol --future show nodes --json`, squeue's compact listing
(squeue.txt, slurmpod.joblist.ARGV, as squeue printed it), `scontrol show partitions --json` and
`sdiag --json`, the JSON trimmed to the fields slurmpod reads; and `squeue --json` of the same moment
(squeue.json), against which the compact listing is checked field by field. The cluster was in this state:

- spjobread-worker-0 runs job 1 (--exclusive); spjobread-worker-1 runs job 2 and was then drained with
  `slurmpod: k8s: node cordoned` (DRAINING); spjobread-worker-2 is a FUTURE placeholder with the nodeset's
  feature (`scontrol create NodeName=... State=FUTURE`), so that a job of 3 nodes is accepted;
- pending: 3 held (--hold); 4 an array 0-9%2; 5 asks 3 nodes (ReqNodeNotAvail); 6 depends on job 1;
  7 names spjobread-worker-0 (--nodelist; Priority); 8 begins in an hour; 9 has a name of quotes, a
  newline and the listing's separator, laid out like a listing line; 10 is in main,preempt with
  --constraint=workers (Resources, which slurmctld describes in words).
sbatch refused a --constraint or --gres holding the separator, a newline or a carriage return ("Invalid
feature specification", "Requested node configuration is not available").

squeue-split-array.txt is the same cluster a moment later, after `scontrol hold 4_9` and `scontrol update
JobId=4_8 NumNodes=2` split two tasks off the array: squeue prints the array's pending tasks on one line.
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

from slurmpod import demand, joblist
from slurmpod.commands import Result
from slurmpod.demand import NodeSetShape
from slurmpod.entrypoints.exporter import collect
from slurmpod.joblist import JobRecord
from slurmpod.nodestate import number, parse_nodes
from slurmpod.slurm import CliSlurmClient, Report

DATA = paths.UNIT / "data" / "slurm-24.11"
FILES = {Report.NODES: "nodes.json", Report.PARTITIONS: "partitions.json", Report.DIAG: "sdiag.json"}
WORKERS = NodeSetShape("workers", "workers", ("main", "preempt", "high"), cpus=0, gpus=0)
HOSTILE_NAME = f'x"}} 1{joblist.SEPARATOR}9{joblist.SEPARATOR}RUNNING\nslurm_nodes 99'


def _read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


class FileRunner:
    """Answers each of the exporter's commands with what Slurm printed for it."""

    def __init__(self, listing: str = "squeue.txt") -> None:
        self.listing = listing

    def __call__(self, argv: Sequence[str], timeout: float) -> Result:
        # squeue: the whole listing, or its pending jobs (SlurmClient.pending_jobs): the same text
        if argv[0] == "squeue":
            assert "--Format" in argv
            return Result(tuple(argv), 0, _read(self.listing), "")
        which = next(r for r in Report if r.argv == tuple(argv))
        return Result(tuple(argv), 0, _read(FILES[which]), "")


def _snapshot(listing: str = "squeue.txt") -> collect.Snapshot:
    client = CliSlurmClient(FileRunner(listing))
    docs = {which: client.report(which) for which in Report}
    return collect.Snapshot(docs[Report.NODES], client.job_list(), docs[Report.PARTITIONS], docs[Report.DIAG])


class _Families:
    def __init__(self, families: Sequence[Metric]) -> None:
        self._families = families

    def collect(self) -> Sequence[Metric]:
        return self._families


def _exposition(listing: str = "squeue.txt") -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(collect.slurm_families(_snapshot(listing), (WORKERS,))))  # type: ignore[arg-type]
    return generate_latest(registry).decode("utf-8")


def _samples(text: str) -> dict[str, float]:
    """`name{label="value",...}` (labels sorted) -> value."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


def _records(listing: str = "squeue.txt") -> dict[int, JobRecord]:
    parsed = joblist.parse_listing(_read(listing))
    assert parsed.unparsed == 0
    return {r.job_id: r for r in parsed.records}


def test_the_documents_are_slurm_24_11s() -> None:
    for name in (*FILES.values(), "squeue.json"):
        meta = json.loads(_read(name))["meta"]
        assert meta["slurm"]["release"] == "24.11.5" and meta["plugin"]["data_parser"] == "data_parser/v0.0.42"


def test_every_node_record_parses() -> None:
    nodes = {n.name: n for n in parse_nodes(_read(FILES[Report.NODES]))}
    assert {name: (n.base, sorted(n.flags)) for name, n in nodes.items()} == {
        "spjobread-worker-0": ("ALLOCATED", ["DYNAMIC_NORM"]),
        "spjobread-worker-1": ("ALLOCATED", ["DRAIN", "DYNAMIC_NORM"]),
        "spjobread-worker-2": ("FUTURE", ["DYNAMIC_NORM"]),
    }
    assert nodes["spjobread-worker-1"].reason == "slurmpod: k8s: node cordoned"
    assert nodes["spjobread-worker-0"].features == ("workers",) and nodes["spjobread-worker-0"].cpus == 2


def _from_json(job: dict[str, Any]) -> JobRecord:
    """What the compact listing should say of a `squeue --json` record of the same moment."""
    (state,) = job["job_state"]  # one state each here, no flag
    array_id = job["array_task_id"]
    return JobRecord(
        job_id=job["job_id"], state=state, priority=number(job["priority"]),
        nodes=number(job["node_count"]), max_nodes=max(number(job["max_nodes"]), number(job["node_count"])),
        cpus=number(job["cpus"]), cpus_per_node=number(job["minimum_cpus_per_node"]), tasks=number(job["tasks"]),
        tasks_per_node=number(job["tasks_per_node"]),
        array_tasks=job["array_task_string"] or (str(array_id["number"]) if array_id["set"] else ""),
        partitions=tuple(job["partition"].split(",")), required_nodes=job["required_nodes"],
        tres_alloc=job["tres_alloc_str"] or job["tres_req_str"], tres_per_node=job["tres_per_node"],
        tres_per_job=job["tres_per_job"], tres_per_task=job["tres_per_task"],
        reason=job["state_description"] or job["state_reason"], features=job["features"],
    )


def test_the_compact_listing_says_what_squeue_json_said_field_by_field() -> None:
    jobs = json.loads(_read("squeue.json"))["jobs"]
    records = _records()
    assert records == {job["job_id"]: _from_json(job) for job in jobs}
    # held: priority 0 and hold true; a reason described in words keeps its code first, or has none
    assert {r.job_id for r in records.values() if r.priority == 0} == {j["job_id"] for j in jobs if j["hold"]} == {3}
    assert records[5].reason_codes == ("ReqNodeNotAvail",)
    assert records[10].reason_codes == () and records[10].reason.startswith("Nodes required for job are DOWN")
    assert {r.job_id: (r.base, r.flags) for r in records.values() if r.base != "PENDING"} == {
        1: ("RUNNING", frozenset()), 2: ("RUNNING", frozenset())}


def test_a_hostile_job_name_is_not_in_the_listing() -> None:
    """Job 9's name holds quotes, a newline and the separator, laid out like the rest of a listing line: the
    listing never asks for a name, so it has one line per job and every line parses."""
    assert HOSTILE_NAME in {j["name"] for j in json.loads(_read("squeue.json"))["jobs"]}
    text = _read("squeue.txt")
    assert text.count("\n") == 10 and "slurm_nodes" not in text and "x\"}" not in text
    assert _records()[9].reason == "Priority"


def test_pending_jobs_count_only_the_nodes_new_pods_could_give() -> None:
    """Held (3), dependent (6), begin-time (8): none. The array: its throttle, 2 tasks of one node. The job
    of 3 nodes waiting for nodes that do not run yet: 3. The job that names a busy node (7, reason
    Priority): none, a new pod is never the node it names. Job 10, waiting for Resources that slurmctld
    describes in words: 1."""
    pending = CliSlurmClient(FileRunner()).pending_jobs()
    assert {j.job_id: j.nodes for j in pending} == {4: 2, 5: 3, 9: 1, 10: 1}
    assert {j.job_id: (j.partitions, j.features) for j in pending}[10] == (("main", "preempt"), "workers")
    shape = demand.with_capacity(WORKERS, parse_nodes(_read(FILES[Report.NODES])))
    assert (shape.cpus, shape.gpus) == (2, 0)
    assert demand.demand_nodes(pending, shape) == 7


def test_an_array_with_tasks_split_off_is_one_line_of_all_its_pending_tasks() -> None:
    """4_9 held and 4_8 asking 2 nodes, split off by `scontrol`: squeue's one line for array 4 holds the ten
    tasks, the array's node count, its reason and theirs, and no throttle. Its tasks count as pending; for
    the demand, as a job of one node whose reasons include one more nodes cure, without throttle: 10 (the
    JSON's records said 2 of the throttle, 0 held, 2 for 4_8: docs/metrics.md)."""
    records = _records("squeue-split-array.txt")
    array = records[4]
    assert (array.array_tasks, array.nodes, array.reason_codes) == ("0-9", 1, ("Resources", "JobHeldUser"))
    assert 13 not in records and 14 not in records
    pending = {j.job_id: j.nodes for j in CliSlurmClient(FileRunner("squeue-split-array.txt")).pending_jobs()}
    assert pending == {4: 10, 5: 3, 9: 1, 10: 1}
    values = _samples(_exposition("squeue-split-array.txt"))
    assert (values["slurm_jobs_pending"], values["slurm_jobs_hold"]) == (17, 1)


@pytest.mark.parametrize(("series", "value"), [
    ("slurm_nodes", 3), ("slurm_nodes_alloc", 2), ("slurm_nodes_future", 1), ("slurm_nodes_idle", 0),
    ("slurm_nodes_mixed", 0), ("slurm_nodes_draining", 1), ("slurm_nodes_drained", 0), ("slurm_nodes_dyn_normal", 3),
    ('slurm_node_cpus{node="spjobread-worker-0"}', 2), ('slurm_node_cpus_effective{node="spjobread-worker-0"}', 1),
    ('slurm_node_cpus_alloc{node="spjobread-worker-0"}', 1), ('slurm_node_cpus_idle{node="spjobread-worker-0"}', 0),
    ('slurm_node_memory_bytes{node="spjobread-worker-0"}', 24105),
    ('slurm_node_memory_effective_bytes{node="spjobread-worker-0"}', 1024),
    ('slurm_node_memory_alloc_bytes{node="spjobread-worker-0"}', 1024),
    ("slurm_jobs", 19), ("slurm_jobs_pending", 17), ("slurm_jobs_hold", 1), ("slurm_jobs_running", 2),
    ("slurm_jobs_cpus_alloc", 2), ("slurm_jobs_memory_alloc", 2048), ("slurm_jobs_nodes_alloc", 2),
    ('slurm_partition_jobs_pending{partition="main"}', 17), ('slurm_partition_jobs_pending{partition="preempt"}', 0),
    ('slurm_partition_jobs_running{partition="main"}', 2), ('slurm_partition_jobs_max_job_nodes{partition="main"}', 3),
    ('slurm_partition_nodes{partition="main"}', 3), ('slurm_partition_cpus{partition="main"}', 6),
    ('slurm_partition_nodes_future{partition="high"}', 1), ('slurm_partition_nodes_draining{partition="high"}', 1),
    ("slurm_schedule_cycle_cnt", 4), ("slurm_sdiag_jobs_submitted", 21), ("slurm_sdiag_jobs_pending", 17),
    ('slurmpod_nodeset_demand_nodes{nodeset="workers"}', 7),
    ('slurmpod_nodeset_nodes{nodeset="workers",state="allocated"}', 1),
    ('slurmpod_nodeset_nodes{nodeset="workers",state="draining"}', 1),
    ('slurmpod_nodeset_nodes{nodeset="workers",state="future"}', 1),
    ('slurmpod_nodeset_nodes{nodeset="workers",state="idle"}', 0),
    ('slurmpod_drained_nodes{owner="k8s"}', 1), ('slurmpod_drained_nodes{owner="admin"}', 0),
    ("slurmpod_exporter_unparsed_job_lines", 0),
], ids=lambda v: v if isinstance(v, str) else None)
def test_series_from_the_documents(series: str, value: float) -> None:
    assert _samples(_exposition())[series] == value
