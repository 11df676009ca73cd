"""`slurmpod prestop`: leave Slurm without losing a job, inside terminationGracePeriodSeconds.

1. read the node's record; a node held by someone else (an admin's or a health check's drain, a DOWN
   with a reason) keeps that reason; otherwise drain it with `slurmpod: pod terminating`;
2. requeue its batch jobs one by one so they run again elsewhere; a job that ended meanwhile or that
   Slurm will not requeue (an interactive step, --no-requeue) is reported, never fatal;
3. wait (bounded) for the jobs to leave; stop slurmd so kubelet's SIGTERM finds it gone;
4. delete the dynamic node once it is empty and drained by us, so the pod that replaces it registers
   its own definition (slurmctld keeps an existing dynamic node's record when a slurmd of the same name
   registers again). A node held by someone else is kept, with its reason, for the next pod;
5. make the requeued jobs eligible at once: slurmctld gives a requeued job a begin time ahead (the hold
   docs/requeue.md describes) when it requeues it, which for a job of several nodes is only once every
   one of them is done with it (until then squeue shows it COMPLETING). So preStop waits (bounded) for
   that, and a release before it would be overwritten.
Each step is retried until the deadline. "The controller did not answer" is never read as "no node
record": without an answer preStop drains nothing, overwrites no reason and deletes nothing.
Ref: https://kubernetes.io/docs/concepts/containers/container-lifecycle-hooks/
Ref: https://slurm.schedmd.com/scontrol.html#OPT_requeue
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from slurmpod import logs, podinfo, reasons
from slurmpod import well_known as wk
from slurmpod.entrypoints.supervisor import Supervisor, SupervisorCtl
from slurmpod.errors import BadInput, PermanentError, SlurmpodError, TransientError
from slurmpod.slurm import CliSlurmClient, SlurmClient
from slurmpod.timing import Clock, Deadline, SystemClock

log = logging.getLogger(__name__)
T = TypeVar("T")

POLL_SECONDS = 0.2
# Keep this much of the grace period for supervisord to stop the daemons after we return.
RESERVE_SECONDS = 3.0
# The longest one scontrol/squeue call may take.
STEP_TIMEOUT = 10.0
# The state and flags of a job whose requeue slurmctld has not finished: PENDING with COMPLETING until every
# node of the job is done with it, then PENDING alone. Ref: https://slurm.schedmd.com/squeue.html#SECTION_JOB-STATE-CODES
REQUEUE_UNDER_WAY = frozenset({"COMPLETING", "REQUEUED"})
# Of the grace period, what the wait for those requeues leaves for the release itself.
RELEASE_RESERVE_SECONDS = 2.0
# How often that wait asks for the requeued jobs' states (one light RPC that reads only those jobs): the
# wait is for KillWait and epilogs on the jobs' other nodes, seconds.
REQUEUE_POLL_SECONDS = 0.5


@dataclass
class Report:
    """What preStop did; logged, and the exit code is 1 when the controller never answered."""

    node: str
    reached_controller: bool = False
    record: bool = False  # slurmctld has a record of the node
    kept_reason: str = ""  # someone else's hold, left as it was
    drained: bool = False
    requeued: list[int] = field(default_factory=list)
    not_requeued: dict[int, str] = field(default_factory=dict)
    emptied: bool = False
    requeues_done: bool = False  # slurmctld finished every requeue before the release
    released: bool = False
    slurmd_stopped: bool = False
    deleted: bool = False
    errors: list[str] = field(default_factory=list)


class _Gave_up(Exception):
    pass


def _retry(deadline: Deadline, report: Report, what: str, step: Callable[[float], T]) -> T:
    """Run ``step(timeout)`` until it succeeds or the deadline passes (then _Gave_up).

    SlurmRefused (slurmctld said no) is not retried: it is raised to the caller.
    """
    last = ""
    while not deadline.expired:
        try:
            return step(deadline.budget(STEP_TIMEOUT))
        except TransientError as exc:
            last = str(exc)
            deadline.sleep(POLL_SECONDS)
    report.errors.append(f"{what}: gave up at the deadline: {last}")
    raise _Gave_up(what)


def run(client: SlurmClient, supervisor: Supervisor, node: str, grace: float, *, clock: Clock | None = None,
        stop_slurmd: bool = True) -> Report:
    clock = clock or SystemClock()
    deadline = Deadline(clock, max(1.0, grace - RESERVE_SECONDS))
    report = Report(node)
    try:
        _leave_slurm(client, node, deadline, report)
    except _Gave_up:  # what could not be done is in report.errors
        pass
    except PermanentError as exc:  # slurmctld refused a step: keep what is left, still stop slurmd
        report.errors.append(f"slurmctld refused: {exc}")
    if stop_slurmd:
        report.slurmd_stopped = supervisor.control("stop", "slurmd", timeout=deadline.budget(STEP_TIMEOUT))
        if report.emptied and report.drained:
            try:
                _retry(deadline, report, "delete node", lambda t: client.delete_node(node, timeout=t))
                report.deleted = True
            except _Gave_up:
                pass
            except PermanentError as exc:  # e.g. a job still completing: the next pod clears our drain
                report.errors.append(f"node not deleted: {exc}")
    _release(client, deadline, report)
    _log(report)
    return report


def _requeuer(client: SlurmClient, job_id: int) -> Callable[[float], None]:
    return lambda timeout: client.requeue(job_id, timeout=timeout)


def _leave_slurm(client: SlurmClient, node: str, deadline: Deadline, report: Report) -> None:
    state = _retry(deadline, report, "read node", lambda t: client.node(node, timeout=t))
    report.reached_controller = True
    if state is None:
        return  # no record (never registered, or deleted): nothing to drain or requeue
    report.record = True
    hold = reasons.hold(state)
    if hold.foreign:
        report.kept_reason = hold.reason
    else:
        _retry(deadline, report, "drain", lambda t: client.drain(node, reasons.POD_TERMINATING, timeout=t))
        report.drained = True
    jobs = _retry(deadline, report, "list jobs", lambda t: client.jobs_on_node(node, timeout=t))
    for job in jobs:
        if not job.batch:
            report.not_requeued[job.job_id] = "not a batch job (interactive allocations end with the pod)"
            continue
        if job.completing:
            report.not_requeued[job.job_id] = "ended, completing (a requeue would run it again)"
            continue
        try:
            _retry(deadline, report, f"requeue {job.job_id}", _requeuer(client, job.job_id))
            report.requeued.append(job.job_id)
        except PermanentError as exc:  # ended meanwhile, or --no-requeue: report and go on
            report.not_requeued[job.job_id] = str(exc)
    while not deadline.expired:
        try:
            if not client.jobs_on_node(node, timeout=deadline.budget(5.0)):
                report.emptied = True
                break
        except TransientError:
            pass
        deadline.sleep(POLL_SECONDS)


def _requeues_done(client: SlurmClient, job_ids: frozenset[int], timeout: float) -> bool:
    states = client.job_states(sorted(job_ids), timeout=timeout)
    return not any(flags & REQUEUE_UNDER_WAY for flags in states.values())


def _release(client: SlurmClient, deadline: Deadline, report: Report) -> None:
    """Make the jobs preStop requeued eligible now, once slurmctld has requeued them all (or at the
    deadline, less RELEASE_RESERVE_SECONDS: a job that is still completing then waits out its hold)."""
    if not (report.emptied and report.requeued):
        return
    job_ids = frozenset(report.requeued)
    while deadline.left() > RELEASE_RESERVE_SECONDS:
        try:
            if _requeues_done(client, job_ids, deadline.budget(min(STEP_TIMEOUT, deadline.left()
                                                                   - RELEASE_RESERVE_SECONDS))):
                report.requeues_done = True
                break
        except SlurmpodError:  # no answer, or a refusal: wait on, bounded; the release is tried anyway
            pass
        deadline.sleep(REQUEUE_POLL_SECONDS)
    if not report.requeues_done:
        report.errors.append("requeued jobs still completing at the deadline; they may wait out their hold")
    try:
        _retry(deadline, report, "release requeued jobs", lambda t: client.start_now(report.requeued, timeout=t))
        report.released = True
    except _Gave_up:  # in report.errors
        pass
    except PermanentError as exc:  # e.g. a job the user cancelled meanwhile: the rest wait out the delay
        report.errors.append(f"requeued jobs keep their begin time: {exc}")


def _log(report: Report) -> None:
    ctx = {
        "node": report.node,
        "drained": report.drained,
        "kept_reason": report.kept_reason,
        "requeued": ",".join(map(str, report.requeued)),
        "not_requeued": "; ".join(f"{j}: {why}" for j, why in report.not_requeued.items()),
        "deleted": report.deleted,
        "errors": "; ".join(report.errors),
    }
    level = logging.INFO if report.reached_controller and not report.errors else logging.WARNING
    log.log(level, "prestop done", extra={"ctx": ctx})


def main(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    pod = podinfo.identity(env)
    node = pod.name
    if not node:
        raise BadInput.one(wk.ENV_POD_NAME, "", "required (fieldRef metadata.name)")
    if args.grace <= 0:
        raise BadInput.one(wk.ENV_GRACE_SECONDS, args.grace, "must be positive")
    logs.mirror_to(wk.POD_LOG_STREAM)  # what preStop did, in `kubectl logs` beside the daemons' lines
    try:
        report = run(CliSlurmClient(), SupervisorCtl(pod.run_dir), node, args.grace)
    except SlurmpodError as exc:
        log.error("prestop failed", extra={"ctx": {"node": node, "err": str(exc)}})
        return 1
    return 0 if report.reached_controller else 1
