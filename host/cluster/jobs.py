"""Jobs as `scontrol show job --json` reports them: the fields the demo and the cluster tests read.

One reader for both flavors: 24.11 and 26.05 print the same job_info fields (their data_parser versions
differ, the names and shapes of these fields do not). Finished jobs stay listed for MinJobAge.
Ref: https://slurm.schedmd.com/rest_api.html#v0.0.42_job_info
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slurmpod.nodestate import load_json

# JobState's flags in the order `scontrol show job` picks one to print over the base state.
# Ref: SchedMD/slurm src/common/slurm_protocol_defs.c job_state_string()
_STATE_FLAGS = ("COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
                "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD", "SIGNALING")


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One job (or one array task) as slurmctld holds it."""

    job_id: int
    state: str  # JobState as scontrol prints it: a flag such as COMPLETING or REQUEUED when set, else the base
    reason: str  # Reason: the state's description when Slurm gave one, else its reason code (None, BeginTime, ...)
    partition: str = ""
    requeue: bool = False  # the Requeue flag: may the job be requeued
    time_limit_min: int | None = None  # TimeLimit in minutes; None when unlimited or unset
    nodes: str = ""  # NodeList, a hostlist expression; empty until the job is allocated
    batch_host: str = ""
    restarts: int = 0  # Restarts: how many times it was requeued
    array_job_id: int | None = None
    array_task_id: int | None = None
    switches: int = 0  # --switches count; 0 when not asked for
    switch_wait_s: int = 0  # --switches' maximum wait, in seconds
    start_time: int | None = None  # StartTime, epoch seconds: actual, or expected while pending


def _no_val(value: Any) -> int | None:
    """Slurm's {"set", "infinite", "number"} wrapper: the number, or None when unset or infinite."""
    if isinstance(value, Mapping):
        if not value.get("set", True) or value.get("infinite", False):
            return None
        value = value.get("number")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def state_of(raw: Any) -> str:
    """JobState from job_state (a list of the base state and its flags; a string in older data_parsers)."""
    states = [str(s) for s in raw] if isinstance(raw, list) else [str(raw)] if raw else []
    flag = next((f for f in _STATE_FLAGS if f in states), None)
    base = next((s for s in states if s not in _STATE_FLAGS), "?")
    return flag or base


def record(job: Mapping[str, Any]) -> JobRecord:
    description = str(job.get("state_description", "") or "")
    return JobRecord(
        job_id=int(job.get("job_id", 0) or 0),
        state=state_of(job.get("job_state")),
        reason=description or str(job.get("state_reason", "") or ""),
        partition=str(job.get("partition", "") or ""),
        requeue=bool(job.get("requeue", False)),
        time_limit_min=_no_val(job.get("time_limit")),
        nodes=str(job.get("nodes", "") or ""),
        batch_host=str(job.get("batch_host", "") or ""),
        restarts=int(job.get("restart_cnt", 0) or 0),
        array_job_id=_no_val(job.get("array_job_id")) or None,  # 0: not an array
        array_task_id=_no_val(job.get("array_task_id")),
        switches=int(job.get("required_switches", 0) or 0),
        switch_wait_s=int(job.get("maximum_switch_wait_time", 0) or 0),
        start_time=_no_val(job.get("start_time")),
    )


def parse(text: str) -> tuple[JobRecord, ...]:
    """Every job of a `scontrol show job --json` document."""
    jobs = load_json(text, "scontrol show job --json").get("jobs", [])
    return tuple(record(j) for j in jobs if isinstance(j, Mapping)) if isinstance(jobs, list) else ()


def one(text: str, job_id: int | str) -> JobRecord:
    """The record of ``job_id`` (an array job's own record when it lists its tasks)."""
    jobs = parse(text)
    for job in jobs:
        if job.job_id == int(job_id):
            return job
    if not jobs:
        raise ValueError(f"scontrol show job {job_id} --json listed no job")
    return jobs[0]


def argv(job_id: int | str | None = None) -> list[str]:
    """The command that prints one job (or every job slurmctld still holds) for ``parse``."""
    return ["scontrol", "show", "job", "--json", *([] if job_id is None else [str(job_id)])]


def slurm_time(minutes: int | None) -> str:
    """Minutes as Slurm prints a time limit: ``[D-]HH:MM:SS``, or UNLIMITED."""
    if minutes is None:
        return "UNLIMITED"
    days, rest = divmod(minutes, 24 * 60)
    text = f"{rest // 60:02d}:{rest % 60:02d}:00"
    return f"{days}-{text}" if days else text
