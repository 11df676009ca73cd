"""The CUDA runtime and NCCL through cffi in ABI mode: no CUDA headers or compiler on the node.

Only the calls the checks need are declared; each returns a status code, translated here into
``CudaError``. The libraries are handles given to the checks (``GpuLibraries``): production opens
libcudart/libnccl from the loader path; tests open C stand-ins (tests/fakes/cuda, tests/fakes/nccl).
Ref: https://cffi.readthedocs.io/en/latest/overview.html#main-mode-of-usage (ABI, in-line)
Ref: https://docs.nvidia.com/cuda/cuda-runtime-api/ ; https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/api.html
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from slurmpod import well_known as wk
from slurmpod.errors import PermanentError

_CDEF = """
int cudaGetDeviceCount(int *count);
int cudaSetDevice(int device);
int cudaMalloc(void **ptr, size_t size);
int cudaFree(void *ptr);
int cudaMemset(void *ptr, int value, size_t count);
int cudaMemcpy(void *dst, const void *src, size_t count, int kind);
int cudaDeviceSynchronize(void);
int cudaStreamCreate(void **stream);
int cudaStreamSynchronize(void *stream);
int cudaStreamDestroy(void *stream);
const char *cudaGetErrorString(int error);
typedef struct ncclComm *ncclComm_t;
int ncclGetVersion(int *version);
int ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist);
int ncclCommDestroy(ncclComm_t comm);
int ncclGroupStart(void);
int ncclGroupEnd(void);
int ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, int datatype, int op, ncclComm_t comm,
                  void *stream);
const char *ncclGetErrorString(int result);
"""
# Ref: cudaMemcpyKind
MEMCPY_HOST_TO_DEVICE, MEMCPY_DEVICE_TO_HOST = 1, 2
# Ref: ncclDataType_t (ncclFloat32 = 7), ncclRedOp_t (ncclSum = 0)
NCCL_FLOAT32, NCCL_SUM = 7, 0
# The runtime's sonames across CUDA releases; the unversioned name exists only with the dev package.
CUDART_NAMES = (wk.CUDART_LIBRARY, "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0")


# The runtime's answers on a host that has no GPU to give it: no driver (or one older than the
# runtime), or no device. Ref: https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html
CUDA_ERROR_INSUFFICIENT_DRIVER, CUDA_ERROR_NO_DEVICE = 35, 100


class CudaError(PermanentError):
    """A CUDA or NCCL call answered with an error code."""


class NoCudaDevice(CudaError):
    """The CUDA runtime finds no driver or no device (CUDA_ERROR_INSUFFICIENT_DRIVER, CUDA_ERROR_NO_DEVICE)."""


class LibraryAbsent(PermanentError):
    """No CUDA runtime (or NCCL) on this node."""


@dataclass(frozen=True, slots=True)
class AllReduceResult:
    gpus: int
    bytes: int
    seconds: float  # per iteration
    algbw_gbps: float
    busbw_gbps: float


def bus_bandwidth(algbw: float, ranks: int) -> float:
    """All-reduce bus bandwidth: algbw * 2(n-1)/n. Ref: https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md"""
    return algbw * 2 * (ranks - 1) / ranks if ranks > 1 else 0.0


class GpuLibraries:
    """The CUDA runtime (and NCCL when present) opened through one cffi FFI."""

    def __init__(self, cudart: Sequence[str] = CUDART_NAMES, nccl: str = wk.NCCL_LIBRARY) -> None:
        import cffi  # noqa: PLC0415 - only where a check needs CUDA: keeps the prolog fast

        self._ffi = cffi.FFI()
        self._ffi.cdef(_CDEF)
        self._cuda: Any = None
        errors = []
        for name in cudart:
            try:
                self._cuda = self._ffi.dlopen(name)
                break
            except OSError as exc:
                errors.append(str(exc))
        if self._cuda is None:
            raise LibraryAbsent(f"no CUDA runtime ({', '.join(cudart)})")
        try:
            self._nccl: Any = self._ffi.dlopen(nccl)
        except OSError:
            self._nccl = None

    @property
    def has_nccl(self) -> bool:
        return self._nccl is not None

    def _cu(self, what: str, code: int) -> None:
        if code != 0:
            text = self._ffi.string(self._cuda.cudaGetErrorString(code)).decode()
            kind = NoCudaDevice if code in {CUDA_ERROR_INSUFFICIENT_DRIVER, CUDA_ERROR_NO_DEVICE} else CudaError
            raise kind(f"{what}: {text} (CUDA error {code})")

    def _nc(self, what: str, code: int) -> None:
        if code != 0:
            text = self._ffi.string(self._nccl.ncclGetErrorString(code)).decode()
            raise CudaError(f"{what}: {text} (NCCL error {code})")

    def device_count(self) -> int:
        n = self._ffi.new("int *")
        self._cu("cudaGetDeviceCount", self._cuda.cudaGetDeviceCount(n))
        return int(n[0])

    def memory_sanity(self, device: int, size: int) -> None:
        """Allocate on ``device``, memset and read back, write a pattern and read it back; CudaError on any fault."""
        ffi, cu = self._ffi, self._cuda
        self._cu(f"cudaSetDevice({device})", cu.cudaSetDevice(device))
        ptr = ffi.new("void **")
        self._cu(f"cudaMalloc({size})", cu.cudaMalloc(ptr, size))
        try:
            host = ffi.new("unsigned char[]", size)
            self._cu("cudaMemset", cu.cudaMemset(ptr[0], 0xA5, size))
            self._cu("cudaMemcpy D2H", cu.cudaMemcpy(host, ptr[0], size, MEMCPY_DEVICE_TO_HOST))
            if ffi.buffer(host)[:] != b"\xa5" * size:
                raise CudaError("memset pattern read back wrong")
            pattern = bytes(range(256)) * (size // 256) + bytes(size % 256)
            self._cu("cudaMemcpy H2D", cu.cudaMemcpy(ptr[0], pattern, size, MEMCPY_HOST_TO_DEVICE))
            self._cu("cudaMemcpy D2H", cu.cudaMemcpy(host, ptr[0], size, MEMCPY_DEVICE_TO_HOST))
            if ffi.buffer(host)[:] != pattern:
                raise CudaError("copied pattern read back wrong")
        finally:
            cu.cudaFree(ptr[0])

    def all_reduce(self, devices: Sequence[int], size: int, iterations: int = 5) -> AllReduceResult:
        """Single-process all-reduce over ``devices`` (float32 sum of ``size`` bytes per GPU), timed."""
        if self._nccl is None:
            raise LibraryAbsent(f"no NCCL ({wk.NCCL_LIBRARY})")
        ffi, cu, nc = self._ffi, self._cuda, self._nccl
        n = len(devices)
        comms = ffi.new("ncclComm_t[]", n)
        self._nc("ncclCommInitAll", nc.ncclCommInitAll(comms, n, ffi.new("int[]", list(devices))))
        bufs, streams = [], []
        try:
            for dev in devices:
                self._cu(f"cudaSetDevice({dev})", cu.cudaSetDevice(dev))
                send, recv, stream = ffi.new("void **"), ffi.new("void **"), ffi.new("void **")
                self._cu("cudaMalloc", cu.cudaMalloc(send, size))
                self._cu("cudaMalloc", cu.cudaMalloc(recv, size))
                self._cu("cudaStreamCreate", cu.cudaStreamCreate(stream))
                bufs.append((dev, send[0], recv[0]))
                streams.append((dev, stream[0]))

            def once() -> None:
                self._nc("ncclGroupStart", nc.ncclGroupStart())
                for rank, (dev, send, recv) in enumerate(bufs):
                    self._cu(f"cudaSetDevice({dev})", cu.cudaSetDevice(dev))
                    self._nc("ncclAllReduce", nc.ncclAllReduce(send, recv, size // 4, NCCL_FLOAT32, NCCL_SUM,
                                                                comms[rank], streams[rank][1]))
                self._nc("ncclGroupEnd", nc.ncclGroupEnd())
                for dev, stream in streams:
                    self._cu(f"cudaSetDevice({dev})", cu.cudaSetDevice(dev))
                    self._cu("cudaStreamSynchronize", cu.cudaStreamSynchronize(stream))

            once()  # warm-up: connection setup is not bandwidth
            start = time.perf_counter()
            for _ in range(iterations):
                once()
            seconds = (time.perf_counter() - start) / iterations
        finally:
            for dev, send, recv in bufs:
                cu.cudaSetDevice(dev)
                cu.cudaFree(send)
                cu.cudaFree(recv)
            for dev, stream in streams:
                cu.cudaSetDevice(dev)
                cu.cudaStreamDestroy(stream)
            for rank in range(n):
                if comms[rank] != ffi.NULL:
                    nc.ncclCommDestroy(comms[rank])
        algbw = size / seconds / 1e9 if seconds > 0 else 0.0
        return AllReduceResult(n, size, seconds, algbw, bus_bandwidth(algbw, n))
