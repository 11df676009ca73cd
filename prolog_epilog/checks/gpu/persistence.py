"""persistence: persistence mode off (slow first NVML/CUDA calls, lost state between jobs): a warning.

Ref: https://docs.nvidia.com/deploy/driver-persistence/index.html
"""

from __future__ import annotations

from slurmpod.prolog_epilog import gpu_readers as rd
from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.checks.gpu import gpus_of, read_all
from slurmpod.prolog_epilog.result import CheckResult, Context, ok, skipped, warn

NAME = "persistence"


def judge(readings: list[tuple[rd.Device, bool | None]]) -> CheckResult:
    known = [(d, on) for d, on in readings if on is not None]
    if not known:
        return skipped(NAME, "persistence mode not supported")
    off = [(d, on) for d, on in known if not on]
    if off:
        return warn(NAME, "persistence mode off on GPU " + ",".join(str(d.index) for d, _ in off), gpus=gpus_of(off))
    return ok(NAME)


def run(env: CheckEnv) -> CheckResult:
    got = read_all(env, NAME, rd.persistence)
    return got if isinstance(got, CheckResult) else judge(got[0])


CHECK = Check(NAME, frozenset({Context.PERIODIC, Context.STARTUP}), run, timeout=5.0, skippable=True,
              description="persistence mode")
