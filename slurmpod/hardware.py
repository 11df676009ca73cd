"""What the container may use: CPU topology, cpuset, cgroup CPU and memory limits, RDMA devices.

A pure reader over a filesystem root (``/`` in a pod, a fixture tree in tests). GPUs come from the
NVML adapter and are passed in separately.
Ref: https://docs.kernel.org/admin-guide/cgroup-v2.html#cpu-interface-files (cpu.max, memory.max)
Ref: https://docs.kernel.org/admin-guide/cgroup-v1/memory.html (memory.limit_in_bytes)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from slurmpod.errors import PermanentError

_UVERBS = re.compile(r"uverbs[0-9]{1,4}")
# cgroup v1 reports "no limit" as a huge page-rounded number; anything at or above this is no limit.
_V1_UNLIMITED = 1 << 62


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU as NVML reports it."""

    index: int
    minor: int  # /dev/nvidia<minor>
    uuid: str
    name: str
    cpu_affinity: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Hardware:
    """The machine and the share of it this container may use."""

    cpus: int  # logical CPUs online on the host
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    allowed_cpus: tuple[int, ...]  # the cpuset
    cgroup_cpu_millis: int | None  # CFS quota, None when unlimited
    memory_mib: int  # host MemTotal
    cgroup_memory_mib: int | None  # None when unlimited
    gpus: tuple[Gpu, ...] = ()
    rdma_devices: tuple[str, ...] = ()  # /dev/infiniband/uverbs* the container was given


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """'0-3,8,10-11' -> (0, 1, 2, 3, 8, 10, 11). Ref: https://docs.kernel.org/admin-guide/cputopology.html"""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return tuple(sorted(cpus))


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip()
    except OSError:
        return None


def _topology(root: Path, online: tuple[int, ...]) -> tuple[int, int, int]:
    """(sockets, cores_per_socket, threads_per_core) from sysfs; flat 1-socket layout if absent."""
    cores: dict[tuple[str, str], int] = {}
    sockets: set[str] = set()
    for cpu in online:
        topo = root / f"sys/devices/system/cpu/cpu{cpu}/topology"
        pkg, core = _read(topo / "physical_package_id"), _read(topo / "core_id")
        if pkg is None or core is None:
            return 1, len(online), 1
        sockets.add(pkg)
        cores[(pkg, core)] = cores.get((pkg, core), 0) + 1
    threads = max(cores.values())
    n_sockets = len(sockets)
    per_socket = max(1, len(cores) // n_sockets)
    if n_sockets * per_socket * threads != len(online):  # asymmetric: fall back to flat
        return 1, len(online), 1
    return n_sockets, per_socket, threads


def _cgroup_cpu_millis(root: Path) -> int | None:
    v2 = _read(root / "sys/fs/cgroup/cpu.max")
    if v2 is not None:
        quota, _, period = v2.partition(" ")
        if quota == "max" or not period:
            return None
        return math.floor(int(quota) * 1000 / int(period))
    for base in ("sys/fs/cgroup/cpu", "sys/fs/cgroup/cpu,cpuacct"):
        quota_s = _read(root / base / "cpu.cfs_quota_us")
        period_s = _read(root / base / "cpu.cfs_period_us")
        if quota_s is not None and period_s is not None:
            quota_us = int(quota_s)
            return None if quota_us < 0 else math.floor(quota_us * 1000 / int(period_s))
    return None


def _cgroup_memory_mib(root: Path) -> int | None:
    v2 = _read(root / "sys/fs/cgroup/memory.max")
    if v2 is not None:
        return None if v2 == "max" else int(v2) // (1024 * 1024)
    v1 = _read(root / "sys/fs/cgroup/memory/memory.limit_in_bytes")
    if v1 is not None:
        value = int(v1)
        return None if value >= _V1_UNLIMITED else value // (1024 * 1024)
    return None


def _memtotal_mib(root: Path) -> int:
    text = _read(root / "proc/meminfo") or ""
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024  # kB -> MiB
    raise PermanentError(f"no MemTotal in {root / 'proc/meminfo'}")


def _allowed(root: Path, online: tuple[int, ...]) -> tuple[int, ...]:
    status = _read(root / "proc/self/status") or ""
    for line in status.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return parse_cpu_list(line.split(":", 1)[1])
    return online


def probe(root: Path = Path("/"), gpus: tuple[Gpu, ...] = ()) -> Hardware:
    """Read the hardware facts under ``root``; unreadable or malformed kernel files are a PermanentError."""
    try:
        return _probe(root, gpus)
    except ValueError as exc:
        raise PermanentError(f"malformed CPU, memory or cgroup file under {root}: {exc}") from None


def _probe(root: Path, gpus: tuple[Gpu, ...]) -> Hardware:
    online_text = _read(root / "sys/devices/system/cpu/online")
    if online_text is None:
        raise PermanentError(f"cannot read {root / 'sys/devices/system/cpu/online'}")
    online = parse_cpu_list(online_text)
    sockets, per_socket, threads = _topology(root, online)
    return Hardware(
        cpus=len(online),
        sockets=sockets,
        cores_per_socket=per_socket,
        threads_per_core=threads,
        allowed_cpus=_allowed(root, online),
        cgroup_cpu_millis=_cgroup_cpu_millis(root),
        memory_mib=_memtotal_mib(root),
        cgroup_memory_mib=_cgroup_memory_mib(root),
        gpus=gpus,
        rdma_devices=_rdma_devices(root),
    )


def _rdma_devices(root: Path) -> tuple[str, ...]:
    """The RDMA devices a process here can open: the verbs character devices (InfiniBand, RoCE, EFA)
    a device plugin put into the container. sysfs's infiniband class lists the host's devices whether
    or not the container was given them, so it is not asked.
    Ref: https://docs.kernel.org/infiniband/user_verbs.html"""
    try:
        return tuple(sorted(p.name for p in (root / "dev/infiniband").iterdir() if _UVERBS.fullmatch(p.name)))
    except OSError:
        return ()
