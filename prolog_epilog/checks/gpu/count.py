"""gpu-count: NVML answers, and sees as many GPUs as the node was given."""

from __future__ import annotations

from slurmpod.nvml import NvmlAbsent, NvmlError, NvmlHung
from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.result import CheckResult, Context, Remediation, fail, ok, skipped

NAME = "gpu-count"


def read(env: CheckEnv) -> int | Exception:
    """The number of GPUs NVML sees, or why NVML gave no answer."""
    try:
        return len(env.gpus.devices())
    except (NvmlAbsent, NvmlHung, NvmlError) as exc:
        return exc


def judge(seen: int | Exception, expected: int | None) -> CheckResult:
    if isinstance(seen, NvmlAbsent):
        if expected:
            return fail(NAME, f"no NVML library, {expected} GPUs expected", Remediation.RESTART_POD)
        return skipped(NAME, "no NVML library: no GPUs")
    if isinstance(seen, NvmlHung):
        return fail(NAME, f"NVML hung: {seen}", Remediation.RESTART_POD)
    if isinstance(seen, Exception):
        return fail(NAME, f"NVML failed: {seen}", Remediation.RESTART_POD)
    if expected is not None and seen < expected:
        return fail(NAME, f"{seen} of {expected} GPUs visible", Remediation.REPLACE_NODE,
                    values=(("gpus", float(seen)),))
    return ok(NAME, f"{seen} GPUs", values=(("gpus", float(seen)),))


def run(env: CheckEnv) -> CheckResult:
    return judge(read(env), env.expected_gpus)


CHECK = Check(NAME, frozenset(Context), run, timeout=15.0,
              description="NVML answers and sees the expected number of GPUs")
