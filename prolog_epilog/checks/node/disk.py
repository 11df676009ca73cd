"""disk: free space on / and on the job scratch dir."""

from __future__ import annotations

import os
from collections.abc import Sequence

from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.result import CheckResult, Context, Remediation, fail, ok

NAME = "disk"
GIB = 1024**3


def read(path: str) -> float | None:
    """Free GiB for unprivileged writers (f_bavail), None when the path is missing."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize / GIB


def judge(readings: Sequence[tuple[str, float | None, float]]) -> CheckResult:
    """readings: (path, free GiB or None, minimum GiB)."""
    missing = [p for p, free, _ in readings if free is None]
    if missing:
        return fail(NAME, f"missing: {', '.join(missing)}", Remediation.DRAIN)
    low = [(p, free, need) for p, free, need in readings if free is not None and free < need]
    values = tuple((f"free_gib:{p}", round(free or 0.0, 3)) for p, free, _ in readings)
    if low:
        return fail(NAME, "; ".join(f"{p} has {free:.1f} GiB free, needs {need:g}" for p, free, need in low),
                    Remediation.DRAIN, values=values)
    return ok(NAME, values=values)


def run(env: CheckEnv) -> CheckResult:
    limits = env.limits()
    paths = [("/", limits.disk_free_min_gib), (env.config.scratch_dir, limits.scratch_free_min_gib)]
    return judge([(p, read(p), need) for p, need in paths])


CHECK = Check(NAME, frozenset({Context.PROLOG, Context.PERIODIC, Context.STARTUP}), run, timeout=3.0,
              description="free disk on / and the scratch dir")
