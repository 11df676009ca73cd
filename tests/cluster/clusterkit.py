"""Helpers for the cluster tests: the session's cluster and how to run things in it."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from slurmpod import well_known as wk
from slurmpod.cluster import cli, runtime

NAME = "sptest"
WORKERS = 2
UP_TIMEOUT_S = 240
COMMAND_TIMEOUT_S = 600


@dataclass(frozen=True, slots=True)
class Session:
    """The running cluster and how to reach it."""

    cluster: cli.Cluster
    client: Any
    flavor: str
    env: dict[str, str]  # for `slurmpod` subprocesses: the session's state dir

    def slurmpod(self, *args: str, timeout: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        return run_slurmpod(self.env, *args, timeout=timeout)

    def as_researcher(self, *argv: str, timeout: float = 120) -> runtime.ExecResult:
        home = f"/home/{wk.DEMO_USER}"
        return runtime.exec_in(self.client, self.cluster.login, argv, timeout_s=timeout, user=wk.DEMO_USER,
                               workdir=home, env={"HOME": home, "USER": wk.DEMO_USER})

    def root_in(self, pod: str, *argv: str, timeout: float = 60) -> runtime.ExecResult:
        return runtime.exec_in(self.client, pod, argv, timeout_s=timeout)


def run_slurmpod(env: dict[str, str], *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "slurmpod.cli", *args], env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)
