"""`scontrol show job --json` read into job records, the way scontrol's text shows the same fields."""

from __future__ import annotations

import json
from typing import Any

import pytest

from slurmpod.errors import TransientError
from slurmpod_host.cluster import jobs


def _unset() -> dict[str, Any]:
    return {"set": False, "infinite": False, "number": 0}


def _set(n: int) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": n}


# The shape of a job in data_parser v0.0.42 (Slurm 24.11), trimmed to what the reader looks at and a few
# fields it must ignore.
RUNNING = {
    "job_id": 12, "job_state": ["RUNNING"], "state_reason": "None", "state_description": "",
    "partition": "preempt", "requeue": True, "time_limit": _set(60), "nodes": "sptest-worker-[0-1]",
    "batch_host": "sptest-worker-0", "restart_cnt": 1, "array_job_id": _set(0), "array_task_id": _unset(),
    "required_switches": 1, "maximum_switch_wait_time": 300, "start_time": _set(1700000000),
    "name": "wrap", "user_name": "researcher", "tres_req_str": "cpu=2,node=2",
}


def _doc(*items: dict[str, Any]) -> str:
    return json.dumps({"jobs": list(items), "meta": {}, "errors": [], "warnings": []})


def test_a_running_job() -> None:
    assert jobs.one(_doc(RUNNING), 12) == jobs.JobRecord(
        job_id=12, state="RUNNING", reason="None", partition="preempt", requeue=True, time_limit_min=60,
        nodes="sptest-worker-[0-1]", batch_host="sptest-worker-0", restarts=1, array_job_id=None,
        array_task_id=None, switches=1, switch_wait_s=300, start_time=1700000000)


@pytest.mark.parametrize(("states", "shown"), [
    (["PENDING"], "PENDING"),
    (["RUNNING", "CONFIGURING"], "CONFIGURING"),
    (["COMPLETED", "COMPLETING"], "COMPLETING"),
    (["PENDING", "REQUEUED"], "REQUEUED"),
    (["COMPLETING", "RUNNING"], "COMPLETING"),
    ("COMPLETED", "COMPLETED"),
    ([], "?"),
], ids=["base", "configuring", "completing", "requeued", "flag-first", "older-string", "empty"])
def test_job_state_is_what_scontrol_prints(states: Any, shown: str) -> None:
    assert jobs.state_of(states) == shown


def test_pending_held_and_unlimited() -> None:
    held = {"job_id": 13, "job_state": ["PENDING"], "state_reason": "JobHeldUser", "partition": "main",
            "requeue": False, "time_limit": {"set": True, "infinite": True, "number": 0}, "nodes": "",
            "restart_cnt": 0}
    job = jobs.one(_doc(held), "13")
    assert (job.state, job.reason, job.time_limit_min, job.nodes, job.requeue) == (
        "PENDING", "JobHeldUser", None, "", False)


def test_a_description_is_the_reason_shown() -> None:
    failed = {**RUNNING, "job_state": ["PENDING"], "state_reason": "BeginTime",
              "state_description": "requeued after a prolog failure"}
    assert jobs.one(_doc(failed), 12).reason == "requeued after a prolog failure"


def test_an_array_lists_its_tasks_and_one_finds_the_asked_job() -> None:
    tasks = [{**RUNNING, "job_id": 20 + i, "array_job_id": _set(20), "array_task_id": _set(i)} for i in range(3)]
    assert [(j.job_id, j.array_job_id, j.array_task_id) for j in jobs.parse(_doc(*tasks))] == [
        (20, 20, 0), (21, 20, 1), (22, 20, 2)]
    assert jobs.one(_doc(*tasks), 22).array_task_id == 2


def test_no_json_is_transient_and_no_job_is_an_error() -> None:
    with pytest.raises(TransientError):
        jobs.parse("scontrol: error: Invalid job id specified")
    with pytest.raises(ValueError, match="listed no job"):
        jobs.one(_doc(), 5)


@pytest.mark.parametrize(("minutes", "text"), [(30, "00:30:00"), (60, "01:00:00"), (1500, "1-01:00:00"),
                                               (None, "UNLIMITED")], ids=["30m", "1h", "day", "unlimited"])
def test_slurm_time(minutes: int | None, text: str) -> None:
    assert jobs.slurm_time(minutes) == text


def test_argv() -> None:
    assert jobs.argv(7) == ["scontrol", "show", "job", "--json", "7"]
    assert jobs.argv() == ["scontrol", "show", "job", "--json"]
