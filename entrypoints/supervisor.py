"""This pod's supervisord (PID 1), through supervisorctl. Ref: http://supervisord.org/running.html

``Supervisor`` is the seam the probes, preStop and reconcile-node take; ``SupervisorCtl`` is the real one.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from slurmpod import well_known as wk
from slurmpod.errors import TransientError

# supervisorctl's exit codes for `status`: 0 every program RUNNING, 3 some program not running (a
# one-shot task that EXITED counts); anything else means supervisord did not answer.
# Ref: supervisor/supervisorctl.py (LSBStatusExitStatuses)
STATUS_ANSWERED = (0, 3)
# States in which a long-running program is broken. Ref: http://supervisord.org/subprocess.html#process-states
BROKEN_STATES = frozenset({"FATAL", "BACKOFF", "UNKNOWN"})


@dataclass(frozen=True, slots=True)
class ProgramStatus:
    name: str
    state: str


class Supervisor(Protocol):
    def status(self, *, timeout: float) -> tuple[ProgramStatus, ...]:
        """Every program's state; TransientError when supervisord does not answer."""
        ...

    def control(self, action: str, program: str, *, timeout: float) -> bool:
        """`supervisorctl ACTION PROGRAM` (stop, start); True when it worked."""
        ...


def parse_status(text: str) -> tuple[ProgramStatus, ...]:
    """`supervisorctl status` lines: `NAME STATE details...`."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            out.append(ProgramStatus(parts[0], parts[1]))
    return tuple(out)


class SupervisorCtl:
    def __init__(self, run_dir: Path) -> None:
        self.conf = str(run_dir / wk.SUPERVISORD_CONF)

    def _run(self, args: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run([wk.SUPERVISORCTL, "-c", self.conf, *args], capture_output=True, text=True,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise TransientError(f"supervisorctl {' '.join(args)} timed out after {timeout:g} s") from None
        except OSError as exc:
            raise TransientError(f"cannot run {wk.SUPERVISORCTL}: {exc.strerror}") from None

    def status(self, *, timeout: float) -> tuple[ProgramStatus, ...]:
        proc = self._run(["status"], timeout)
        programs = parse_status(proc.stdout)
        if proc.returncode not in STATUS_ANSWERED or not programs:
            text = (proc.stdout.strip() or proc.stderr.strip())[:200]
            raise TransientError(f"supervisord not answering (supervisorctl exited {proc.returncode}): {text}")
        return programs

    def control(self, action: str, program: str, *, timeout: float) -> bool:
        try:
            return self._run([action, program], timeout).returncode == 0
        except TransientError:
            return False
