"""What one check is, and what it may use while it runs (``CheckEnv``): never globals, never os.environ."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from slurmpod import nvml as nvml_adapter
from slurmpod.commands import Runner
from slurmpod.prolog_epilog import gpu_readers as rd
from slurmpod.prolog_epilog.config import Config, Thresholds
from slurmpod.prolog_epilog.job import JobInfo
from slurmpod.prolog_epilog.result import CheckResult, Context
from slurmpod.prolog_epilog.state import StateDir

if TYPE_CHECKING:
    import ctypes

    from slurmpod.prolog_epilog.cudalib import GpuLibraries


class GpuSource:
    """One NVML session shared by the checks of a run, opened on first use, closed by the runner.

    The outcome of opening is kept: NVML absent, hung or failing is the same answer for every check
    (the gpu-count check reports it; the others skip).
    """

    def __init__(self, library: Callable[[], ctypes.CDLL], call_timeout: float, init_timeout: float) -> None:
        self._library = library
        self._timeout = call_timeout
        self._init_timeout = init_timeout
        self._lock = threading.Lock()
        self._stack = ExitStack()
        self._nv: nvml_adapter.Nvml | None = None
        self._error: Exception | None = None
        self._devices: tuple[rd.Device, ...] | None = None
        self.xid_watch: rd.XidWatch | None = None  # an event set registered before this run (the agent's)
        self.jobs_on_gpus: Mapping[int, int] = {}  # GPU index -> the running job that holds it (the agent's)

    @classmethod
    def held(cls, opened: nvml_adapter.Nvml | Exception, *, xid_watch: rd.XidWatch | None = None,
             jobs_on_gpus: Mapping[int, int] | None = None) -> GpuSource:
        """A source over a session someone else holds open (the health agent), or the error its opening
        gave; ``close`` leaves the session open. The GPUs are still read once per run. ``xid_watch``: the
        holder's lifetime XID event set; ``jobs_on_gpus``: the jobs it knows to be running, by GPU."""
        def never() -> ctypes.CDLL:
            raise AssertionError("a held NVML session is never opened again")

        source = cls(never, 0.0, 0.0)
        source.xid_watch = xid_watch
        source.jobs_on_gpus = dict(jobs_on_gpus or {})
        if isinstance(opened, Exception):
            source._error = opened
        else:
            source._nv = opened
        return source

    def get(self) -> nvml_adapter.Nvml:
        """The session; raises NvmlAbsent / NvmlHung / NvmlError as opening did."""
        with self._lock:
            if self._nv is None and self._error is None:
                try:
                    lib = self._library()
                    self._nv = self._stack.enter_context(
                        nvml_adapter.session(lib, call_timeout=self._timeout, init_timeout=self._init_timeout))
                except (nvml_adapter.NvmlAbsent, nvml_adapter.NvmlHung, nvml_adapter.NvmlError) as exc:
                    self._error = exc
            if self._error is not None:
                raise self._error
            assert self._nv is not None
            return self._nv

    def devices(self) -> tuple[rd.Device, ...]:
        """The GPUs, read once per run (index, UUID, name, handle)."""
        nv = self.get()
        with self._lock:
            if self._devices is None:
                self._devices = rd.devices(nv)
            return self._devices

    def close(self) -> None:
        with self._lock:
            self._stack.close()


@dataclass(frozen=True, slots=True)
class CheckEnv:
    context: Context
    config: Config
    job: JobInfo
    state: StateDir
    gpus: GpuSource
    runner: Runner
    libraries: GpuLibraries | None = None  # CUDA/NCCL through cffi; None where the node has none
    expected_gpus: int | None = None
    auth: str = ""  # Slurm's AuthType plugin name, e.g. "munge"
    real_memory_mib: int = 0
    meminfo: Path = Path("/proc/meminfo")
    mounts: Path = Path("/proc/self/mounts")

    def limits(self, gpu_name: str = "") -> Thresholds:
        """Thresholds for this GPU model (the config's model rules)."""
        return self.config.thresholds_for(gpu_name)


@dataclass(frozen=True, slots=True)
class Check:
    """One health check: a name, where it runs, its time budget, and its run function."""

    name: str
    contexts: frozenset[Context]
    run: Callable[[CheckEnv], CheckResult]
    timeout: float = 5.0  # seconds; past it the check is a failure and the run moves on
    skippable: bool = False  # a job's comment may skip it (slurmpod:skip=NAME)
    description: str = ""

