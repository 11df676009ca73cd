"""MPI over PMIx across pods: `srun --mpi=pmix -N2 -n4` runs an OpenMPI program on both worker pods.

The program is the worker image's slurmpod-mpi-hello (images/files/mpi_hello.c): every rank prints its
rank, the job size, its host (pod) and the sum of all ranks from one MPI_Allreduce.
"""

from __future__ import annotations

import re

import pytest
from clusterkit import Session

from slurmpod_host.images import flavors

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

HELLO = "slurmpod-mpi-hello"
LINE = re.compile(r"^mpi-hello rank=(\d+) size=(\d+) host=(\S+) allreduce_sum=(-?\d+)$", re.MULTILINE)
TASKS = 4


@pytest.mark.smoke
def test_mpi_plugins_and_default_match_the_flavor(session: Session) -> None:
    """pmix is offered exactly where the flavor's Slurm has mpi/pmix, and MpiDefault follows it."""
    has_pmix = flavors.get(session.flavor).mpi_pmix
    listed = session.as_researcher("srun", "--mpi=list")
    assert listed.code == 0, listed.stdout + listed.stderr
    assert ("pmix" in listed.stdout + listed.stderr) == has_pmix, listed.stdout + listed.stderr
    config = session.as_researcher("scontrol", "show", "config")
    default = re.search(r"^MpiDefault\s*=\s*(\S+)", config.stdout, re.MULTILINE)
    assert default is not None, config.stdout
    # 26.05's scontrol shows MpiDefault=none as (null)
    shown = "none" if default.group(1) == "(null)" else default.group(1)
    assert shown == ("pmix" if has_pmix else "none"), config.stdout


def test_mpi_allreduce_across_two_worker_pods(session: Session) -> None:
    if not flavors.get(session.flavor).mpi_pmix:
        pytest.skip(f"Debian's Slurm {session.flavor} has no mpi/pmix plugin (docs/mpi-and-ports.md)")
    # --overcommit: the emulated workers have one usable CPU each (their CPU limit); MPI needs no more.
    run = session.as_researcher("srun", "--mpi=pmix", "-N2", f"-n{TASKS}", "--overcommit", "-t", "2", HELLO,
                                timeout=180)
    assert run.code == 0, run.stdout + run.stderr
    ranks = {int(m[0]): m for m in LINE.findall(run.stdout + run.stderr)}
    assert sorted(ranks) == list(range(TASKS)), run.stdout + run.stderr
    assert {int(m[1]) for m in ranks.values()} == {TASKS}, run.stdout + run.stderr
    assert {m[2] for m in ranks.values()} == set(session.cluster.workers), run.stdout + run.stderr  # both pods
    assert {int(m[3]) for m in ranks.values()} == {sum(range(TASKS))}, run.stdout + run.stderr


# Whether loading UCX (as every OpenMPI rank does) patched libc's munmap: UCX's memory hooks rewrite the
# entry of libc's memory functions (src/ucm/bistro). Run as a task, so it reads the worker's ucx.conf.
UCX_HOOKED = ("import ctypes; libc = ctypes.CDLL(None); "
              "entry = ctypes.cast(libc.munmap, ctypes.c_void_p).value; before = ctypes.string_at(entry, 8); "
              "ctypes.CDLL('libucs.so.0'); print('patched' if ctypes.string_at(entry, 8) != before else 'untouched')")


def test_a_worker_without_rdma_keeps_ucx_memory_hooks_off_unless_a_job_asks(session: Session) -> None:
    """The emulated workers have no verbs device, so their start wrote UCX_MEM_MMAP_HOOK_MODE=none: a rank
    loads UCX without its hooks (40 ms of every rank's start). A job's own UCX_* setting still wins."""
    if not flavors.get(session.flavor).mpi_pmix:
        pytest.skip(f"Debian's Slurm {session.flavor} images carry no OpenMPI or UCX (docs/mpi-and-ports.md)")
    for worker in session.cluster.workers:
        plain = session.as_researcher("srun", "-w", worker, "-N1", "-n1", "python3", "-c", UCX_HOOKED)
        assert (plain.code, plain.stdout.strip()) == (0, "untouched"), plain.stdout + plain.stderr
    asked = session.as_researcher("srun", "-w", session.cluster.workers[0], "-N1", "-n1",
                                  "--export=ALL,UCX_MEM_MMAP_HOOK_MODE=bistro", "python3", "-c", UCX_HOOKED)
    assert (asked.code, asked.stdout.strip()) == (0, "patched"), asked.stdout + asked.stderr


def test_a_steps_pmix_server_keeps_job_data_in_gds_hash(session: Session) -> None:
    """slurmd's run script defaults PMIX_MCA_gds to hash (entrypoints/programs.py), so the PMIx server of
    each `--mpi=pmix` step skips gds/shmem2's segments; the server tells its ranks the stores it offers."""
    if not flavors.get(session.flavor).mpi_pmix:
        pytest.skip(f"Debian's Slurm {session.flavor} has no mpi/pmix plugin (docs/mpi-and-ports.md)")
    for worker in session.cluster.workers:
        run = session.as_researcher("srun", "--mpi=pmix", "-w", worker, "-N1", "-n1", "printenv", "PMIX_GDS_MODULE")
        assert (run.code, run.stdout.strip()) == (0, "hash"), run.stdout + run.stderr


def _limit_kib(limits: str, name: str) -> str:
    """The soft limit ``name`` from /proc/PID/limits, as bash's ulimit prints it (KiB or unlimited)."""
    line = next(ln for ln in limits.splitlines() if ln.startswith(name))
    soft = line[len(name):].split()[0]
    return soft if soft == "unlimited" else str(int(soft) // 1024)


@pytest.mark.smoke
def test_a_task_keeps_the_workers_locked_memory_limit_and_the_shells_other_limits(session: Session) -> None:
    """RDMA locks the memory it registers: a low memlock in the login shell never reaches the task
    (PropagateResourceLimitsExcept=MEMLOCK), which gets slurmd's; the shell's other limits still do."""
    worker = session.cluster.workers[0]
    limits = session.root_in(worker, "sh", "-c", "cat /proc/$(pgrep -x slurmd)/limits")
    assert limits.code == 0, limits.stderr
    slurmd_memlock = _limit_kib(limits.stdout, "Max locked memory")
    assert slurmd_memlock != "64", limits.stdout
    run = session.as_researcher("bash", "-c", f"ulimit -S -l 64 && ulimit -S -n 512 && srun -w {worker} -N1 -n1 "
                                "-t 1 bash -c 'echo memlock=$(ulimit -l) nofile=$(ulimit -n)'", timeout=120)
    assert run.code == 0, run.stdout + run.stderr
    assert run.stdout.split() == [f"memlock={slurmd_memlock}", "nofile=512"], run.stdout
