"""Pending demand per NodeSet: which pending jobs more nodes could start, which NodeSet could run them, and
how many nodes they ask. Job records are those of squeue's compact listing (slurmpod.joblist), as Slurm
24.11 and 26.05 print them.

Ref: https://slurm.schedmd.com/squeue.html#OPT_Format
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from slurmpod import demand
from slurmpod.demand import NodeSetShape, PendingJob
from slurmpod.joblist import JobRecord
from slurmpod.nodestate import NodeState


def _job(job_id: int = 10, **over: Any) -> JobRecord:
    """A pending one-node job in partition main, waiting for resources."""
    fields: dict[str, Any] = {
        "job_id": job_id, "state": "PENDING", "priority": 1, "nodes": 1, "max_nodes": 1, "cpus": 1,
        "cpus_per_node": 1, "tasks": 1, "tasks_per_node": 0, "array_tasks": "", "partitions": ("main",),
        "required_nodes": "", "tres_alloc": "cpu=1,mem=1G,node=1,billing=1", "tres_per_node": "", "tres_per_job": "",
        "tres_per_task": "", "reason": "Resources", "features": "",
    }
    fields.update(over)
    return JobRecord(**fields)


GPU = NodeSetShape("gpu", "gpu", ("main", "gpu"), cpus=32, gpus=8)


def _pending(**over: Any) -> tuple[PendingJob, ...]:
    return demand.pending_from([_job(**over)])


def _demand(shape: NodeSetShape = GPU, **over: Any) -> int:
    return demand.demand_nodes(_pending(**over), shape)


def test_pending_fields() -> None:
    (job,) = _pending(job_id=42, partitions=("gpu", "main"), features="gpu&ib", nodes=4, cpus_per_node=16,
                      tres_per_node="gres/gpu:h100:8")
    assert job == PendingJob(job_id=42, partitions=("gpu", "main"), features="gpu&ib", nodes=4, gpus_per_node=8,
                             cpus_per_node=16)


@pytest.mark.parametrize(
    ("over", "nodes"),
    [
        ({}, 1),
        ({"reason": "Priority"}, 1),
        ({"reason": "None"}, 1),
        ({"reason": "PartitionNodeLimit", "nodes": 3}, 3),
        ({"reason": "ReqNodeNotAvail"}, 1),
        ({"reason": "NodeDown"}, 1),
        ({"reason": "SchedDefer"}, 1),
        ({"reason": "ReasonFromANewerSlurm"}, 1),
        ({"priority": 0, "reason": "Resources"}, 0),
        ({"reason": "JobHeldUser"}, 0),
        ({"reason": "JobHeldAdmin"}, 0),
        ({"reason": "Dependency"}, 0),
        ({"reason": "DependencyNeverSatisfied"}, 0),
        ({"reason": "BeginTime"}, 0),
        ({"reason": "ReqNodeNotAvail", "required_nodes": "gpu-worker-3"}, 0),
        ({"reason": "NodeDown", "required_nodes": "gpu-worker-3"}, 0),
        ({"reason": "Priority", "required_nodes": "gpu-worker-3"}, 0),
        ({"reason": "Resources", "required_nodes": "gpu-worker-[0-1]", "nodes": 2}, 0),
        ({"reason": "Resources", "required_nodes": "gpu-worker-3", "nodes": 3}, 2),
        ({"reason": "PartitionDown"}, 0),
        ({"reason": "PartitionInactive"}, 0),
        ({"reason": "PartitionTimeLimit"}, 0),
        ({"reason": "PartitionConfig"}, 0),  # GPU keeps every record it should: a partition that refuses the job
        ({"reason": "AssocMaxJobsLimit"}, 0),
        ({"reason": "AssocGrpNodeLimit"}, 0),
        ({"reason": "AssociationJobLimit"}, 0),
        ({"reason": "QOSMaxJobsPerUserLimit"}, 0),
        ({"reason": "QOSGrpGRES"}, 0),
        ({"reason": "Licenses"}, 0),
        ({"reason": "Reservation"}, 0),
        ({"reason": "BadConstraints"}, 0),
        ({"reason": "JobArrayTaskLimit", "array_tasks": "1-9%2"}, 0),
        # slurmctld's descriptions, as squeue prints them in place of the code
        ({"reason": "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions"}, 1),
        ({"reason": "ReqNodeNotAvail, May be reserved for other job"}, 1),
        ({"reason": "ReqNodeNotAvail, UnavailableNodes:gpu-worker-3", "required_nodes": "gpu-worker-3"}, 0),
        ({"reason": "Job's QOS not permitted to use this partition (gpu allows normal not low)"}, 0),
        ({"reason": "Job is at or exceeds QOS normal's max TRES(cpu) minutes of 100 with 120"}, 0),
        ({"reason": "Reservation maint was deleted"}, 0),
        ({"reason": "job requeued in held state", "priority": 0}, 0),
        ({"reason": "A description a newer Slurm writes"}, 1),
        # an array's line that lists its tasks' reasons: it counts while one of them counts
        ({"reason": "Resources,JobHeldUser", "array_tasks": "0-9"}, 10),
        ({"reason": "JobArrayTaskLimit,BeginTime", "array_tasks": "0-9"}, 0),
        ({"state": "RUNNING"}, 0),
        ({"state": "CONFIGURING"}, 0),
        ({"state": "COMPLETING"}, 0),
        ({"state": "REQUEUED"}, 1),
        ({"state": "EXPEDITING"}, 1),
    ],
    ids=["resources", "priority", "not-yet-evaluated", "partition-node-limit", "req-node-not-avail-no-nodelist",
         "node-down-no-nodelist", "sched-defer", "unknown-reason", "held", "held-user", "held-admin",
         "dependency", "dependency-never", "begin-time", "named-node-not-avail", "named-node-down",
         "named-node-busy", "named-nodes-all-it-asks", "named-one-of-three", "partition-down",
         "partition-inactive", "partition-time-limit", "partition-config-nothing-short",
         "assoc-max-jobs", "assoc-grp-node", "association-job-limit",
         "qos-max-jobs-per-user", "qos-grp-gres", "licenses", "reservation", "bad-constraints", "array-throttled",
         "described-resources", "described-req-node-not-avail", "described-named-node", "described-qos",
         "described-limit", "described-reservation", "described-requeue-hold", "described-newer",
         "array-reasons-one-curable", "array-reasons-none-curable", "running", "configuring", "completing",
         "requeued", "expediting"],
)
def test_which_pending_jobs_more_nodes_could_start(over: dict[str, Any], nodes: int) -> None:
    assert _demand(**over) == nodes


@pytest.mark.parametrize(
    ("features", "fits"),
    [
        ("", True),
        ("gpu", True),
        ("gpu&gpu", True),
        (" gpu ", True),
        ("gpu,gpu", True),
        ("gpu&ib", False),
        ("gpu,ib", False),
        ("cpu", False),
        ("gpu|cpu", True),
        ("cpu|gpu", True),
        ("cpu|ib", False),
        ("cpu&ib|gpu", True),
        ("[gpu|cpu]", False),
        ("gpu*2", False),
        ("[gpu*2&cpu*1]", False),
        ("(gpu)", False),
        ("gpu&", False),
        ("!gpu", False),
        ("gpu\nnodes=0", False),
    ],
    ids=["none", "its-feature", "and-itself", "spaces", "comma-is-and", "and-another", "comma-another",
         "another", "or-first", "or-second", "or-neither", "or-of-ands", "matching-or-not-judged",
         "count-not-judged", "multiple-counts-not-judged", "parentheses-not-judged", "dangling-and", "not",
         "newline"],
)
def test_constraint_expressions(features: str, fits: bool) -> None:
    assert _demand(features=features) == (1 if fits else 0)


def test_an_expression_not_judged_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    demand.feature_terms.cache_clear()
    with caplog.at_level(logging.INFO, logger="slurmpod.demand"):
        for _ in range(3):
            assert _demand(features="[rack1*2&rack2*4]") == 0
    assert len([r for r in caplog.records if "not judged" in r.getMessage()]) == 1


@pytest.mark.parametrize(
    ("over", "shape_gpus", "per_node", "fits"),
    [
        ({"tres_per_node": "gres/gpu:4"}, 8, 4, True),
        ({"tres_per_node": "gres/gpu:8"}, 8, 8, True),
        ({"tres_per_node": "gres/gpu:16"}, 8, 16, False),
        ({"tres_per_node": "gres/gpu:16"}, 0, 16, True),
        ({"tres_per_node": "gres/gpu:h100:2"}, 8, 2, True),
        ({"tres_per_node": "gres/gpu:h100"}, 8, 1, True),
        ({"tres_per_node": "gres/gpu"}, 8, 1, True),
        ({"tres_per_node": "gpu:2"}, 8, 2, True),
        ({"tres_per_node": "gres:gpu:3"}, 8, 3, True),
        ({"tres_per_node": "gres/gpu=4"}, 8, 4, True),
        ({"tres_per_node": "gres/shard:2,gres/gpu:a100:2"}, 8, 2, True),
        ({"tres_per_node": "gres/shard:9"}, 8, 0, True),
        ({"tres_per_job": "gres/gpu:16", "nodes": 2}, 8, 8, True),
        ({"tres_per_job": "gres/gpu:17", "nodes": 2}, 8, 9, False),
        ({"tres_per_task": "gres/gpu:1", "tasks_per_node": 4}, 8, 4, True),
        ({"tres_per_task": "gres/gpu:2", "tasks": 8, "nodes": 2}, 8, 8, True),
    ],
    ids=["four", "all-eight", "too-many", "unknown-shape", "typed", "typed-no-count", "no-count", "old-gres-form",
         "gres-colon", "equals", "beside-shards", "shards-only", "per-job-spread", "per-job-too-many",
         "per-task-times-tasks-per-node", "per-task-times-tasks-over-nodes"],
)
def test_gpus_per_node(over: dict[str, Any], shape_gpus: int, per_node: int, fits: bool) -> None:
    (job,) = _pending(**over)
    assert job.gpus_per_node == per_node
    shape = NodeSetShape("gpu", "gpu", ("main",), cpus=0, gpus=shape_gpus)
    assert demand.demand_nodes([job], shape) == (job.nodes if fits else 0)


@pytest.mark.parametrize(("cpus", "shape_cpus", "fits"), [(16, 32, True), (32, 32, True), (33, 32, False),
                                                           (512, 0, True)],
                         ids=["half", "all", "more-than-a-node", "unknown-shape"])
def test_cpus_per_node(cpus: int, shape_cpus: int, fits: bool) -> None:
    shape = NodeSetShape("gpu", "gpu", ("main",), cpus=shape_cpus, gpus=0)
    assert _demand(shape, cpus_per_node=cpus) == (1 if fits else 0)


@pytest.mark.parametrize(
    ("partitions", "shape_partitions", "fits"),
    [(("main",), ("main",), True), (("gpu", "main"), ("main",), True), (("debug", "gpu"), ("main", "gpu"), True),
     (("debug",), ("main", "gpu"), False), (("debug", "batch"), ("main",), False), ((), ("main",), False)],
    ids=["one", "second-of-two", "one-of-two-each", "another", "neither-of-two", "none"],
)
def test_partitions(partitions: tuple[str, ...], shape_partitions: tuple[str, ...], fits: bool) -> None:
    shape = NodeSetShape("gpu", "gpu", shape_partitions, cpus=0, gpus=0)
    assert _demand(shape, partitions=partitions) == (1 if fits else 0)


@pytest.mark.parametrize(
    ("array", "node_count", "nodes"),
    [
        ("1-10", 1, 10),
        ("1-10", 2, 20),
        ("1-10%3", 1, 3),
        ("1-2%3", 1, 2),
        ("1,3,5-7", 1, 5),
        ("0-99:3", 1, 34),
        ("1-3,5,7,9,11,13,15,17,19,21,23,25,27,29,31,33,35,37,39,41,43,45,47,...", 1, 25),
        ("1-3,5,7,9,11,13,15,17,19,21,23,25,27,29,31,33,35,37,39,41,43,45,47,...%4", 1, 4),
        ("7", 1, 1),
        ("3", 2, 2),
        ("garbled", 1, 1),
    ],
    ids=["ten-tasks", "ten-tasks-two-nodes", "throttled", "fewer-than-throttle", "list", "step", "cut-by-squeue",
         "cut-and-throttled", "one-task-record", "split-task", "unreadable"],
)
def test_a_pending_array_counts_the_tasks_that_may_start(array: str, node_count: int, nodes: int) -> None:
    assert _demand(nodes=node_count, array_tasks=array) == nodes


def test_each_nodeset_counts_the_jobs_it_fits_and_a_job_fitting_two_counts_twice() -> None:
    jobs = demand.pending_from([
        _job(1, features="gpu", nodes=2),
        _job(2, features="cpu", nodes=3),
        _job(3, nodes=4),
        _job(4, features="gpu|cpu"),
        _job(5, priority=0, nodes=100),
        _job(6, state="RUNNING", nodes=100),
    ])
    cpu = NodeSetShape("cpu", "cpu", ("main",), cpus=0, gpus=0)
    assert [j.job_id for j in jobs] == [1, 2, 3, 4]
    assert demand.demand_nodes(jobs, GPU) == 2 + 4 + 1
    assert demand.demand_nodes(jobs, cpu) == 3 + 4 + 1
    assert demand.demand_nodes((), GPU) == 0


BURST = NodeSetShape("burst", "burst", ("burst",), cpus=1, gpus=0, kept=("w-burst-0", "w-burst-1"))


def test_a_nodeset_is_short_while_a_record_it_keeps_is_missing() -> None:
    assert demand.with_records(BURST, {"w-burst-0", "w-burst-1", "w-0"}).short is False  # pods or placeholders
    assert demand.with_records(BURST, {"w-burst-0"}).short is True  # w-burst-1's placeholder deleted for its pod
    assert demand.with_records(BURST, set()).short is True
    assert demand.with_records(GPU, set()).short is False  # keeps no record: never short


@pytest.mark.parametrize(
    ("over", "records", "nodes"),
    [
        # The take-over: placeholders deleted, pods not registered: the partition is smaller than the nodeset.
        ({"reason": "PartitionConfig", "partitions": ("burst",)}, set(), 1),
        ({"reason": "PartitionConfig", "partitions": ("burst",)}, {"w-burst-1"}, 1),
        # Every record there: the partition itself refuses the job.
        ({"reason": "PartitionConfig", "partitions": ("burst",)}, {"w-burst-0", "w-burst-1"}, 0),
        # Held, or another partition's job, or too big for one node: never.
        ({"reason": "PartitionConfig", "partitions": ("burst",), "priority": 0}, set(), 0),
        ({"reason": "PartitionConfig", "partitions": ("main",)}, set(), 0),
        ({"reason": "PartitionConfig", "partitions": ("burst",), "cpus_per_node": 2}, set(), 0),
        # An array line whose other reason counts anyway; one whose other reason never does.
        ({"reason": "PartitionConfig,Resources", "partitions": ("burst",), "array_tasks": "0-1"},
         {"w-burst-0", "w-burst-1"}, 2),
        ({"reason": "PartitionConfig,JobHeldUser", "partitions": ("burst",), "array_tasks": "0-1"}, set(), 2),
    ],
    ids=["short-none-registered", "short-one-missing", "not-short", "held", "other-partition", "too-big",
         "array-other-reason-counts", "array-short"],
)
def test_partition_config_counts_only_for_a_short_nodeset(over: dict[str, Any], records: set[str],
                                                          nodes: int) -> None:
    assert _demand(demand.with_records(BURST, records), **over) == nodes


def test_with_capacity_takes_the_registered_nodes_of_the_nodeset() -> None:
    shape = NodeSetShape("gpu", "gpu", ("main",), cpus=0, gpus=0)
    nodes = [NodeState("gpu-0", "IDLE", cpus=64, features=("gpu",), gres="gpu:h100:8(S:0-1)"),
             NodeState("gpu-1", "IDLE", cpus=32, features=("gpu", "ib"), gres=""),
             NodeState("cpu-0", "IDLE", cpus=128, features=("cpu",))]
    assert demand.with_capacity(shape, nodes) == NodeSetShape("gpu", "gpu", ("main",), cpus=64, gpus=8)
    assert demand.with_capacity(shape, nodes[2:]) == shape  # none registered: unknown, no filter


@pytest.mark.parametrize(("text", "count"), [("1-10", 10), ("1-10%2", 10), ("5", 1), ("3,1", 2), ("0-9:2", 5),
                                             ("10-1", 0), ("", 0), ("1-4,...", 4)],
                         ids=["range", "throttle-not-an-id", "one", "list", "step", "backwards", "empty", "cut"])
def test_count_task_ids(text: str, count: int) -> None:
    assert demand.count_task_ids(text) == count


@pytest.mark.parametrize(("hostlist", "count"), [
    ("", 0), ("w-0", 1), ("w-0,w-1", 2), ("w-[0-3,7]", 5), ("w-[01-04]", 4), ("r[1-2]-n[01-04]", 8),
    ("w-[0-1],x-3", 3), (" w-0 , w-1 ", 2), ("w-[a-b]", 1), ("w-[0-1", 1),
], ids=["empty", "one", "two", "range-and-one", "padded", "two-brackets", "bracket-then-host", "spaces",
        "unreadable-range", "unclosed"])
def test_host_count(hostlist: str, count: int) -> None:
    assert demand.host_count(hostlist) == count
