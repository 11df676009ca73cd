"""clocks: the GPU slows itself down for hardware reasons (HW slowdown, HW thermal, power brake).

Ref: https://docs.nvidia.com/deploy/nvml-api/group__nvmlClocksEventReasons.html
"""

from __future__ import annotations

from slurmpod.prolog_epilog import gpu_readers as rd
from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.checks.gpu import gpus_of, listing, read_all
from slurmpod.prolog_epilog.config import Thresholds
from slurmpod.prolog_epilog.result import CheckResult, Context, Remediation, fail, ok, skipped, warn

NAME = "clocks"


def names(mask: int) -> str:
    return ",".join(n for bit, n in sorted(rd.CLOCK_EVENTS.items()) if mask & bit and bit & rd.CLOCK_EVENTS_BAD)


def judge(readings: list[tuple[rd.Device, int | None]], limits: Thresholds) -> CheckResult:
    known = [(d, m) for d, m in readings if m is not None]
    if not known:
        return skipped(NAME, "clock-event reasons not supported")
    slow = [(d, m) for d, m in known if m & rd.CLOCK_EVENTS_BAD]
    if not slow:
        return ok(NAME)
    text = "clocks slowed: " + listing([(d, names(m)) for d, m in slow])
    if limits.clock_events_fail:
        return fail(NAME, text, Remediation.DRAIN, gpus=gpus_of(slow))
    return warn(NAME, text, gpus=gpus_of(slow))


def run(env: CheckEnv) -> CheckResult:
    got = read_all(env, NAME, rd.clock_events)
    if isinstance(got, CheckResult):
        return got
    readings, model = got
    return judge(readings, env.limits(model))


CHECK = Check(NAME, frozenset({Context.PERIODIC, Context.STARTUP}), run, timeout=5.0, skippable=True,
              description="hardware clock-slowdown reasons")
