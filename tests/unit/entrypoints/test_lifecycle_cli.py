"""preStop, node-reaper and reconcile-node refuse bad input with exit 2 before they ask Slurm anything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurmpod import well_known as wk

SLURMPOD = Path(sys.executable).with_name("slurmpod")


@pytest.mark.parametrize(
    ("argv", "env", "named"),
    [
        (["prestop"], {}, "POD_NAME=''"),
        (["prestop"], {wk.ENV_POD_NAME: "w-0", wk.ENV_GRACE_SECONDS: "0"}, "SLURMPOD_GRACE_SECONDS='0.0'"),
        (["prestop", "--grace", "-5"], {wk.ENV_POD_NAME: "w-0"}, "SLURMPOD_GRACE_SECONDS='-5.0'"),
        (["daemon", "reconcile-node"], {}, "POD_NAME=''"),
        (["daemon", "node-reaper", "--interval", "0"], {}, "--node-timeout/--interval='300.0/0.0'"),
        (["daemon", "node-reaper", "--node-timeout", "-1"], {}, "--node-timeout/--interval='-1.0/15.0'"),
    ],
    ids=["prestop-no-pod-name", "prestop-zero-grace", "prestop-negative-grace", "reconcile-no-pod-name",
         "reaper-zero-interval", "reaper-negative-timeout"],
)
def test_bad_input_exits_2_without_calling_slurm(tmp_path: Path, argv: list[str], env: dict[str, str],
                                                 named: str) -> None:
    calls = tmp_path / "calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("scontrol", "squeue", "sinfo"):  # tripwires: any Slurm command leaves a trace
        script = bin_dir / tool
        script.write_text(f"#!/bin/sh\necho {tool} >> {calls}\nexit 1\n")
        script.chmod(0o755)
    full = {k: v for k, v in os.environ.items() if not k.startswith("SLURMPOD_") and k != wk.ENV_POD_NAME}
    full.update(env)
    full["PATH"] = f"{bin_dir}:{full.get('PATH', '/usr/bin:/bin')}"
    full[wk.ENV_TERMINATION_LOG] = str(tmp_path / "absent-log")
    proc = subprocess.run([str(SLURMPOD), *argv], env=full, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("slurmpod: bad input: ") and named in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not calls.exists()
    assert not (tmp_path / "absent-log").exists()  # the termination log is never created


def test_prestop_exits_1_when_the_controller_never_answers(tmp_path: Path) -> None:
    """The real command over a scontrol that cannot reach slurmctld: it only ever reads the node, never
    drains or deletes, and says so with exit 1 (never a pass)."""
    calls = tmp_path / "calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("scontrol", "squeue"):
        script = bin_dir / tool
        script.write_text(f'#!/bin/sh\necho "{tool} $*" >> {calls}\n'
                          'echo "slurm_load_node error: Unable to contact slurm controller (connect failure)" >&2\n'
                          "exit 1\n")
        script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURMPOD_")}
    env.update({"PATH": f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}", wk.ENV_POD_NAME: "w-0",
                wk.ENV_GRACE_SECONDS: "4", wk.ENV_RUN_DIR: str(tmp_path / "run")})
    proc = subprocess.run([str(SLURMPOD), "prestop"], env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    made = set(calls.read_text().splitlines())
    assert made == {"scontrol show node w-0 --json"}
