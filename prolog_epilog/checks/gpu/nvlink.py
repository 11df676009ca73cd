"""nvlink: links down fail; error counters (replay, recovery, CRC) growing past a limit between runs warn.

The counters are cumulative, so the previous run's values are kept in the state dir per GPU UUID.
Ref: https://docs.nvidia.com/deploy/nvml-api/group__NvLink.html
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from slurmpod.prolog_epilog import gpu_readers as rd
from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.checks.gpu import read_all
from slurmpod.prolog_epilog.config import Thresholds
from slurmpod.prolog_epilog.result import CheckResult, Context, Gpu, Remediation, fail, ok, skipped, warn

NAME = "nvlink"
STATE_KEY = "nvlink"


def counters(readings: Sequence[tuple[rd.Device, tuple[rd.Link, ...] | None]]) -> dict[str, int]:
    """{"<uuid>/<link>/<counter>": value} for the state dir."""
    return {f"{d.uuid}/{link.link}/{name}": value
            for d, links in readings for link in links or () for name, value in link.counters}


def judge(readings: Sequence[tuple[rd.Device, tuple[rd.Link, ...] | None]], before: Mapping[str, int],
          limits: Thresholds) -> CheckResult:
    known = [(d, links) for d, links in readings if links]
    if not known:
        return skipped(NAME, "no NVLink")
    down = [(d, link.link) for d, links in known for link in links if not link.up]
    if down:
        text = "; ".join(f"GPU {d.index} link {n} down" for d, n in down[:6])
        gpus = tuple(Gpu(d.index, d.uuid) for d in {d.index: d for d, _ in down}.values())
        return fail(NAME, f"{len(down)} NVLink link(s) down: {text}", Remediation.RESTART_POD, gpus=gpus)
    now = counters(known)
    grown = sorted((k, v - before[k]) for k, v in now.items()
                   if k in before and v - before[k] > limits.nvlink_error_growth_max)
    if grown:
        return warn(NAME, "NVLink errors growing: " + ", ".join(f"{k} +{n}" for k, n in grown[:4]))
    return ok(NAME, f"{sum(len(links) for _, links in known)} links up")


def run(env: CheckEnv) -> CheckResult:
    got = read_all(env, NAME, rd.nvlinks)
    if isinstance(got, CheckResult):
        return got
    readings, model = got
    before = {k: int(v) for k, v in env.state.read(STATE_KEY).items() if isinstance(v, int)}
    result = judge(readings, before, env.limits(model))
    env.state.write(STATE_KEY, counters(readings))
    return result


CHECK = Check(NAME, frozenset({Context.PERIODIC, Context.STARTUP, Context.EPILOG}), run, timeout=10.0,
              skippable=True, description="NVLink state and error counters")
