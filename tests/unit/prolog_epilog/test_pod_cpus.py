"""slurmd's CPUs: images/files/slurmpod_cpus.c, which the worker's SPANK plugin runs in slurmd once it has
bound itself to CoreSpecCount's cores. Built here with the host's C compiler into a harness that binds
itself to one CPU first, as slurmd does."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import ckit
import paths
import pytest

HARNESS = paths.REPO / "tests" / "unit" / "prolog_epilog" / "cpus_harness.c"


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ckit.build(tmp_path_factory.mktemp("cpus") / "cpus_harness", f"-I{ckit.FILES}", str(HARNESS),
                      str(ckit.FILES / "slurmpod_cpus.c"), what="the CPU harness")


def _run(command: list[str]) -> dict[str, str]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(part.split("=", 1) for line in done.stdout.splitlines() for part in line.split())


def test_a_thread_bound_to_one_cpu_gets_every_cpu_it_was_allowed_back(harness: Path) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    assert len(allowed) >= 2, f"this test needs a host with two CPUs or more; this process may use {allowed}"
    got = _run([str(harness)])
    assert got["start"] == ",".join(map(str, allowed)), got
    assert got["bound"] == str(allowed[-1]), got  # bound as slurmd binds itself to its specialized core
    assert (got["after"], got["rc"], got["cpus"]) == (got["start"], "0", str(len(allowed))), got

