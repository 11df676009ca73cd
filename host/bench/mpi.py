"""MPI start-up across pods: `srun --mpi=pmix -N2 -n4` to its first output, beside `srun -N2 -n4 hostname`.

Both run from the login pod as the researcher, alternated in one cluster, so each pair shares its
minute's load. The clock is the login pod's: `date +%s%N` before srun and when its first line arrives
(read from srun's stdout, then the rest drained so the job ends normally). slurmpod-mpi-hello prints after
MPI_Init and one MPI_Allreduce, so its first line measures the PMIx wire-up of 4 ranks on 2 pods.
"""

from __future__ import annotations

from typing import Any

from slurmpod import well_known as wk
from slurmpod.errors import PermanentError
from slurmpod_host.bench.report import Figure, Report, median
from slurmpod_host.cluster import runtime

TRIALS = 10
FLOOR_RATIO = 1.5  # MPI start-up at most this many times `srun hostname`'s, same run
# --overcommit: the emulated workers have one usable CPU each; four tasks on two pods need it.
SRUN = "srun -N2 -n4 --overcommit -t 2"
MPI = f"{SRUN} --mpi=pmix slurmpod-mpi-hello"
HOSTNAME = f"{SRUN} --mpi=none hostname"


def _first_output_s(client: Any, login: str, command: str) -> float:
    script = (f"t0=$(date +%s%N); {command} | {{ read -r first || exit 3; t1=$(date +%s%N); cat >/dev/null; "
              "echo $(( (t1 - t0) / 1000 )); }; exit ${PIPESTATUS[0]}")
    home = f"/home/{wk.DEMO_USER}"
    done = runtime.exec_in(client, login, ["bash", "-c", script], timeout_s=180, user=wk.DEMO_USER, workdir=home,
                           env={"HOME": home, "USER": wk.DEMO_USER})
    if done.code != 0:
        raise PermanentError(f"`{command}` failed ({done.code}): {done.stdout[-1000:]}{done.stderr[-1000:]}")
    return int(done.stdout.split()[-1]) / 1e6


def startup(report: Report, client: Any, login: str, has_pmix: bool, *, trials: int = TRIALS, label: str = "") -> None:
    if not has_pmix:
        report.notes.append(f"{label}mpi: skipped, this flavor's Slurm has no mpi/pmix")
        return
    _first_output_s(client, login, MPI)  # warm: user lookups, page cache of the MPI libraries
    _first_output_s(client, login, HOSTNAME)
    mpi: list[float] = []
    plain: list[float] = []
    for _ in range(trials):
        mpi.append(_first_output_s(client, login, MPI))
        plain.append(_first_output_s(client, login, HOSTNAME))
    report.add(Figure(f"{label}`srun --mpi=pmix -N2 -n4` MPI start-up to first output (median of {trials})", "s",
                      median(mpi), median(plain), "`srun -N2 -n4 hostname`, same run",
                      floor=f"<= {FLOOR_RATIO:g}x baseline", ok=median(mpi) <= FLOOR_RATIO * median(plain),
                      samples=tuple(mpi), baseline_samples=tuple(plain)))
