"""The exporter's series from one poll's documents: Slurm's own vocabulary, slurmpod's NodeSet, drain,
policy and autoscale series, and an exposition no Slurm name can break.

The reference vocabulary is what slurmctld's OpenMetrics plugin prints in Slurm 26.05.3
(src/plugins/metrics/openmetrics/openmetrics.c); 25.11 prints a subset of it.
Ref: https://slurm.schedmd.com/metrics.html
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
import slurmdocs
from golden import check_golden
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from slurmdocs import job, node, partition

from slurmpod.demand import NodeSetShape
from slurmpod.entrypoints.exporter import collect
from slurmpod.joblist import JobListing
from slurmpod.slurm import Report


def _slurm(names: str) -> set[str]:
    return {f"slurm_{n}" for n in names.split()}


SLURMCTLD_NODES = _slurm("""
node_cpus node_cpus_alloc node_cpus_effective node_cpus_idle node_gpus node_gpus_alloc node_memory_alloc_bytes
node_memory_bytes node_memory_effective_bytes node_memory_free_bytes nodes nodes_alloc nodes_blocked nodes_cloud
nodes_completing nodes_down nodes_drain nodes_drained nodes_draining nodes_dyn_future nodes_dyn_normal
nodes_external nodes_fail nodes_future nodes_idle nodes_invalid_reg nodes_maint nodes_mixed nodes_noresp
nodes_planned nodes_power_down nodes_power_up nodes_powered_down nodes_powering_up nodes_reboot_issued
nodes_reboot_req nodes_resv nodes_unknown""")
SLURMCTLD_JOBS = _slurm("""
jobs jobs_bootfail jobs_cancelled jobs_completed jobs_completing jobs_configuring jobs_cpus_alloc jobs_deadline
jobs_expediting jobs_failed jobs_fed_requeued jobs_finished jobs_gpus_alloc jobs_hold jobs_memory_alloc
jobs_node_failed jobs_nodes_alloc jobs_outofmemory jobs_pending jobs_powerup_node jobs_preempted jobs_requeued
jobs_resizing jobs_revoked jobs_running jobs_signaling jobs_stageout jobs_started jobs_suspended jobs_timeout""")
SLURMCTLD_PARTITIONS = _slurm("""
partitions partition_cpus partition_gpus partition_nodes partition_jobs partition_jobs_bootfail
partition_jobs_cancelled partition_jobs_completed partition_jobs_completing partition_jobs_configuring
partition_jobs_cpus_alloc partition_jobs_deadline partition_jobs_expediting partition_jobs_failed
partition_jobs_fed_requeued partition_jobs_finished partition_jobs_gpus_alloc partition_jobs_hold
partition_jobs_max_job_nodes partition_jobs_max_job_nodes_nohold partition_jobs_memory_alloc
partition_jobs_min_job_nodes partition_jobs_min_job_nodes_nohold partition_jobs_node_failed
partition_jobs_outofmemory partition_jobs_pending partition_jobs_powerup_node partition_jobs_preempted
partition_jobs_requeued partition_jobs_resizing partition_jobs_revoked partition_jobs_running
partition_jobs_signaling partition_jobs_stageout partition_jobs_started partition_jobs_suspended
partition_jobs_timeout partition_jobs_wait_part_node_limit partition_nodes_alloc partition_nodes_blocked
partition_nodes_cg partition_nodes_cloud partition_nodes_cpus_alloc partition_nodes_cpus_efctv
partition_nodes_cpus_idle partition_nodes_down partition_nodes_drain partition_nodes_drained
partition_nodes_draining partition_nodes_dyn_future partition_nodes_dyn_normal partition_nodes_external
partition_nodes_fail partition_nodes_future partition_nodes_idle partition_nodes_invalid_reg partition_nodes_maint
partition_nodes_mem_alloc partition_nodes_mem_avail partition_nodes_mem_free partition_nodes_mem_tot
partition_nodes_mixed partition_nodes_no_resp partition_nodes_planned partition_nodes_power_down
partition_nodes_power_up partition_nodes_powered_down partition_nodes_powering_down partition_nodes_powering_up
partition_nodes_reboot_issued partition_nodes_reboot_requested partition_nodes_resv partition_nodes_unknown""")
SLURMCTLD_SCHEDULER = _slurm("""
agent_cnt agent_queue_size agent_thread_cnt backfilled_het_jobs backfilled_jobs bf_active bf_cycle_cnt bf_cycle_last
bf_cycle_max bf_cycle_tot bf_depth_mean bf_depth_tot bf_depth_try_tot bf_exit_end bf_exit_max_job_start
bf_exit_max_job_test bf_exit_state_changed bf_exit_table_limit bf_exit_timeout bf_last_depth bf_last_depth_try
bf_mean_cycle bf_mean_table_sz bf_queue_len bf_queue_len_mean bf_queue_len_tot bf_table_size bf_table_size_tot
bf_try_depth_mean bf_when_last_cycle last_backfilled_jobs last_proc_req_start sched_exit_end sched_exit_lic
sched_exit_max_depth sched_exit_max_job_start sched_exit_rpc_cnt sched_exit_timeout sched_mean_cycle
sched_mean_depth_cycle sched_stats_timestamp schedule_cycle_cnt schedule_cycle_depth schedule_cycle_last
schedule_cycle_max schedule_cycle_tot schedule_queue_len sdiag_job_states_ts sdiag_jobs_canceled
sdiag_jobs_completed sdiag_jobs_failed sdiag_jobs_pending sdiag_jobs_running sdiag_jobs_started sdiag_jobs_submitted
sdiag_latency server_thread_cnt slurmdbd_queue_size""")
SLURMCTLD = SLURMCTLD_NODES | SLURMCTLD_JOBS | SLURMCTLD_PARTITIONS | SLURMCTLD_SCHEDULER
# Finished jobs: squeue's default listing (what the exporter reads) holds none; POWER_UP_NODE: squeue never
# names that state flag (docs/metrics.md).
FINISHED = ("bootfail", "cancelled", "completed", "deadline", "failed", "finished", "node_failed", "outofmemory",
            "preempted", "started", "timeout", "powerup_node")
NOT_SERVED = {f"slurm_jobs_{s}" for s in FINISHED} | {f"slurm_partition_jobs_{s}" for s in FINISHED}

NODESETS = (NodeSetShape("gpu", "gpu", ("gpu",), cpus=0, gpus=0), NodeSetShape("cpu", "cpu", ("main",), cpus=0, gpus=0),
            NodeSetShape("tiny", "tiny", ("main",), cpus=0, gpus=0))
H100 = "gpu:h100:8(S:0-1)"


def _cluster() -> tuple[dict[Report, dict[str, Any]], JobListing]:
    """Twelve nodes in every state slurmpod cares about, ten jobs in partitions gpu and main."""
    gpu = {"partitions": ("gpu",), "features": ("gpu",), "gres": H100}
    cpu = {"partitions": ("main",), "features": ("cpu",)}
    nodes = [
        node("gpu-0", ["ALLOCATED"], alloc_cpus=32, alloc_memory=32768, gres_used="gpu:h100:8(IDX:0-7)", **gpu),
        node("gpu-1", ["MIXED"], alloc_cpus=8, gres_used="gpu:h100:2(IDX:0-1)", **gpu),
        node("gpu-2", ["IDLE", "DRAIN"], reason="slurmpod: xid: GPU 3 fell off the bus (XID 79)", **gpu),
        node("gpu-3", ["MIXED", "DRAIN"], alloc_cpus=4, reason="slurmpod: autoscale: scale-in", **gpu),
        node("gpu-4", ["IDLE", "DRAIN"], reason="slurmpod: nvlink: replace node: link 3 down", **gpu),
        node("cpu-0", ["IDLE", "DYNAMIC_NORM"], **cpu),
        node("cpu-1", ["IDLE", "DRAIN", "DYNAMIC_NORM"], reason="slurmpod: pod terminating", **cpu),
        node("cpu-2", ["DOWN", "NOT_RESPONDING", "DYNAMIC_NORM"], reason="Not responding", **cpu),
        node("cpu-3", ["IDLE", "DRAIN"], reason="rack 7 PSU swap", **cpu),
        node("cpu-4", ["FUTURE", "DYNAMIC_FUTURE"], **cpu),
        node("cpu-5", ["IDLE", "DRAIN"], reason="slurmpod: k8s: node cordoned", **cpu),
        node("cpu-6", ["ALLOCATED", "COMPLETING"], alloc_cpus=32, **cpu),
    ]
    jobs = [
        job(1, "RUNNING", partition="gpu", cpus=40, nodes=2, tres_alloc="cpu=40,mem=40G,node=2,gres/gpu=10"),
        job(2, "RUNNING", cpus=4, tres_alloc="cpu=4,mem=4000M,node=1"),
        job(3, partition="gpu", reason="Resources", nodes=2, tres_per_node="gres/gpu:8", features="gpu"),
        job(4, partition="gpu,main", reason="Priority"),
        job(5, reason="JobHeldUser", priority=0, nodes=5),
        job(6, reason="Priority", array_tasks="1-10%4"),
        job(7, reason="PartitionNodeLimit", nodes=3),
        job(8, "COMPLETING"),
        job(9, "SUSPENDED", cpus=2, tres_alloc="cpu=2,node=1"),
        job(10, partition="gpu", reason="Dependency", nodes=4, max_nodes=6),
        job(11, "CONFIGURING", partition="gpu", cpus=8, tres_alloc="cpu=8,mem=8G,node=1,gres/gpu=1"),
        job(12, "REQUEUED", reason="BeginTime"),
    ]
    parts = [partition("gpu", nodes=5, cpus=160), partition("main", nodes=7, cpus=224)]
    return slurmdocs.reports(nodes, parts), slurmdocs.listing(jobs)


def _families(cluster: tuple[dict[Report, dict[str, Any]], JobListing] | None = None) -> list[Metric]:
    d, jobs = cluster or _cluster()
    snap = collect.Snapshot(d[Report.NODES], jobs, d[Report.PARTITIONS], d[Report.DIAG])
    return collect.slurm_families(snap, NODESETS)


def _text(families: Iterable[Metric]) -> str:
    class Fixed:
        def collect(self) -> Iterable[Metric]:
            return list(families)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Fixed())  # type: ignore[arg-type]
    return generate_latest(registry).decode()


def _values(families: Iterable[Metric]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value, read back from the exposition as Prometheus would."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(_text(families)) for s in fam.samples}


def _v(values: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return values[(name, tuple(sorted(labels.items())))]


def test_slurm_series_are_slurmctlds_own_names() -> None:
    served = {f.name for f in _families() if f.name.startswith("slurm_")}
    assert served <= SLURMCTLD, served - SLURMCTLD
    assert SLURMCTLD - served == NOT_SERVED
    # the labels slurmctld's plugin uses
    for fam in _families():
        if fam.name.startswith("slurm_node_"):
            assert {tuple(s.labels) for s in fam.samples} == {("node",)}, fam.name
        elif fam.name.startswith("slurm_partition_"):
            assert {tuple(s.labels) for s in fam.samples} == {("partition",)}, fam.name
        elif fam.name.startswith("slurm_"):
            assert [s.labels for s in fam.samples] == [{}], fam.name
        assert fam.type in ("gauge", "counter") if fam.name.startswith("slurmpod_") else fam.type == "gauge"


def test_exposition_golden() -> None:
    check_golden("exporter.metrics", _text(_families()))


@pytest.mark.parametrize(
    ("name", "labels", "value"),
    [
        ("slurm_nodes", {}, 12),
        ("slurm_nodes_alloc", {}, 2),
        ("slurm_nodes_mixed", {}, 2),
        ("slurm_nodes_idle", {}, 6),
        ("slurm_nodes_down", {}, 1),
        ("slurm_nodes_future", {}, 1),
        ("slurm_nodes_unknown", {}, 0),
        ("slurm_nodes_drain", {}, 5),
        ("slurm_nodes_drained", {}, 5),
        ("slurm_nodes_draining", {}, 1),
        ("slurm_nodes_completing", {}, 1),
        ("slurm_nodes_noresp", {}, 1),
        ("slurm_nodes_dyn_normal", {}, 3),
        ("slurm_nodes_dyn_future", {}, 1),
        ("slurm_node_cpus_idle", {"node": "gpu-1"}, 24),
        ("slurm_node_gpus", {"node": "gpu-1"}, 8),
        ("slurm_node_gpus_alloc", {"node": "gpu-1"}, 2),
        ("slurm_node_memory_bytes", {"node": "gpu-0"}, 65536),
        ("slurm_node_memory_alloc_bytes", {"node": "gpu-0"}, 32768),
        ("slurm_jobs", {}, 21),
        ("slurm_jobs_pending", {}, 16),
        ("slurm_jobs_hold", {}, 1),
        ("slurm_jobs_running", {}, 3),  # a CONFIGURING job runs
        ("slurm_jobs_suspended", {}, 1),
        ("slurm_jobs_completing", {}, 1),
        ("slurm_jobs_configuring", {}, 1),
        ("slurm_jobs_requeued", {}, 1),
        ("slurm_jobs_cpus_alloc", {}, 54),
        ("slurm_jobs_memory_alloc", {}, 40960 + 4000 + 8192),
        ("slurm_jobs_gpus_alloc", {}, 11),
        ("slurm_jobs_nodes_alloc", {}, 4),
        ("slurm_partitions", {}, 2),
        ("slurm_partition_nodes", {"partition": "gpu"}, 5),
        ("slurm_partition_cpus", {"partition": "main"}, 224),
        ("slurm_partition_gpus", {"partition": "gpu"}, 40),
        ("slurm_partition_nodes_idle", {"partition": "main"}, 4),
        ("slurm_partition_nodes_drain", {"partition": "gpu"}, 2),
        ("slurm_partition_nodes_draining", {"partition": "gpu"}, 1),
        ("slurm_partition_nodes_cpus_idle", {"partition": "gpu"}, 0 + 24 + 32 + 28 + 32),
        ("slurm_partition_jobs", {"partition": "gpu"}, 5),
        ("slurm_partition_jobs", {"partition": "main"}, 7),
        ("slurm_partition_jobs_pending", {"partition": "gpu"}, 3),
        ("slurm_partition_jobs_pending", {"partition": "main"}, 13),
        ("slurm_partition_jobs_hold", {"partition": "main"}, 1),
        ("slurm_partition_jobs_max_job_nodes", {"partition": "main"}, 5),
        ("slurm_partition_jobs_max_job_nodes_nohold", {"partition": "main"}, 3),
        ("slurm_partition_jobs_max_job_nodes", {"partition": "gpu"}, 6),
        ("slurm_partition_jobs_min_job_nodes_nohold", {"partition": "gpu"}, 4),
        ("slurm_partition_jobs_wait_part_node_limit", {"partition": "main"}, 1),
        ("slurm_partition_jobs_cpus_alloc", {"partition": "gpu"}, 48),
        ("slurm_sched_mean_cycle", {}, 10000 // 40),
        ("slurm_bf_mean_table_sz", {}, 9 // 4),
        ("slurm_sched_exit_end", {}, 38),
        ("slurm_bf_active", {}, 0),
        ("slurm_sched_stats_timestamp", {}, 1767225600),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_slurm_values(name: str, labels: dict[str, str], value: float) -> None:
    assert _v(_values(_families()), name, **labels) == value


@pytest.mark.parametrize(
    ("name", "labels", "value"),
    [
        # gpu: job 3 (2 nodes of 8 GPUs) and job 4 (no constraint, gpu is one of its partitions); job 10 waits on a
        # dependency, job 12 (requeued) on its begin time
        ("slurmpod_nodeset_demand_nodes", {"nodeset": "gpu"}, 3),
        # cpu: job 4, job 6 (an array of 10 throttled to 4), job 7 (3 nodes); job 5 is held
        ("slurmpod_nodeset_demand_nodes", {"nodeset": "cpu"}, 1 + 4 + 3),
        # a NodeSet with no node yet serves the same queue: scale-out from zero
        ("slurmpod_nodeset_demand_nodes", {"nodeset": "tiny"}, 1 + 4 + 3),
        ("slurmpod_nodeset_nodes", {"nodeset": "gpu", "state": "allocated"}, 1),
        ("slurmpod_nodeset_nodes", {"nodeset": "gpu", "state": "mixed"}, 1),
        ("slurmpod_nodeset_nodes", {"nodeset": "gpu", "state": "drained"}, 2),
        ("slurmpod_nodeset_nodes", {"nodeset": "gpu", "state": "draining"}, 1),
        ("slurmpod_nodeset_nodes", {"nodeset": "gpu", "state": "idle"}, 0),
        ("slurmpod_nodeset_nodes", {"nodeset": "cpu", "state": "idle"}, 1),
        ("slurmpod_nodeset_nodes", {"nodeset": "cpu", "state": "drained"}, 3),
        ("slurmpod_nodeset_nodes", {"nodeset": "cpu", "state": "down"}, 1),
        ("slurmpod_nodeset_nodes", {"nodeset": "cpu", "state": "future"}, 1),
        ("slurmpod_nodeset_nodes", {"nodeset": "cpu", "state": "completing"}, 1),
        ("slurmpod_nodeset_nodes", {"nodeset": "tiny", "state": "idle"}, 0),
        ("slurmpod_drained_nodes", {"owner": "health"}, 2),
        ("slurmpod_drained_nodes", {"owner": "autoscale"}, 1),
        ("slurmpod_drained_nodes", {"owner": "prestop"}, 1),
        ("slurmpod_drained_nodes", {"owner": "k8s"}, 1),
        ("slurmpod_drained_nodes", {"owner": "admin"}, 1),
        ("slurmpod_health_drained_nodes", {"check": "xid"}, 1),
        ("slurmpod_health_drained_nodes", {"check": "nvlink"}, 1),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_slurmpod_values(name: str, labels: dict[str, str], value: float) -> None:
    assert _v(_values(_families()), name, **labels) == value


def test_every_nodeset_reports_every_state_and_owner_even_at_zero() -> None:
    values = _values(_families())
    for ns in ("gpu", "cpu", "tiny"):
        assert {dict(k[1])["state"] for k in values if k[0] == "slurmpod_nodeset_nodes"
                and dict(k[1])["nodeset"] == ns} == set(collect.NODESET_STATES)
    assert {dict(k[1])["owner"] for k in values if k[0] == "slurmpod_drained_nodes"} == set(collect.DRAIN_OWNERS)


@pytest.mark.parametrize(
    ("reason", "owner"),
    [("slurmpod: pod terminating", "prestop"), ("slurmpod: xid: XID 79", "health"),
     ("slurmpod: gpu-count: restart pod: 7 of 8 GPUs", "health"), ("slurmpod: k8s: NotReady", "k8s"),
     ("slurmpod: autoscale: scale-in", "autoscale"), ("Not responding", "admin"), ("", "admin"),
     ("slurmpod: not ours really", "admin"), ("maintenance window", "admin")],
    ids=["prestop", "health", "health-remediation", "k8s", "autoscale", "slurmctld", "no-reason", "lookalike", "admin"],
)
def test_drain_owner(reason: str, owner: str) -> None:
    assert collect.drain_owner(reason) == owner


def test_hostile_names_cannot_break_the_exposition() -> None:
    """Partition, node and feature names come from Slurm: quotes, backslashes and newlines stay inside their
    label value and the scrape still parses."""
    bad = 'p"a\\rt\nslurm_nodes 999'
    nodes = [node('n"0\\\n', ["IDLE"], partitions=(bad,), features=("gpu",))]
    jobs = [job(1, partition=bad, reason='Weird"\nreason')]
    cluster = slurmdocs.reports(nodes, [partition(bad, nodes=1, cpus=32)]), slurmdocs.listing(jobs)
    text = _text(_families(cluster))
    values = _values(_families(cluster))
    assert _v(values, "slurm_partition_jobs_pending", partition=bad) == 1
    assert _v(values, "slurm_node_cpus", node='n"0\\\n') == 32
    assert _v(values, "slurm_nodes") == 1  # the injected "slurm_nodes 999" is a label value, not a sample
    assert not [line for line in text.splitlines() if line.startswith("slurm_nodes 999")]


def test_documents_without_their_lists_serve_empty_not_broken_series() -> None:
    snap = collect.Snapshot({}, JobListing(), {"partitions": [None, {"name": ""}]}, {})
    values = _values(collect.slurm_families(snap, NODESETS))
    assert _v(values, "slurm_nodes") == 0
    assert _v(values, "slurm_jobs_pending") == 0
    assert _v(values, "slurm_partitions") == 0
    assert _v(values, "slurmpod_nodeset_demand_nodes", nodeset="gpu") == 0
    assert not [k for k in values if k[0] == "slurm_schedule_cycle_cnt"]  # no sdiag, no scheduler series


@pytest.mark.parametrize(
    ("state", "alloc", "tres_used", "base"),
    [(["IDLE"], 0, "", "idle"), (["ALLOCATED"], 32, "cpu=32", "alloc"), (["ALLOCATED"], 8, "cpu=8", "mixed"),
     (["MIXED"], 8, "cpu=8", "mixed"), (["ALLOCATED"], 0, "mem=1G", "mixed"), (["DOWN", "DRAIN"], 0, "", "down"),
     (["FUTURE"], 0, "", "future"), (["UNKNOWN"], 0, "", "unknown"), (["IDLE", "POWERED_DOWN"], 0, "", "idle")],
    ids=["idle", "allocated", "partly-allocated", "mixed", "memory-only", "down", "future", "unknown",
         "powered-down"],
)
def test_node_base_state_as_slurmctld_counts_it(state: list[str], alloc: int, tres_used: str, base: str) -> None:
    assert collect.node_of(node("n", state, alloc_cpus=alloc, tres_used=tres_used)).base == base


def test_policy_series_from_the_plugins_stats() -> None:
    stats = {"calls": 10, "fast": 7, "failures": 1, "sum_ns": 250_000, "max_ns": 90_000, "bucket_us": 1,
             "buckets": {"3": 5, "9": 2, "40": 1, "4095": 2}}
    values = _values(collect.policy_families(stats))
    assert _v(values, "slurmpod_policy_calls_total") == 10
    assert _v(values, "slurmpod_policy_fast_total") == 7
    assert _v(values, "slurmpod_policy_failures_total") == 1
    # bucket N holds calls of N..N+1 us; the last (4095) holds every slower one
    assert _v(values, "slurmpod_policy_call_seconds_bucket", le="1e-05") == 7
    assert _v(values, "slurmpod_policy_call_seconds_bucket", le="5e-05") == 8
    assert _v(values, "slurmpod_policy_call_seconds_bucket", le="0.004095") == 8
    assert _v(values, "slurmpod_policy_call_seconds_bucket", le="+Inf") == 10
    assert _v(values, "slurmpod_policy_call_seconds_count") == 10
    assert _v(values, "slurmpod_policy_call_seconds_sum") == pytest.approx(0.00025)


@pytest.mark.parametrize("stats", [None, [], "x", {"calls": "many", "buckets": {"x": 1, "2": -1}}],
                         ids=["no-file", "list", "text", "garbled"])
def test_odd_policy_stats_serve_nothing_or_zeros(stats: Any) -> None:
    values = _values(collect.policy_families(stats))
    assert all(v == 0 for v in values.values())


def test_autoscale_decisions_from_the_counters_file() -> None:
    counters = {"decisions": {"gpu": {"scale_out": 3, "drain": 2, "scale_in": 1}, "cpu": {"undrain": 1},
                              "bad": "x", "odd": {"scale_out": "many"}}}
    values = _values(collect.autoscale_families(counters))
    assert _v(values, "slurmpod_autoscale_decisions_total", nodeset="gpu", action="scale_out") == 3
    assert _v(values, "slurmpod_autoscale_decisions_total", nodeset="cpu", action="undrain") == 1
    assert _v(values, "slurmpod_autoscale_decisions_total", nodeset="odd", action="scale_out") == 0
    assert not [k for k in values if dict(k[1]).get("nodeset") == "bad"]
    assert collect.autoscale_families(None) == []


def test_a_nodeset_taking_over_its_placeholders_counts_the_jobs_its_partition_refuses_meanwhile() -> None:
    """The autoscaler deleted burst-1's placeholder to start its pod: until the pod registers, partition burst is
    one node short and slurmctld gives the waiting job PartitionConfig. It counts then, not once every record
    burst keeps is back (then the partition itself refuses it)."""
    shape = NodeSetShape("burst", "burst", ("burst",), cpus=0, gpus=0, kept=("burst-0", "burst-1"))
    waiting = slurmdocs.listing([job(1, partition="burst", reason="PartitionConfig")])
    burst = {"partitions": ("burst",), "features": ("burst",)}
    taking_over = [node("burst-0", ["FUTURE", "DYNAMIC_FUTURE"], **burst)]
    every_record = [*taking_over, node("burst-1", ["IDLE", "DYNAMIC_NORM"], **burst)]
    for nodes, want in ((taking_over, 1), (every_record, 0)):
        docs = slurmdocs.reports(nodes, [partition("burst", nodes=len(nodes), cpus=len(nodes))])
        snap = collect.Snapshot(docs[Report.NODES], waiting, docs[Report.PARTITIONS], docs[Report.DIAG])
        assert _v(_values(collect.slurm_families(snap, (shape,))), "slurmpod_nodeset_demand_nodes",
                  nodeset="burst") == want


def test_a_large_cluster_counts_every_job_and_node() -> None:
    """1,000 nodes and 10,000 jobs (slurmdocs.synthetic): the counts add up at scale."""
    docs, jobs = slurmdocs.synthetic(1000, 10_000)
    snap = collect.Snapshot(docs[Report.NODES], jobs, docs[Report.PARTITIONS], docs[Report.DIAG])
    values = _values(collect.slurm_families(snap, (NodeSetShape("gpu", "gpu", ("gpu",), cpus=0, gpus=0),)))
    assert _v(values, "slurm_nodes") == 1000
    assert _v(values, "slurm_jobs_running") == 2500
    # pending: 2,500 plain + 2,500 arrays of 20 tasks + 2,500 held
    assert _v(values, "slurm_jobs_pending") == 2500 + 2500 * 20 + 2500
    assert _v(values, "slurm_jobs_hold") == 2500
    # gpu: 1,250 two-node jobs asking 4 GPUs of 8, and 1,250 arrays throttled to 5
    assert _v(values, "slurmpod_nodeset_demand_nodes", nodeset="gpu") == 1250 * 2 + 1250 * 5
    assert _v(values, "slurmpod_drained_nodes", owner="health") == 250
