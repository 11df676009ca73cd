"""hardware.probe over fake sysfs/procfs trees: topology, cpuset, cgroup v1/v2 CPU and memory limits."""

from __future__ import annotations

from pathlib import Path

import podkit
import pytest
from podkit import Machine

from slurmpod import hardware
from slurmpod.errors import PermanentError

GIB = 1 << 30


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", (0,)),
        ("0-3", (0, 1, 2, 3)),
        ("0-3,8,10-11\n", (0, 1, 2, 3, 8, 10, 11)),
        ("4,0-1", (0, 1, 4)),
        ("", ()),
        ("0-1,1-2", (0, 1, 2)),
    ],
    ids=["single", "range", "mixed", "unsorted", "empty", "overlap"],
)
def test_parse_cpu_list(text: str, expected: tuple[int, ...]) -> None:
    assert hardware.parse_cpu_list(text) == expected


@pytest.mark.parametrize(
    ("machine", "shape"),
    [
        (Machine(sockets=1, cores_per_socket=2, threads_per_core=1), (2, 1, 2, 1)),
        (Machine(sockets=2, cores_per_socket=4, threads_per_core=2), (16, 2, 4, 2)),
        (Machine(sockets=2, cores_per_socket=48, threads_per_core=2), (192, 2, 48, 2)),
        (Machine(sockets=1, cores_per_socket=8, threads_per_core=1, topology_files=False), (8, 1, 8, 1)),
    ],
    ids=["2cpu-flat", "2-socket-smt", "dgx-like", "no-topology-files"],
)
def test_topology(tmp_path: Path, machine: Machine, shape: tuple[int, int, int, int]) -> None:
    hw = hardware.probe(podkit.write_machine(tmp_path, machine))
    assert (hw.cpus, hw.sockets, hw.cores_per_socket, hw.threads_per_core) == shape
    assert hw.allowed_cpus == tuple(range(machine.cpus))
    assert hw.memory_mib == machine.mem_mib
    assert (hw.cgroup_cpu_millis, hw.cgroup_memory_mib, hw.gpus) == (None, None, ())


def test_asymmetric_topology_falls_back_to_flat(tmp_path: Path) -> None:
    root = podkit.write_machine(tmp_path, Machine(sockets=1, cores_per_socket=4, threads_per_core=1))
    # cpu3 is a second thread of core 0: 3 cores, one of them with 2 threads.
    (root / "sys/devices/system/cpu/cpu3/topology/core_id").write_text("0\n")
    hw = hardware.probe(root)
    assert (hw.sockets, hw.cores_per_socket, hw.threads_per_core) == (1, 4, 1)


def test_cpuset(tmp_path: Path) -> None:
    hw = hardware.probe(podkit.write_machine(tmp_path, Machine(cores_per_socket=8, allowed="2-3,6")))
    assert hw.cpus == 8
    assert hw.allowed_cpus == (2, 3, 6)


def test_no_status_file_means_every_online_cpu(tmp_path: Path) -> None:
    root = podkit.write_machine(tmp_path, Machine(cores_per_socket=4))
    (root / "proc/self/status").unlink()
    assert hardware.probe(root).allowed_cpus == (0, 1, 2, 3)


@pytest.mark.parametrize(
    ("machine", "cpu_millis", "mem_mib"),
    [
        (Machine(cgroup="v2", cpu_quota_us=150_000, cpu_period_us=100_000, mem_limit_bytes=4 * GIB), 1500, 4096),
        (Machine(cgroup="v2", cpu_quota_us=50_000, cpu_period_us=100_000), 500, None),
        (Machine(cgroup="v2"), None, None),
        (Machine(cgroup="v1", cpu_quota_us=200_000, cpu_period_us=100_000, mem_limit_bytes=GIB + 5), 2000, 1024),
        (Machine(cgroup="v1", cpu_quota_us=33_333, cpu_period_us=100_000), 333, None),
        (Machine(cgroup="v1"), None, None),
        (Machine(cgroup="none"), None, None),
    ],
    ids=[
        "v2-quota-and-memory",
        "v2-half-cpu",
        "v2-max",
        "v1-quota-and-memory",
        "v1-rounds-down",
        "v1-unlimited",
        "no-cgroup-files",
    ],
)
def test_cgroup_limits(tmp_path: Path, machine: Machine, cpu_millis: int | None, mem_mib: int | None) -> None:
    hw = hardware.probe(podkit.write_machine(tmp_path, machine))
    assert (hw.cgroup_cpu_millis, hw.cgroup_memory_mib) == (cpu_millis, mem_mib)


def test_cgroup_v1_cpu_without_cpuacct_alias(tmp_path: Path) -> None:
    root = podkit.write_machine(tmp_path, Machine(cgroup="none"))
    cpu = root / "sys/fs/cgroup/cpu"
    cpu.mkdir(parents=True)
    (cpu / "cpu.cfs_quota_us").write_text("250000\n")
    (cpu / "cpu.cfs_period_us").write_text("100000\n")
    assert hardware.probe(root).cgroup_cpu_millis == 2500


def test_gpus_are_passed_through(tmp_path: Path) -> None:
    gpu = hardware.Gpu(index=0, minor=0, uuid="GPU-0", name="NVIDIA H100 80GB HBM3", cpu_affinity=(0, 1))
    assert hardware.probe(podkit.write_machine(tmp_path), (gpu,)).gpus == (gpu,)


def test_missing_online_file_is_permanent(tmp_path: Path) -> None:
    with pytest.raises(PermanentError, match="online"):
        hardware.probe(tmp_path)


def test_missing_memtotal_is_permanent(tmp_path: Path) -> None:
    root = podkit.write_machine(tmp_path)
    (root / "proc/meminfo").write_text("MemFree: 1 kB\n")
    with pytest.raises(PermanentError, match="MemTotal"):
        hardware.probe(root)


def test_malformed_kernel_file_is_a_permanent_error_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "sys/devices/system/cpu").mkdir(parents=True)
    (tmp_path / "sys/devices/system/cpu/online").write_text("0-1\n", encoding="ascii")
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/meminfo").write_text("MemTotal: 1000 kB\n", encoding="ascii")
    (tmp_path / "sys/fs/cgroup").mkdir(parents=True)
    (tmp_path / "sys/fs/cgroup/cpu.max").write_text("lots 100000\n", encoding="ascii")
    with pytest.raises(PermanentError, match="malformed"):
        hardware.probe(tmp_path)


def test_rdma_devices_are_the_verbs_devices_the_container_was_given(tmp_path: Path) -> None:
    root = podkit.write_machine(tmp_path, Machine(cores_per_socket=2))
    assert hardware.probe(root).rdma_devices == ()
    (root / "dev/infiniband").mkdir(parents=True)
    for name in ("uverbs1", "uverbs0", "rdma_cm", "umad0", "uverbs0\nUCX_X=1", "uverbsX"):
        (root / "dev/infiniband" / name).touch()
    assert hardware.probe(root).rdma_devices == ("uverbs0", "uverbs1")
