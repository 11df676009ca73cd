"""Health checks on fake GPUs, no Docker: a full periodic run (HealthCheckProgram) and a healthy prolog
on 8 fake GPUs, each timed as Slurm pays for it — a whole `slurmpod` process, start to exit.

The fakes are the C stand-ins from tests/fakes (libnvidia-ml.so.1, libcudart.so, libnccl.so.2), built
here with gcc into a temporary directory and put on LD_LIBRARY_PATH; the checks run their real paths.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from slurmpod.errors import PermanentError
from slurmpod_host.bench.report import Figure, Report, median

PERIODIC_FLOOR_S = 1.0  # issue 7: a full periodic check on 8 fake GPUs under 1 s
FAKES = {"libnvidia-ml.so.1": "nvml/fake_nvml.c", "libcudart.so": "cuda/fake_cudart.c",
         "libnccl.so.2": "nccl/fake_nccl.c"}
EIGHT_HEALTHY_GPUS = "gpus=8\nnvlinks=18\nfabric.state=3\n"
RUN_TIMEOUT_S = 120
# The fake NCCL's bandwidth is a nanosleep inside the check's Python loop: on a loaded host it measures
# the loop, not a link, and can dip under H100's 460 GB/s floor. The bench times the run, not the link.
FAKE_BUSBW_FLOOR_GBPS = 100


def build_fakes(repo: Path, out: Path) -> Path:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise PermanentError("gcc is needed to build the fake GPU libraries")
    for name, src in FAKES.items():
        subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(out / name), str(repo / "tests" / "fakes" / src)],
                       check=True, timeout=RUN_TIMEOUT_S)
    return out


def _slurmpod() -> str:
    found = shutil.which("slurmpod") or str(Path(sys.executable).with_name("slurmpod"))
    if not Path(found).exists():
        raise PermanentError("the slurmpod command is not installed in this environment")
    return found


def _timed_runs(context: str, trials: int, repo: Path) -> tuple[list[float], list[float]]:
    """(wall seconds per process, the run's own duration_s) for ``trials`` runs of ``context``."""
    with tempfile.TemporaryDirectory(prefix="slurmpod-bench-health-") as tmp_s:
        tmp = Path(tmp_s)
        libs = build_fakes(repo, tmp)
        (tmp / "state").write_text(EIGHT_HEALTHY_GPUS, encoding="utf-8")
        (tmp / "health.yaml").write_text(f"kernel_log: {tmp / 'kmsg'}\n"
                                         f"thresholds: {{allreduce_busbw_min_gbps: {FAKE_BUSBW_FLOOR_GBPS}}}\n",
                                         encoding="utf-8")
        (tmp / "kmsg").write_text("", encoding="utf-8")
        env = {**os.environ, "LD_LIBRARY_PATH": str(libs), "FAKE_NVML_STATE": str(tmp / "state"),
               "SLURMPOD_EXPECTED_GPUS": "8"}
        argv = [_slurmpod(), "check", "run", "--context", context, "--json", "--config", str(tmp / "health.yaml"),
                "--state-dir", str(tmp / "sd"), "--metrics-dir", str(tmp / "metrics")]
        walls, runs = [], []
        for _ in range(trials):
            start = time.perf_counter()
            proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=RUN_TIMEOUT_S, check=False)
            walls.append(time.perf_counter() - start)
            if proc.returncode != 0:
                raise PermanentError(f"{context} run on healthy fake GPUs failed: {proc.stdout[-2000:]}"
                                     f"{proc.stderr[-2000:]}")
            runs.append(float(json.loads(proc.stdout)["duration_s"]))
        return walls, runs


def periodic_on_fake_gpus(report: Report, repo: Path, trials: int = 7) -> float:
    """Median wall time of a full periodic run (every periodic check, CUDA and NCCL included) on 8 fake GPUs."""
    walls, runs = _timed_runs("periodic", trials, repo)
    value = median(walls)
    report.add(Figure(f"full periodic health check, 8 fake GPUs (median of {trials}, whole process)", "s", value,
                      floor=f"< {PERIODIC_FLOOR_S:g} s", ok=value < PERIODIC_FLOOR_S, samples=tuple(walls)))
    report.notes.append(f"periodic health run, checks only (median of {trials}): {median(runs):.3f} s")
    return value


def prolog_on_fake_gpus(report: Report, repo: Path, trials: int = 7) -> float:
    """Median wall time of a healthy prolog on 8 fake GPUs (the in-cluster overhead figure is the lead's)."""
    walls, _ = _timed_runs("prolog", trials, repo)
    value = median(walls)
    report.add(Figure(f"healthy prolog, 8 fake GPUs (median of {trials}, whole process)", "s", value,
                      samples=tuple(walls)))
    return value
