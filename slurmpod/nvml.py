"""The one NVML adapter: pynvml (nvidia-ml-py) over an injectable libnvidia-ml handle, every call with a deadline.

- The library is a handle given to the adapter (``open_library(path)``): production opens
  ``libnvidia-ml.so.1`` from the loader path; tests pass a fake built from C (tests/fakes/nvml), and
  pynvml's own code path runs unchanged on top of it.
- Every NVML call runs on one worker thread and is waited for with a deadline. A call that hangs (a
  wedged driver) raises ``NvmlHung``; the adapter then refuses further calls, since the library may hold
  its lock. The worker is a daemon thread, so a hung call never keeps the process alive.
- ``batch`` runs a function of many calls (a check's reads of every GPU) on the worker in one hand-off,
  under one deadline: the calls it makes run inline there. A hand-off to a thread and back costs tens of
  microseconds or more to a waiting process, more than most NVML queries, and a check of 8 GPUs makes
  dozens of calls. A batch that hangs names the call it was in.
- NVML return codes are translated once, here: not supported -> ``NvmlNotSupported`` (never a
  failure), GPU lost / reset required -> ``GpuLost`` / ``GpuNeedsReset``, other codes -> ``NvmlError``.
- No library means no GPUs: ``NvmlAbsent``, which callers treat as "skipped", not "failed".
Ref: https://docs.nvidia.com/deploy/nvml-api/group__nvmlInitializationAndCleanup.html
Ref: https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html
"""

from __future__ import annotations

import ctypes
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from slurmpod.errors import PermanentError, TransientError
from slurmpod.hardware import Gpu

log = logging.getLogger(__name__)
T = TypeVar("T")

# The name NVIDIA's driver installs and pynvml loads. Ref: https://docs.nvidia.com/deploy/nvml-api/
NVML_LIBRARY = "libnvidia-ml.so.1"
# Longest one NVML call may take before it counts as hung. Healthy calls take micro- to milliseconds;
# nvmlInit on a node with 8 GPUs and persistence mode off can take a few seconds.
DEFAULT_CALL_TIMEOUT = 10.0

# Return codes, from nvml.h (values as in pynvml). Ref: https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceEnumvs.html
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16


class NvmlError(PermanentError):
    """NVML answered with an error code."""

    def __init__(self, call: str, code: int, text: str) -> None:
        self.call, self.code = call, code
        super().__init__(f"{call}: {text} (NVML error {code})")


class NvmlNotSupported(NvmlError):
    """The GPU or driver does not offer this query: never a failure."""


class GpuLost(NvmlError):
    """The GPU fell off the bus. Ref: NVML_ERROR_GPU_IS_LOST"""


class GpuNeedsReset(NvmlError):
    """Ref: NVML_ERROR_RESET_REQUIRED"""


class NvmlAbsent(PermanentError):
    """No NVML library on this node (no GPU driver): no GPUs."""


class NvmlHung(TransientError):
    """An NVML call did not return within its deadline."""


def translate(call: str, code: int, text: str) -> NvmlError:
    kind: type[NvmlError] = {
        NVML_ERROR_NOT_SUPPORTED: NvmlNotSupported,
        NVML_ERROR_FUNCTION_NOT_FOUND: NvmlNotSupported,  # an older driver without the entry point
        NVML_ERROR_GPU_IS_LOST: GpuLost,
        NVML_ERROR_RESET_REQUIRED: GpuNeedsReset,
    }.get(code, NvmlError)
    return kind(call, code, text)


def open_library(path: str = NVML_LIBRARY) -> ctypes.CDLL:
    """The library handle the adapter runs on; NvmlAbsent when there is none."""
    try:
        return ctypes.CDLL(path)
    except OSError as exc:
        raise NvmlAbsent(f"no NVML library ({path}): {exc}") from None


PROC_MAPS = Path("/proc/self/maps")


def loaded_from(name: str = NVML_LIBRARY, maps: Path = PROC_MAPS) -> Path | None:
    """Where a new process would find ``name``: ``name`` beside the file of that library this process
    mapped (the driver installs its soname link next to the versioned file), or None when none is mapped.
    A process that holds NVML open keeps it after the file goes; a new one cannot load it.
    Ref: https://man7.org/linux/man-pages/man5/proc_pid_maps.5.html"""
    stem = name.split(".so", 1)[0] + ".so"
    try:
        lines = maps.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith("/") and Path(fields[5]).name.startswith(stem):
            return Path(fields[5]).parent / name
    return None


class _Worker:
    """One daemon thread that runs calls in order; the caller waits with a deadline."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], Any], queue.Queue[tuple[bool, Any]]]] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="nvml", daemon=True)
        self._thread.start()

    def on_worker(self) -> bool:
        """The caller is the worker itself (inside a batch): a call runs inline, under the batch's deadline."""
        return threading.get_ident() == self._thread.ident

    def _loop(self) -> None:
        while True:
            fn, reply = self._jobs.get()
            try:
                reply.put((True, fn()))
            except BaseException as exc:
                reply.put((False, exc))

    def call(self, fn: Callable[[], T], timeout: float) -> T:
        if self.on_worker():
            return fn()
        reply: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=1)
        self._jobs.put((fn, reply))
        try:
            ok, value = reply.get(timeout=timeout)
        except queue.Empty:
            raise NvmlHung(f"NVML call did not return within {timeout:g} s") from None
        if ok:
            return value  # type: ignore[no-any-return]
        raise value


class Nvml:
    """An initialised NVML session. Use ``session()``; every method raises the errors above."""

    def __init__(self, pynvml: ModuleType, worker: _Worker, call_timeout: float) -> None:
        self._nv = pynvml
        self._worker = worker
        self._timeout = call_timeout
        self._hung: str | None = None
        self._in_batch: str | None = None  # the call a running batch is in, for the name a hang gets

    @property
    def hung(self) -> str | None:
        """The call that did not return in time, after which this session makes no call; None."""
        return self._hung

    @property
    def module(self) -> ModuleType:
        """pynvml itself, for its constants and structures."""
        return self._nv

    def call(self, name: str, *args: Any, timeout: float | None = None) -> Any:
        """``pynvml.<name>(*args)`` under the deadline, with NVML's codes translated."""
        if self._hung is not None:
            raise NvmlHung(f"{name}: not called, NVML hung earlier in {self._hung}")
        fn = getattr(self._nv, name)
        if self._worker.on_worker():  # inside a batch: the worker runs it inline, under the batch's deadline
            self._in_batch = name
        try:
            return self._worker.call(lambda: fn(*args), self._timeout if timeout is None else timeout)
        except NvmlHung:
            self._hung = name
            raise NvmlHung(f"{name} did not return within {self._timeout if timeout is None else timeout:g} s") \
                from None
        except self._nv.NVMLError as exc:
            raise translate(name, int(exc.value), str(exc)) from None

    def batch(self, fn: Callable[[], T], timeout: float | None = None) -> T:
        """``fn()`` on the worker in one hand-off, its calls inline, all of it under one deadline (the call
        timeout by default). What ``fn`` raises is raised here; a batch that does not return in time
        raises ``NvmlHung`` naming the call it was in, and the session makes no further call."""
        if self._hung is not None:
            raise NvmlHung(f"not called, NVML hung earlier in {self._hung}")
        if self._worker.on_worker():
            return fn()
        limit = self._timeout if timeout is None else timeout
        self._in_batch = None
        try:
            return self._worker.call(fn, limit)
        except NvmlHung:
            self._hung = self._in_batch or "a batch of calls"
            raise NvmlHung(f"{self._hung} did not return within {limit:g} s") from None

    def optional(self, name: str, *args: Any) -> Any | None:
        """Like ``call`` but None when the query is not supported."""
        try:
            return self.call(name, *args)
        except NvmlNotSupported:
            return None

    def count(self) -> int:
        return int(self.call("nvmlDeviceGetCount"))

    def handle(self, index: int) -> Any:
        return self.call("nvmlDeviceGetHandleByIndex", index)

    def inventory(self, max_cpus: int = 1024) -> tuple[Gpu, ...]:
        """The GPUs in index order, with the facts node registration needs."""
        gpus = []
        for index in range(self.count()):
            h = self.handle(index)
            gpus.append(Gpu(
                index=index,
                # Ref: nvmlDeviceGetMinorNumber -> /dev/nvidia<minor>
                minor=int(self.call("nvmlDeviceGetMinorNumber", h)),
                uuid=_text(self.call("nvmlDeviceGetUUID", h)),
                name=_text(self.call("nvmlDeviceGetName", h)),
                # Ref: nvmlDeviceGetCpuAffinity (cpuSetSize counts unsigned longs)
                cpu_affinity=cpu_ids(list(self.call("nvmlDeviceGetCpuAffinity", h, max(1, max_cpus // 64)))),
            ))
        return tuple(gpus)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def cpu_ids(words: list[int], word_bits: int = 64) -> tuple[int, ...]:
    """Decode nvmlDeviceGetCpuAffinity's array of unsigned longs into CPU ids."""
    return tuple(i * word_bits + bit for i, word in enumerate(words) for bit in range(word_bits) if word >> bit & 1)


@contextmanager
def session(library: ctypes.CDLL | None = None, *, call_timeout: float = DEFAULT_CALL_TIMEOUT,
            init_timeout: float | None = None) -> Iterator[Nvml]:
    """nvmlInit on ``library`` (default: open libnvidia-ml.so.1), yield the adapter, nvmlShutdown.

    ``init_timeout`` (default: ``call_timeout``) bounds nvmlInit alone, which may take seconds where
    every later call takes milliseconds.
    Raises NvmlAbsent without a library, NvmlError when init fails, NvmlHung when init hangs.
    """
    lib = library if library is not None else open_library()
    import pynvml  # noqa: PLC0415 - ~60 ms; only on nodes that have an NVML library

    # Inject the handle: pynvml loads libnvidia-ml.so.1 itself only while pynvml.nvmlLib is None.
    if pynvml.nvmlLib is None:
        pynvml.nvmlLib = lib
    nv = Nvml(pynvml, _Worker(), call_timeout)
    nv.call("nvmlInit", timeout=init_timeout)
    try:
        yield nv
    finally:
        try:
            nv.call("nvmlShutdown", timeout=min(call_timeout, 2.0))
        except (NvmlError, NvmlHung) as exc:
            log.debug("nvmlShutdown: %s", exc)


def inventory(library: ctypes.CDLL | None = None, *, call_timeout: float = DEFAULT_CALL_TIMEOUT) -> tuple[Gpu, ...]:
    """The GPUs NVML sees; () when there is no NVML library or NVML fails (logged): register without GPUs."""
    try:
        lib = library if library is not None else open_library()
    except NvmlAbsent:
        return ()
    try:
        with session(lib, call_timeout=call_timeout) as nv:
            return nv.inventory()
    except (NvmlError, NvmlHung) as exc:
        log.error("NVML inventory failed: %s; registering without GPUs", exc)
        return ()
    except ImportError:
        return ()
