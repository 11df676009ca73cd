"""memory: MemAvailable against the RealMemory the node registers with.

Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_RealMemory ; MemAvailable: proc(5)
"""

from __future__ import annotations

from pathlib import Path

from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.result import CheckResult, Context, Remediation, fail, ok, skipped

NAME = "memory"


def parse_meminfo(text: str) -> int | None:
    """MemAvailable in MiB from /proc/meminfo text."""
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key == "MemAvailable":
            parts = rest.split()
            if parts and parts[0].isdigit():
                return int(parts[0]) // 1024
    return None


def judge(available_mib: int | None, real_memory_mib: int, fraction: float) -> CheckResult:
    if real_memory_mib <= 0:
        return skipped(NAME, "RealMemory not known")
    if available_mib is None:
        return fail(NAME, "MemAvailable not readable", Remediation.DRAIN)
    need = int(real_memory_mib * fraction)
    if available_mib < need:
        return fail(NAME, f"{available_mib} MiB available, RealMemory {real_memory_mib} needs {need}",
                    Remediation.DRAIN, values=(("available_mib", float(available_mib)),))
    return ok(NAME, values=(("available_mib", float(available_mib)),))


def run(env: CheckEnv) -> CheckResult:
    try:
        text = Path(env.meminfo).read_text(encoding="utf-8")
    except OSError:
        text = ""
    return judge(parse_meminfo(text), env.real_memory_mib, env.limits().mem_available_min_fraction)


CHECK = Check(NAME, frozenset({Context.STARTUP}), run, timeout=2.0, description="MemAvailable vs RealMemory")
