"""Pending demand per NodeSet: which pending jobs more nodes could start, which NodeSet could run them, and
how many nodes they ask. Job records are shaped like `squeue --json` of Slurm 24.11 (data_parser v0.0.42;
26.05's v0.0.45 prints the same fields).

Ref: https://slurm.schedmd.com/rest_api.html#v0.0.42_job_info
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from slurmpod import demand
from slurmpod.demand import NodeSetShape, PendingJob
from slurmpod.errors import TransientError
from slurmpod.nodestate import NodeState


def _no(n: int = 0, *, set_: bool = True) -> dict[str, Any]:
    return {"set": set_, "infinite": False, "number": n}


def _job(job_id: int = 10, **over: Any) -> dict[str, Any]:
    """A pending one-node job in partition main, waiting for resources."""
    job: dict[str, Any] = {
        "job_id": job_id,
        "job_state": ["PENDING"],
        "state_reason": "Resources",
        "partition": "main",
        "features": "",
        "hold": False,
        "node_count": _no(1),
        "max_nodes": _no(0),
        "minimum_cpus_per_node": _no(1),
        "tasks": _no(1),
        "tasks_per_node": _no(0, set_=False),
        "tres_per_node": "",
        "tres_per_job": "",
        "tres_per_task": "",
        "required_nodes": "",
        "dependency": "",
        "array_job_id": _no(0),
        "array_task_id": _no(0, set_=False),
        "array_task_string": "",
        "array_max_tasks": _no(0),
    }
    job.update(over)
    return job


GPU = NodeSetShape("gpu", "gpu", ("main", "gpu"), cpus=32, gpus=8)


def _pending(**over: Any) -> tuple[PendingJob, ...]:
    return demand.parse_pending(json.dumps({"jobs": [_job(**over)]}))


def _demand(shape: NodeSetShape = GPU, **over: Any) -> int:
    return demand.demand_nodes(_pending(**over), shape)


def test_parse_pending_fields() -> None:
    (job,) = _pending(job_id=42, partition="gpu,main", features="gpu&ib", node_count=_no(4),
                      minimum_cpus_per_node=_no(16), tres_per_node="gres/gpu:h100:8")
    assert job == PendingJob(job_id=42, partitions=("gpu", "main"), features="gpu&ib", nodes=4, gpus_per_node=8,
                             cpus_per_node=16)


@pytest.mark.parametrize(
    ("over", "nodes"),
    [
        ({}, 1),
        ({"state_reason": "Priority"}, 1),
        ({"state_reason": "None"}, 1),
        ({"state_reason": "PartitionNodeLimit", "node_count": _no(3)}, 3),
        ({"state_reason": "ReqNodeNotAvail"}, 1),
        ({"state_reason": "NodeDown"}, 1),
        ({"state_reason": "SchedDefer"}, 1),
        ({"state_reason": "ReasonFromANewerSlurm"}, 1),
        ({"hold": True, "state_reason": "Resources"}, 0),
        ({"state_reason": "JobHeldUser"}, 0),
        ({"state_reason": "JobHeldAdmin"}, 0),
        ({"state_reason": "Dependency", "dependency": "afterok:9(unfulfilled)"}, 0),
        ({"state_reason": "DependencyNeverSatisfied"}, 0),
        ({"state_reason": "BeginTime"}, 0),
        ({"state_reason": "ReqNodeNotAvail", "required_nodes": "gpu-worker-3"}, 0),
        ({"state_reason": "NodeDown", "required_nodes": "gpu-worker-3"}, 0),
        ({"state_reason": "Priority", "required_nodes": "gpu-worker-3"}, 0),
        ({"state_reason": "Resources", "required_nodes": "gpu-worker-[0-1]", "node_count": _no(2)}, 0),
        ({"state_reason": "Resources", "required_nodes": "gpu-worker-3", "node_count": _no(3)}, 2),
        ({"state_reason": "PartitionDown"}, 0),
        ({"state_reason": "PartitionInactive"}, 0),
        ({"state_reason": "PartitionTimeLimit"}, 0),
        ({"state_reason": "AssocMaxJobsLimit"}, 0),
        ({"state_reason": "AssocGrpNodeLimit"}, 0),
        ({"state_reason": "AssociationJobLimit"}, 0),
        ({"state_reason": "QOSMaxJobsPerUserLimit"}, 0),
        ({"state_reason": "QOSGrpGRES"}, 0),
        ({"state_reason": "Licenses"}, 0),
        ({"state_reason": "Reservation"}, 0),
        ({"state_reason": "BadConstraints"}, 0),
        ({"state_reason": "JobArrayTaskLimit", "array_task_string": "1-9%2"}, 0),
        ({"job_state": ["RUNNING"]}, 0),
        ({"job_state": ["PENDING", "REQUEUED"]}, 1),
    ],
    ids=["resources", "priority", "not-yet-evaluated", "partition-node-limit", "req-node-not-avail-no-nodelist",
         "node-down-no-nodelist", "sched-defer", "unknown-reason", "hold-flag", "held-user", "held-admin",
         "dependency", "dependency-never", "begin-time", "named-node-not-avail", "named-node-down",
         "named-node-busy", "named-nodes-all-it-asks", "named-one-of-three", "partition-down",
         "partition-inactive", "partition-time-limit", "assoc-max-jobs", "assoc-grp-node", "association-job-limit",
         "qos-max-jobs-per-user", "qos-grp-gres", "licenses", "reservation", "bad-constraints", "array-throttled",
         "running", "pending-with-a-flag"],
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
        ({"tres_per_job": "gres/gpu:16", "node_count": _no(2)}, 8, 8, True),
        ({"tres_per_job": "gres/gpu:17", "node_count": _no(2)}, 8, 9, False),
        ({"tres_per_task": "gres/gpu:1", "tasks_per_node": _no(4)}, 8, 4, True),
        ({"tres_per_task": "gres/gpu:2", "tasks": _no(8), "node_count": _no(2)}, 8, 8, True),
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
    assert _demand(shape, minimum_cpus_per_node=_no(cpus)) == (1 if fits else 0)


@pytest.mark.parametrize(
    ("partition", "shape_partitions", "fits"),
    [("main", ("main",), True), ("gpu,main", ("main",), True), ("debug,gpu", ("main", "gpu"), True),
     ("debug", ("main", "gpu"), False), ("debug,batch", ("main",), False), ("", ("main",), False)],
    ids=["one", "second-of-two", "one-of-two-each", "another", "neither-of-two", "none"],
)
def test_partitions(partition: str, shape_partitions: tuple[str, ...], fits: bool) -> None:
    shape = NodeSetShape("gpu", "gpu", shape_partitions, cpus=0, gpus=0)
    assert _demand(shape, partition=partition) == (1 if fits else 0)


@pytest.mark.parametrize(
    ("array", "node_count", "nodes"),
    [
        ({"array_task_string": "1-10"}, 1, 10),
        ({"array_task_string": "1-10"}, 2, 20),
        ({"array_task_string": "1-10%3", "array_max_tasks": _no(3)}, 1, 3),
        ({"array_task_string": "1-2%3", "array_max_tasks": _no(3)}, 1, 2),
        ({"array_task_string": "1,3,5-7"}, 1, 5),
        ({"array_task_string": "0-99:3"}, 1, 34),
        ({"array_task_string": "1-3,5,7,9,11,13,15,17,19,21,23,25,27,29,31,33,35,37,39,41,43,45,47,..."}, 1, 25),
        ({"array_task_string": "7", "array_task_id": _no(7)}, 1, 1),
        ({"array_task_string": "", "array_task_id": _no(3)}, 2, 2),
        ({"array_task_string": "garbled"}, 1, 1),
    ],
    ids=["ten-tasks", "ten-tasks-two-nodes", "throttled", "fewer-than-throttle", "list", "step", "cut-by-squeue",
         "one-task-record", "requeued-task", "unreadable"],
)
def test_a_pending_array_counts_the_tasks_that_may_start(array: dict[str, Any], node_count: int, nodes: int) -> None:
    assert _demand(node_count=_no(node_count), **array) == nodes


def test_each_nodeset_counts_the_jobs_it_fits_and_a_job_fitting_two_counts_twice() -> None:
    jobs = demand.parse_pending(json.dumps({"jobs": [
        _job(1, features="gpu", node_count=_no(2)),
        _job(2, features="cpu", node_count=_no(3)),
        _job(3, node_count=_no(4)),
        _job(4, features="gpu|cpu"),
        _job(5, hold=True, node_count=_no(100)),
        _job(6, job_state=["RUNNING"], node_count=_no(100)),
    ]}))
    cpu = NodeSetShape("cpu", "cpu", ("main",), cpus=0, gpus=0)
    assert [j.job_id for j in jobs] == [1, 2, 3, 4]
    assert demand.demand_nodes(jobs, GPU) == 2 + 4 + 1
    assert demand.demand_nodes(jobs, cpu) == 3 + 4 + 1
    assert demand.demand_nodes((), GPU) == 0


@pytest.mark.parametrize("text", ["", "squeue: error: Invalid user", '{"jobs": [', "[]"],
                         ids=["empty", "text", "half-written", "list"])
def test_parse_pending_refuses_what_is_not_a_squeue_document(text: str) -> None:
    with pytest.raises(TransientError):
        demand.parse_pending(text)


def test_parse_pending_tolerates_odd_shapes() -> None:
    doc = {"jobs": [None, 3, {"job_id": 5, "job_state": "PENDING", "partition": "main"},
                    {"job_id": 6, "job_state": "PENDING+REQUEUED", "partition": None, "features": None}]}
    jobs = demand.parse_pending(json.dumps(doc))
    assert [(j.job_id, j.nodes, j.partitions, j.features) for j in jobs] == [(5, 1, ("main",), ""), (6, 1, (), "")]
    assert demand.parse_pending('{"jobs": {}}') == ()
    assert demand.parse_pending("{}") == ()


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
