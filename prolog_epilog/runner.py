"""Run the checks of one context: each in its own thread under its timeout, all under one deadline.

A check past its timeout is a failure ("timed out after N s") and the run moves on; its thread is a
daemon, so a check stuck in a C call (a wedged driver) never keeps the process alive. When the overall
deadline has passed, the checks not yet started are reported as skipped, never run. ``run_verdicts``
keeps a check past its timeout as ``Unknown`` (what the health agent answers); ``resolve`` turns it
into that failure.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.config import Config
from slurmpod.prolog_epilog.job import JobInfo
from slurmpod.prolog_epilog.result import CheckResult, Context, Remediation, Status, Unknown, Verdict, fail, skipped
from slurmpod.timing import Clock, Deadline

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Planned:
    check: Check
    skip_reason: str = ""  # non-empty: reported as skipped, not run


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
                out.append(Planned(check, f"skipped for job {job.job_id} by its comment"))
                continue
            log.warning("job asked to skip a check that is not skippable: check=%s job=%s", check.name, job.job_id)
        out.append(Planned(check))
    return tuple(out)


def _attempt(check: Check, env: CheckEnv, timeout: float, clock: Clock) -> Verdict:
    box: list[CheckResult] = []
    start = clock.monotonic()

    def target() -> None:
        try:
            box.append(check.run(env))
        except Exception as exc:  # a bug in one check must not hide the others' findings
            log.exception("check crashed: check=%s", check.name)
            box.append(fail(check.name, f"check crashed: {type(exc).__name__}: {exc}", Remediation.NONE))

    thread = threading.Thread(target=target, name=f"check-{check.name}", daemon=True)
    thread.start()
    thread.join(timeout)
    duration = clock.monotonic() - start
    if not box:
        return Unknown(check.name, timeout, duration)
    return dataclasses.replace(box[0], duration=duration)


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
    verdicts: list[Verdict] = []
    for p in planned:
        if p.skip_reason:
            verdicts.append(skipped(p.check.name, p.skip_reason))
            continue
        if known is not None and p.check.name in known:
            verdicts.append(known[p.check.name])
            continue
        if deadline.expired:
            verdicts.append(skipped(p.check.name, "overall deadline reached before it started"))
            continue
        timeout = min(p.check.timeout, deadline.left())
        verdict = _attempt(p.check, env, timeout, clock)
        if isinstance(verdict, Unknown):
            log.info("check=%s status=unknown duration=%.3f timeout=%g", verdict.check, verdict.duration, timeout)
        else:
            log.info("check=%s status=%s duration=%.3f reason=%s", verdict.check, verdict.status.value,
                     verdict.duration, verdict.reason)
        verdicts.append(verdict)
    return tuple(verdicts)


def run(planned: Sequence[Planned], env: CheckEnv, deadline: Deadline, clock: Clock) -> tuple[CheckResult, ...]:
    return tuple(resolve(v) for v in run_verdicts(planned, env, deadline, clock))


def first_failure(results: Sequence[CheckResult]) -> CheckResult | None:
    """The failure that names the drain (registry order); WARN never drains, nor a remediation of NONE."""
    return next((r for r in results if r.status is Status.FAIL and r.remediation is not Remediation.NONE), None)
