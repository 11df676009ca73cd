"""mounts: every mount the config requires is mounted (shared home, datasets)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from slurmpod.mounttable import mount_points
from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.result import CheckResult, Context, Remediation, fail, ok, skipped

NAME = "mounts"


def judge(required: Sequence[str], mounted: frozenset[str]) -> CheckResult:
    if not required:
        return skipped(NAME, "no mounts required")
    missing = [m for m in required if m.rstrip("/") not in mounted and m not in mounted]
    if missing:
        return fail(NAME, f"not mounted: {', '.join(missing)}", Remediation.RESTART_POD)
    return ok(NAME)


def run(env: CheckEnv) -> CheckResult:
    if not env.config.required_mounts:
        return skipped(NAME, "no mounts required")
    try:
        text = Path(env.mounts).read_text(encoding="utf-8")
    except OSError:
        text = ""
    return judge(env.config.required_mounts, mount_points(text))


CHECK = Check(NAME, frozenset({Context.PROLOG, Context.PERIODIC, Context.STARTUP}), run, timeout=2.0,
              description="required mounts present")
