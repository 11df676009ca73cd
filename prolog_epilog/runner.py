"""Run the checks of one context: each in its own thread under its timeout, all under one deadline.

A check past its timeout is a failure ("timed out after N s") and the run moves on; its thread is a
daemon, so a check stuck in a C call (a wedged driver) never keeps the process alive. When the overall
deadline has passed, the checks not yet started are reported as skipped, never run.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.config import Config
from slurmpod.prolog_epilog.job import JobInfo
from slurmpod.prolog_epilog.result import CheckResult, Context, Remediation, Status, fail, skipped
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


def _run_one(check: Check, env: CheckEnv, timeout: float, clock: Clock) -> CheckResult:
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
        return fail(check.name, f"timed out after {timeout:g} s", Remediation.DRAIN, duration=duration)
    return dataclasses.replace(box[0], duration=duration)


def run(planned: Sequence[Planned], env: CheckEnv, deadline: Deadline, clock: Clock) -> tuple[CheckResult, ...]:
    results = []
    for p in planned:
        if p.skip_reason:
            results.append(skipped(p.check.name, p.skip_reason))
            continue
        if deadline.expired:
            results.append(skipped(p.check.name, "overall deadline reached before it started"))
            continue
        timeout = min(p.check.timeout, deadline.left())
        result = _run_one(p.check, env, timeout, clock)
        log.info("check=%s status=%s duration=%.3f reason=%s", result.check, result.status.value,
                 result.duration, result.reason)
        results.append(result)
    return tuple(results)


def first_failure(results: Sequence[CheckResult]) -> CheckResult | None:
    """The failure that names the drain (registry order); WARN never drains, nor a remediation of NONE."""
    return next((r for r in results if r.status is Status.FAIL and r.remediation is not Remediation.NONE), None)
