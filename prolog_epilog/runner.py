"""Run the checks of one context, one after another on a thread of their own, each under its timeout,
all under one deadline.

A check past its timeout is a failure ("timed out after N s") and the run moves on, on a new thread;
the stuck one is a daemon, so a check stuck in a C call (a wedged driver) never keeps the process
alive. When the overall deadline has passed, the checks not yet started are reported as skipped, never
run. ``run_verdicts`` keeps a check past its timeout as ``Unknown`` (what the health agent answers);
``resolve`` turns it into that failure.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.config import Config
from slurmpod.prolog_epilog.job import JobInfo
from slurmpod.prolog_epilog.result import CheckResult, Context, Remediation, Status, Unknown, Verdict, fail, skipped
from slurmpod.timing import Clock, Deadline

log = logging.getLogger(__name__)
_QUIET = frozenset({Status.OK, Status.SKIPPED})


@dataclass(frozen=True, slots=True)
class Planned:
    check: Check
    skip_reason: str = ""  # non-empty: reported as skipped, not run


def skip_reason(job_id: int | None) -> str:
    return f"skipped for job {job_id} by its comment"


def skipped_by_job(check: str, job_id: int | None) -> CheckResult:
    """A check the job asked to skip (``slurmpod:skip=`` in its comment or extra)."""
    return skipped(check, skip_reason(job_id))


def plan(checks: Sequence[Check], context: Context, config: Config, job: JobInfo,
         recheck: str | None = None) -> tuple[Planned, ...]:
    """The checks for ``context`` with the config's settings applied, and the job's opt-outs.

    ``recheck``: a check to run in this context although it is not one of its own (the periodic run
    re-runs the prolog-only check that drained the node, so that it lifts the drain only on its word).
    """
    out = []
    for declared in checks:
        s = config.settings(declared.name)
        contexts = s.contexts if s.contexts is not None else declared.contexts
        if not s.enabled or (context not in contexts and declared.name != recheck):
            continue
        check = dataclasses.replace(declared, timeout=s.timeout or declared.timeout,
                                    skippable=declared.skippable if s.skippable is None else s.skippable)
        if check.name in job.skip:
            if check.skippable:
                out.append(Planned(check, skip_reason(job.job_id)))
                continue
            log.warning("job asked to skip a check that is not skippable: check=%s job=%s", check.name, job.job_id)
        out.append(Planned(check))
    return tuple(out)


class _Batch:
    """Checks run one after another on one thread of their own, so a run costs the waiting thread two
    wake-ups, not two per check: on a busy node each wake-up waits for a CPU. The waiting thread keeps
    the time of the check in progress; one past its timeout is abandoned with its thread, and the checks
    after it go to a new batch."""

    def __init__(self, planned: Sequence[Planned], env: CheckEnv, deadline: Deadline, clock: Clock) -> None:
        self._planned, self._env, self._deadline, self._clock = planned, env, deadline, clock
        self._cond = threading.Condition()
        self.done: list[Verdict] = []
        self._current: tuple[int, float, float, float] | None = None  # index, timeout, start (clock, wall)
        self._abandoned = False
        self._waking_at = 0.0  # when the waiting thread wakes up next (real time); 0: not waiting

    def _run(self) -> None:
        for i, p in enumerate(self._planned):
            with self._cond:
                if self._abandoned:
                    return
                if self._deadline.expired:
                    self.done.append(skipped(p.check.name, "overall deadline reached before it started"))
                    continue
                timeout = min(p.check.timeout, self._deadline.left())
                start, wall = self._clock.monotonic(), time.monotonic()
                self._current = (i, timeout, start, wall)
                if wall + timeout < self._waking_at:  # this check's end comes first: wake the waiter
                    self._cond.notify_all()
            try:
                result = p.check.run(self._env)
            except Exception as exc:  # a bug in one check must not hide the others' findings
                log.exception("check crashed: check=%s", p.check.name)
                result = fail(p.check.name, f"check crashed: {type(exc).__name__}: {exc}", Remediation.NONE)
            with self._cond:
                if self._is_abandoned():
                    return
                self.done.append(dataclasses.replace(result, duration=self._clock.monotonic() - start))
                self._current = None
        with self._cond:
            self._cond.notify_all()

    def _is_abandoned(self) -> bool:
        return self._abandoned

    def wait(self) -> int:
        """Run the batch; the verdicts are in ``done``. Returns how many planned checks it covered: all of
        them, or those before and including the one that timed out (its verdict ``Unknown``)."""
        threading.Thread(target=self._run, name="checks", daemon=True).start()
        with self._cond:
            while len(self.done) < len(self._planned):
                current = self._current
                if current is None:  # not started yet: its start wakes this
                    self._waking_at = float("inf")
                    self._cond.wait()
                    self._waking_at = 0.0
                    continue
                index, timeout, start, wall = current
                left = wall + timeout - time.monotonic()  # real time, as a stuck C call takes it
                if left > 0:
                    self._waking_at = wall + timeout
                    self._cond.wait(left)
                    self._waking_at = 0.0
                    continue
                self._abandoned = True
                self.done.append(Unknown(self._planned[index].check.name, timeout, self._clock.monotonic() - start))
                return index + 1
        return len(self._planned)


def resolve(verdict: Verdict) -> CheckResult:
    """The result a verdict counts as: a check with no verdict within its time is a failure that drains."""
    if isinstance(verdict, Unknown):
        return fail(verdict.check, f"timed out after {verdict.timeout:g} s", Remediation.DRAIN,
                    duration=verdict.duration)
    return verdict


def run_verdicts(planned: Sequence[Planned], env: CheckEnv, deadline: Deadline, clock: Clock,
                 *, known: Mapping[str, Verdict] | None = None) -> tuple[Verdict, ...]:
    """Like ``run``, but a check past its timeout is ``Unknown``; ``known``: verdicts to give as they
    are instead of running those checks (the health agent's fresh periodic results)."""
    given: dict[int, Verdict] = {}
    to_run: list[tuple[int, Planned]] = []
    for i, p in enumerate(planned):
        if p.skip_reason:
            given[i] = skipped(p.check.name, p.skip_reason)
        elif known is not None and p.check.name in known:
            given[i] = known[p.check.name]
        else:
            to_run.append((i, p))
    ran: list[Verdict] = []
    while len(ran) < len(to_run):
        batch = _Batch([p for _, p in to_run[len(ran):]], env, deadline, clock)
        batch.wait()
        ran += batch.done
    for verdict in ran:  # a healthy check's line at debug: every job's hooks would write one per check
        if isinstance(verdict, Unknown):
            log.info("check=%s status=unknown duration=%.3f timeout=%g", verdict.check, verdict.duration,
                     verdict.timeout)
        else:
            log.log(logging.DEBUG if verdict.status in _QUIET else logging.INFO, "check=%s status=%s duration=%.3f "
                    "reason=%s", verdict.check, verdict.status.value, verdict.duration, verdict.reason)
    given.update((i, v) for (i, _), v in zip(to_run, ran, strict=True))
    return tuple(given[i] for i in range(len(planned)))


def run(planned: Sequence[Planned], env: CheckEnv, deadline: Deadline, clock: Clock) -> tuple[CheckResult, ...]:
    return tuple(resolve(v) for v in run_verdicts(planned, env, deadline, clock))


def first_failure(results: Sequence[CheckResult]) -> CheckResult | None:
    """The failure that names the drain (registry order); WARN never drains, nor a remediation of NONE."""
    return next((r for r in results if r.status is Status.FAIL and r.remediation is not Remediation.NONE), None)
