"""temperature: a GPU hotter than the limit (failing cooling)."""

from __future__ import annotations

from slurmpod.prolog_epilog import gpu_readers as rd
from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.checks.gpu import gpus_of, listing, read_all
from slurmpod.prolog_epilog.config import Thresholds
from slurmpod.prolog_epilog.result import CheckResult, Context, Remediation, fail, ok, skipped

NAME = "temperature"


def judge(readings: list[tuple[rd.Device, int | None]], limits: Thresholds) -> CheckResult:
    known = [(d, t) for d, t in readings if t is not None]
    if not known:
        return skipped(NAME, "temperature not supported")
    hot = [(d, t) for d, t in known if t >= limits.temperature_max_c]
    values = tuple((f"gpu{d.index}_celsius", float(t)) for d, t in known)
    if hot:
        return fail(NAME, f"over {limits.temperature_max_c} C: " + listing([(d, f"{t} C") for d, t in hot]),
                    Remediation.DRAIN, gpus=gpus_of(hot), values=values)
    return ok(NAME, f"max {max(t for _, t in known)} C", values=values)


def run(env: CheckEnv) -> CheckResult:
    got = read_all(env, NAME, rd.temperature)
    if isinstance(got, CheckResult):
        return got
    readings, model = got
    return judge(readings, env.limits(model))


CHECK = Check(NAME, frozenset({Context.PERIODIC, Context.STARTUP}), run, timeout=5.0, skippable=True,
              description="GPU temperature")
