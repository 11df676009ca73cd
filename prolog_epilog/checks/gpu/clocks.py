"""clocks: the GPU slows itself down for hardware reasons (HW slowdown, HW thermal, power brake).

Ref: https://docs.nvidia.com/deploy/nvml-api/group__nvmlClocksEventReasons.html
"""

from __future__ import annotations

from slurmpod.nvml import NvmlError, NvmlHung
from slurmpod.prolog_epilog import gpu_readers as rd
from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.checks.gpu import gpus_of, listing, lost, per_gpu, session
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
    got = session(env, NAME)
    if isinstance(got, CheckResult):
        return got
    nv, devs = got
    try:
        readings = per_gpu(nv, devs, rd.clock_events)
    except (NvmlError, NvmlHung) as exc:
        return lost(NAME, exc, devs) or fail(NAME, str(exc))
    return judge(readings, env.limits(devs[0].name if devs else ""))


CHECK = Check(NAME, frozenset({Context.PERIODIC, Context.STARTUP}), run, timeout=5.0, skippable=True,
              description="hardware clock-slowdown reasons")
