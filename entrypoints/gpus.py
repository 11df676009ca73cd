"""GPU inventory through NVML (nvidia-ml-py). No NVML library means no GPUs, not an error.

Ref: https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html
"""

from __future__ import annotations

import contextlib
import ctypes
import logging

from slurmpod.entrypoints.hardware import Gpu

log = logging.getLogger(__name__)

# The name pynvml loads. Ref: https://docs.nvidia.com/deploy/nvml-api/ (libnvidia-ml.so.1)
NVML_LIBRARY = "libnvidia-ml.so.1"


def _affinity(words: list[int], word_bits: int = 64) -> tuple[int, ...]:
    """Decode nvmlDeviceGetCpuAffinity's array of unsigned longs into CPU ids."""
    cpus = []
    for i, word in enumerate(words):
        for bit in range(word_bits):
            if word >> bit & 1:
                cpus.append(i * word_bits + bit)
    return tuple(cpus)


def inventory(max_cpus: int = 1024) -> tuple[Gpu, ...]:
    """The GPUs NVML sees, in index order; () when NVML is absent or fails (logged)."""
    # Probe the library before importing pynvml (~60 ms) on the many nodes without GPUs.
    try:
        ctypes.CDLL(NVML_LIBRARY)
    except OSError:
        return ()
    try:
        import pynvml  # noqa: PLC0415 - see above
    except ImportError:
        return ()
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        log.info("no NVML: %s; registering without GPUs", exc)
        return ()
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            gpus.append(
                Gpu(
                    index=index,
                    # Ref: nvmlDeviceGetMinorNumber -> /dev/nvidia<minor>
                    minor=pynvml.nvmlDeviceGetMinorNumber(handle),
                    uuid=uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                    name=name.decode() if isinstance(name, bytes) else str(name),
                    # Ref: nvmlDeviceGetCpuAffinity (cpuSetSize in unsigned longs)
                    cpu_affinity=_affinity(list(pynvml.nvmlDeviceGetCpuAffinity(handle, max_cpus // 64))),
                )
            )
        return tuple(gpus)
    except pynvml.NVMLError as exc:
        log.error("NVML inventory failed: %s; registering without GPUs", exc)
        return ()
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()
