"""cuda-memory: per GPU, allocate, memset and copy through the CUDA runtime and read it all back.

Periodic and on demand only (never a prolog: it takes the GPUs for a moment), and only when no process
uses the GPUs, so it never disturbs a running job.
"""

from __future__ import annotations

from collections.abc import Sequence

from slurmpod.errors import SlurmpodError
from slurmpod.nvml import NvmlError, NvmlHung
from slurmpod.prolog_epilog import gpu_readers as rd
from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.checks.cuda import no_device
from slurmpod.prolog_epilog.checks.gpu import session
from slurmpod.prolog_epilog.cudalib import NoCudaDevice
from slurmpod.prolog_epilog.result import CheckResult, Context, Gpu, Remediation, fail, ok, skipped

NAME = "cuda-memory"
SIZE = 4 * 1024 * 1024  # bytes per GPU: a sanity check of the path (DCGM diag tests memory in depth)


def busy(env: CheckEnv) -> str | None:
    """Why the GPUs are not free for a test now (a job's processes on them), or None."""
    got = session(env, NAME)
    if isinstance(got, CheckResult):
        return None  # no NVML view: let the CUDA calls speak for themselves
    nv, devs = got
    try:
        used = [d.index for d in devs if rd.usage(nv, d).pids]
    except (NvmlError, NvmlHung):
        return None
    return f"GPU {','.join(map(str, used))} in use" if used else None


def judge(errors: Sequence[tuple[int, str]], count: int) -> CheckResult:
    if errors:
        return fail(NAME, "; ".join(f"GPU {i}: {e}" for i, e in errors), Remediation.REPLACE_NODE,
                    gpus=tuple(Gpu(i) for i, _ in errors))
    return ok(NAME, f"{count} GPUs")


def run(env: CheckEnv) -> CheckResult:
    if env.libraries is None:
        return skipped(NAME, "no CUDA runtime")
    why = busy(env)
    if why:
        return skipped(NAME, why)
    try:
        count = env.libraries.device_count()
    except NoCudaDevice as exc:
        return no_device(env, NAME, str(exc))
    except SlurmpodError as exc:
        return fail(NAME, f"CUDA cannot count devices: {exc}", Remediation.RESTART_POD)
    errors = []
    for i in range(count):
        try:
            env.libraries.memory_sanity(i, SIZE)
        except SlurmpodError as exc:
            errors.append((i, str(exc)))
    return judge(errors, count)


CHECK = Check(NAME, frozenset({Context.PERIODIC}), run, timeout=30.0, skippable=True,
              description="CUDA allocate/memset/copy on every GPU")
