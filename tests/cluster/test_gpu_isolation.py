"""Per-job GPU isolation with task/cgroup and ConstrainDevices.

One worker shows 8 fake GPUs (the C fake libnvidia-ml.so.1 of tests/fakes, as in test_gres.py) and has
real character devices /dev/nvidiaN (NVIDIA's major 195, minor N): gpu/nvml gives slurmd File=/dev/nvidia
<minor>, and the devices cgroup acts on those numbers. No driver backs them, so open() tells the two
cases apart: a device the job's cgroup allows fails with ENXIO (no such device), one it denies with EPERM.
Two 2-GPU jobs run on that worker at the same time; each can open exactly its own two devices.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

import cgroupkit
import healthkit
import pytest
from clusterkit import Session, job, node, wait_for
from healthkit import FAKE_STATE_DIR

from slurmpod_host.cluster import lifecycle

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

GPUS = 8
STATE = f"gpus={GPUS}\nname=NVIDIA A100-SXM4-80GB\naffinity=online\n"  # see test_gres.py
MINOR_OFFSET = 4  # the fake's nvmlDeviceGetMinorNumber: index + 4 (tests/fakes/nvml)
NVIDIA_MAJOR = 195  # Ref: https://www.kernel.org/doc/Documentation/admin-guide/devices.txt (195 char)
# Each job writes what it can open, then stays until the test has seen both (bounded by its time limit).
PROBE = """\
import errno, glob, os
for d in sorted(glob.glob("/dev/nvidia[0-9]*"), key=lambda p: int(p[len("/dev/nvidia"):])):
    try:
        os.close(os.open(d, os.O_RDWR))
        r = "OPENED"
    except OSError as e:
        r = errno.errorcode.get(e.errno, str(e.errno))
    print("DEV", d, r)
print("CVD", os.environ.get("CUDA_VISIBLE_DEVICES", ""))
print("GPUS", os.environ.get("SLURM_JOB_GPUS", ""))
"""


def _patch() -> lifecycle.PodPatch:
    """The fake-GPU worker: the fakes as the driver's libraries, /dev/nvidia* as real character devices
    (MKNOD, for this test only: a real pod gets them from the NVIDIA device plugin), and two CPUs so two
    one-core jobs fit at once."""
    first, last = MINOR_OFFSET, MINOR_OFFSET + GPUS - 1
    nodes = (f"for i in $(seq {first} {last}); do mknod -m 666 /dev/nvidia$i c {NVIDIA_MAJOR} $i; done"
             f" && mknod -m 666 /dev/nvidiactl c {NVIDIA_MAJOR} 255")
    gpu = dataclasses.replace(healthkit.fake_gpu_patch(nodes), cap_add=("MKNOD",), cpu_limit="2")
    return cgroupkit.with_host_v1(gpu)


@pytest.fixture(scope="module")
def gpu_worker(session: Session, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    worker = session.cluster.workers[0]
    with healthkit.fakes_installed(session, tmp_path_factory.mktemp("fakegpu")):
        healthkit.write_file(session, session.cluster.login, f"{FAKE_STATE_DIR}/{worker}", STATE)
        with cgroupkit.cgroup_cluster(session, {worker: _patch()}):
            n = node(session, worker)
            assert n is not None and healthkit.gpu_count(n.gres) == GPUS, n
            yield worker


@dataclasses.dataclass(frozen=True, slots=True)
class Seen:
    opened: frozenset[int]  # minors whose open() the cgroup allowed (ENXIO: no driver behind it)
    denied: frozenset[int]  # minors whose open() failed with EPERM
    cvd: tuple[str, ...]
    job_gpus: tuple[int, ...]  # SLURM_JOB_GPUS: the node's GPU indices the job was given


def _parse(out: str) -> Seen:
    devs = dict(re.findall(r"^DEV /dev/nvidia(\d+) (\S+)$", out, re.MULTILINE))
    cvd = re.search(r"^CVD (\S*)$", out, re.MULTILINE)
    gpus = re.search(r"^GPUS (\S*)$", out, re.MULTILINE)
    assert devs and cvd and gpus, out
    return Seen(frozenset(int(m) for m, r in devs.items() if r in {"ENXIO", "ENODEV", "OPENED"}),
                frozenset(int(m) for m, r in devs.items() if r == "EPERM"),
                tuple(x for x in cvd.group(1).split(",") if x), tuple(int(x) for x in gpus.group(1).split(",") if x))


@pytest.mark.smoke
def test_two_2_gpu_jobs_share_a_worker_and_open_only_their_own_gpus(session: Session, gpu_worker: str) -> None:
    probe = cgroupkit.home("gpu-probe.py")
    cgroupkit.write_as_researcher(session, probe, PROBE)
    outs = [cgroupkit.home(f"gpu-isolation-{i}.out") for i in range(2)]
    session.as_researcher("rm", "-f", *outs)
    jobs = [cgroupkit.sbatch(session, "-w", gpu_worker, "--gres=gpu:2", "-c1", "--mem=64M", "--time=3",
                             f"--output={out}", "--wrap", f"python3 {probe}; sleep 170") for out in outs]
    try:
        def both_written() -> list[str] | None:
            texts = [session.as_researcher("cat", out).stdout for out in outs]
            return texts if all("GPUS " in t for t in texts) else None
        texts, waited = wait_for("both jobs' probes", both_written, cgroupkit.JOB_RUNNING_WORST_S)
        states = [job(session, j).state for j in jobs]
        assert states == ["RUNNING", "RUNNING"], states  # at the same time, on the same worker
    finally:
        cgroupkit.cancel(session, gpu_worker, *jobs)
    seen = [_parse(t) for t in texts]
    print(f"probes of both jobs written after {waited:.1f}s: {seen}")
    all_minors = set(range(MINOR_OFFSET, MINOR_OFFSET + GPUS))
    for s in seen:
        assert len(s.job_gpus) == 2 and len(set(s.job_gpus)) == 2, s
        assert s.opened == {g + MINOR_OFFSET for g in s.job_gpus}, s  # exactly its own two device files
        assert s.denied == all_minors - s.opened, s  # the other six: EPERM from the job's devices cgroup
        # CUDA numbers the devices a process can use from 0: two of them (Slurm sets local indices when
        # ConstrainDevices hides the rest). Ref: https://slurm.schedmd.com/gres.html#GPU_Management
        assert s.cvd == ("0", "1"), s
    assert not seen[0].opened & seen[1].opened, seen  # neither sees the other's GPUs
