"""GPU checks through the NVML adapter (one per module), and what they share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from slurmpod.nvml import GpuLost, GpuNeedsReset, Nvml, NvmlAbsent, NvmlError, NvmlHung
from slurmpod.prolog_epilog import gpu_readers as rd
from slurmpod.prolog_epilog.check import CheckEnv
from slurmpod.prolog_epilog.result import CheckResult, Gpu, Remediation, fail, skipped

T = TypeVar("T")


def session(env: CheckEnv, name: str) -> tuple[Nvml, tuple[rd.Device, ...]] | CheckResult:
    """The NVML session and GPUs, or the result a GPU check gives when there is none.

    NVML absent, hung or failing is the gpu-count check's finding; the other GPU checks skip, so one
    fault drains with one reason.
    """
    try:
        return env.gpus.get(), env.gpus.devices()
    except NvmlAbsent:
        return skipped(name, "no NVML library: no GPUs")
    except NvmlHung:
        return skipped(name, "NVML hung (see gpu-count)")
    except NvmlError as exc:
        return skipped(name, f"NVML unavailable: {exc} (see gpu-count)")


def per_gpu(nv: Nvml, devs: Sequence[rd.Device], read: Callable[[Nvml, rd.Device], T]) -> list[tuple[rd.Device, T]]:
    """``read`` on every GPU, in one batch of NVML calls; a lost GPU raises for the caller's ``lost`` result."""
    return nv.batch(lambda: [(d, read(nv, d)) for d in devs])


def read_all(env: CheckEnv, name: str, read: Callable[[Nvml, rd.Device], T],
             only: Callable[[rd.Device], bool] | None = None) -> tuple[list[tuple[rd.Device, T]], str] | CheckResult:
    """Open NVML and ``read`` every GPU (those ``only`` keeps): the readings and the GPU model, or the
    result the check gives when that could not be done (no NVML, NVML hung, a GPU lost mid-read)."""
    got = session(env, name)
    if isinstance(got, CheckResult):
        return got
    nv, devs = got
    if only is not None:
        devs = tuple(d for d in devs if only(d))
    try:
        readings = per_gpu(nv, devs, read)
    except (NvmlError, NvmlHung) as exc:
        return lost(name, exc, devs) or fail(name, str(exc))
    return readings, devs[0].name if devs else ""


def lost(name: str, exc: NvmlError | NvmlHung, devs: Sequence[rd.Device]) -> CheckResult | None:
    """NVML hung, or a GPU fell off the bus or needs a reset while it was read: a failure for any GPU check."""
    if isinstance(exc, NvmlHung):
        return fail(name, f"NVML hung: {exc}", Remediation.RESTART_POD)
    if isinstance(exc, GpuLost):
        return fail(name, f"GPU lost while reading: {exc}", Remediation.REPLACE_NODE,
                    gpus=tuple(Gpu(d.index, d.uuid) for d in devs))
    if isinstance(exc, GpuNeedsReset):
        return fail(name, f"GPU needs a reset: {exc}", Remediation.RESTART_POD,
                    gpus=tuple(Gpu(d.index, d.uuid) for d in devs))
    return None


def gpus_of(pairs: Sequence[tuple[rd.Device, object]]) -> tuple[Gpu, ...]:
    return tuple(Gpu(d.index, d.uuid) for d, _ in pairs)


def listing(pairs: Sequence[tuple[rd.Device, str]]) -> str:
    return "; ".join(f"GPU {d.index} {text}" for d, text in pairs)
