"""Pure parsers of Slurm's JSON output, against documents shaped like Slurm 24.11's (data_parser v0.0.42).

Ref: https://slurm.schedmd.com/rest_api.html (v0.0.42 node and job schemas; scontrol/squeue --json
print the same documents)
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from slurmpod import nodestate, slurm
from slurmpod.errors import TransientError
from slurmpod.nodestate import NodeState


def _time(n: int) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": n}


META = {
    "plugin": {"type": "", "name": "", "data_parser": "data_parser/v0.0.42", "accounting_storage": ""},
    "client": {"source": "/dev/pts/0", "user": "root", "group": "root"},
    "command": ["show", "nodes"],
    "slurm": {"version": {"major": "24", "micro": "5", "minor": "11"}, "release": "24.11.5", "cluster": "slurmpod"},
}


def _node(name: str, state: list[str], **over: Any) -> dict[str, Any]:
    node: dict[str, Any] = {
        "architecture": "x86_64",
        "burstbuffer_network_address": "",
        "boards": 1,
        "boot_time": _time(1732000000),
        "cluster_name": "",
        "cores": 2,
        "specialized_cores": 0,
        "cpu_binding": 0,
        "cpu_load": 4,
        "free_mem": _time(20480),
        "cpus": 2,
        "effective_cpus": 2,
        "specialized_cpus": "",
        "energy": {
            "average_watts": 0,
            "base_consumed_energy": 0,
            "consumed_energy": 0,
            "current_watts": {"set": False, "infinite": False, "number": 0},
            "previous_consumed_energy": 0,
            "last_collected": 0,
        },
        "external_sensors": {},
        "extra": "",
        "power": {},
        "features": ["workers"],
        "active_features": ["workers"],
        "gpu_spec": "",
        "gres": "",
        "gres_drained": "N/A",
        "gres_used": "",
        "instance_id": "",
        "instance_type": "",
        "last_busy": _time(1732000100),
        "mcs_label": "",
        "specialized_memory": 0,
        "name": name,
        "next_state_after_reboot": ["INVALID"],
        "address": name,
        "hostname": name,
        "state": state,
        "operating_system": "Linux 6.1.0-28-cloud-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1",
        "owner": "",
        "partitions": ["main"],
        "port": 6818,
        "real_memory": 24105,
        "res_cores_per_gpu": 0,
        "comment": "",
        "reason": "",
        "reason_changed_at": _time(0),
        "reason_set_by_user": "",
        "resume_after": _time(0),
        "reservation": "",
        "alloc_memory": 0,
        "alloc_cpus": 0,
        "alloc_idle_cpus": 2,
        "tres_used": "",
        "tres_weighted": 0.0,
        "slurmd_start_time": _time(1732000050),
        "sockets": 1,
        "threads": 1,
        "temporary_disk": 0,
        "weight": 1,
        "tres": "cpu=2,mem=24105M,billing=2",
        "version": "24.11.5",
    }
    node.update(over)
    return node


SHOW_NODES = {
    "nodes": [
        _node(
            "slurmpod-worker-0",
            ["IDLE", "DYNAMIC_NORM"],
            specialized_cores=1,
            specialized_memory=12052,
            effective_cpus=1,
            specialized_cpus="1",
        ),
        _node(
            "slurmpod-worker-1",
            ["IDLE", "DRAIN", "DYNAMIC_NORM"],
            reason="slurmpod: pod terminating",
            reason_set_by_user="root",
            features=["workers", "h100"],
        ),
        _node("slurmpod-worker-2", ["DOWN", "NOT_RESPONDING", "DYNAMIC_NORM"], reason="Not responding"),
        _node("static-0", ["MIXED"], features=[], cpus=64, real_memory=515000),
        _node(
            "slurmpod-worker-3",
            ["IDLE", "INVALID_REG", "DYNAMIC_NORM"],
            reason="Low RealMemory (reported:1000 < 100.00% of configured:24105)",
        ),
        _node("slurmpod-worker-4", ["ALLOCATED", "COMPLETING", "DYNAMIC_NORM"]),
    ],
    "last_update": _time(1732000200),
    "meta": META,
    "errors": [],
    "warnings": [],
}


def test_parse_nodes_fields() -> None:
    nodes = nodestate.parse_nodes(json.dumps(SHOW_NODES))
    assert [n.name for n in nodes] == [
        "slurmpod-worker-0",
        "slurmpod-worker-1",
        "slurmpod-worker-2",
        "static-0",
        "slurmpod-worker-3",
        "slurmpod-worker-4",
    ]
    w0 = nodes[0]
    assert w0 == NodeState(
        name="slurmpod-worker-0",
        base="IDLE",
        flags=frozenset({"DYNAMIC_NORM"}),
        reason="",
        cpus=2,
        real_memory=24105,
        specialized_cores=1,
        specialized_memory=12052,
        features=("workers",),
        active_features=("workers",),
        last_busy=1732000100,  # LastBusyTime, from its {set, infinite, number} wrapper
    )
    assert w0.dynamic
    assert nodes[1].reason == "slurmpod: pod terminating"
    assert nodes[1].features == ("workers", "h100")
    assert nodes[3].dynamic is False
    assert (nodes[3].cpus, nodes[3].real_memory, nodes[3].features) == (64, 515000, ())


@pytest.mark.parametrize(
    ("index", "usable"),
    [(0, True), (1, False), (2, False), (3, True), (4, False), (5, True)],
    ids=["idle", "drain", "down-not-responding", "mixed", "invalid-reg", "allocated-completing"],
)
def test_usable(index: int, usable: bool) -> None:
    assert nodestate.parse_nodes(json.dumps(SHOW_NODES))[index].usable is usable


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (5, 5),
        (None, 0),
        ({"set": True, "infinite": False, "number": 7}, 7),
        ({"set": False, "infinite": False, "number": 7}, 0),
        ({"number": 9}, 9),
    ],
    ids=["plain", "null", "set", "unset", "no-set-flag"],
)
def test_number_wrappers(value: object, expected: int) -> None:
    doc = {"nodes": [{"name": "n", "state": "IDLE", "real_memory": value}]}
    assert nodestate.parse_nodes(json.dumps(doc))[0].real_memory == expected


def test_parse_nodes_tolerates_older_shapes() -> None:
    doc = {"nodes": [{"name": "n", "state": "DOWN", "reason": None, "features": None}]}
    (node,) = nodestate.parse_nodes(json.dumps(doc))
    assert (node.base, node.flags) == ("DOWN", frozenset())
    assert (node.reason, node.features, node.cpus) == ("", (), 0)
    assert nodestate.parse_nodes(json.dumps({"nodes": [], "meta": META})) == ()
    assert nodestate.parse_nodes("{}") == ()


@pytest.mark.parametrize("text", ["scontrol: error: Invalid node name specified", '{"nodes": [', "[]",
                                  '{"nodes": 3}', ""], ids=["text", "truncated", "list", "nodes-not-list", "empty"])
def test_parse_nodes_refuses_what_is_not_a_node_document(text: str) -> None:
    """Output that is not JSON is a TransientError (retried by callers), never a traceback."""
    with pytest.raises(TransientError):
        nodestate.parse_nodes(text)


def _job(job_id: int, state: list[str], batch: bool) -> dict[str, Any]:
    return {
        "account": "",
        "accrue_time": _time(1732000000),
        "batch_flag": batch,
        "batch_host": "slurmpod-worker-0",
        "command": "/home/researcher/train.sh" if batch else "hostname",
        "cpus": _time(2),
        "current_working_directory": "/home/researcher",
        "end_time": _time(1732086400),
        "job_id": job_id,
        "job_state": state,
        "name": "train" if batch else "hostname",
        "nodes": "slurmpod-worker-0",
        "partition": "main",
        "priority": _time(1),
        "requeue": True,
        "start_time": _time(1732000001),
        "state_reason": "None",
        "time_limit": {"set": False, "infinite": True, "number": 0},
        "user_name": "researcher",
        "user_id": 2000,
    }


SQUEUE = {
    "jobs": [_job(42, ["RUNNING"], True), _job(43, ["COMPLETING"], False), _job(44, ["RUNNING", "REQUEUED"], True),
             _job(45, ["CANCELLED", "COMPLETING"], True)],
    "last_backfill": _time(1732000150),
    "last_update": _time(1732000200),
    "meta": {**META, "command": ["squeue", "--json"]},
    "errors": [],
    "warnings": [],
}


def test_parse_squeue() -> None:
    assert slurm.parse_jobs(json.dumps(SQUEUE)) == (
        slurm.Job(42, True, "RUNNING", True, "researcher"),
        slurm.Job(43, False, "COMPLETING", True, "researcher", completing=True),
        slurm.Job(44, True, "RUNNING", True, "researcher"),
        slurm.Job(45, True, "CANCELLED", True, "researcher", completing=True),  # cancelled, in its epilog
    )


def test_parse_squeue_older_and_empty_shapes() -> None:
    doc = {"jobs": [{"job_id": {"set": True, "infinite": False, "number": 7}, "job_state": "PENDING"}]}
    assert slurm.parse_jobs(json.dumps(doc)) == (slurm.Job(7, False, "PENDING"),)
    assert slurm.parse_jobs(json.dumps({"jobs": [], "meta": META})) == ()
    with pytest.raises(TransientError):
        slurm.parse_jobs("squeue: error: slurm_load_jobs error: Unable to contact slurm controller")
