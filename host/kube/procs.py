"""The cluster's daemons: started detached with a pid file each, stopped by that pid only.

A pid file holds the pid and the executable it was started from; ``stop`` signals a pid only while
/proc says it still runs that executable, so a recycled pid is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

STOP_GRACE_S = 20.0


@dataclass(frozen=True, slots=True)
class Daemon:
    name: str
    argv: tuple[str, ...]


def _pid_file(run: Path, name: str) -> Path:
    return run / f"{name}.pid"


def _exe(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
    except OSError:
        return None


def start(daemon: Daemon, run: Path, logs: Path) -> int:
    run.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / f"{daemon.name}.log", "ab") as log:
        proc = subprocess.Popen(daemon.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    exe = os.path.realpath(daemon.argv[0])
    _pid_file(run, daemon.name).write_text(f"{proc.pid}\n{exe}\n", encoding="utf-8")
    return proc.pid


def running(run: Path, name: str) -> int | None:
    """The daemon's pid while it runs the executable it was started from."""
    try:
        pid_text, exe = _pid_file(run, name).read_text(encoding="utf-8").split("\n")[:2]
    except (OSError, ValueError):
        return None
    pid = int(pid_text)
    return pid if _exe(pid) == exe else None


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):  # our own child only when started in this process
        os.waitpid(pid, os.WNOHANG)


def stop(run: Path, names: Sequence[str], grace_s: float = STOP_GRACE_S) -> list[str]:
    """SIGTERM each running daemon, SIGKILL what is left after ``grace_s``; the names that had to be killed."""
    pids = {n: p for n in names if (p := running(run, n)) is not None}
    for pid in pids.values():
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        for pid in pids.values():
            _reap(pid)
        if all(running(run, n) is None for n in pids):
            break
        time.sleep(0.2)
    killed = [n for n in pids if running(run, n) is not None]
    for n in killed:
        os.kill(pids[n], signal.SIGKILL)
        _reap(pids[n])
    for n in names:
        _pid_file(run, n).unlink(missing_ok=True)
    return killed


def kill_pid(pid: int) -> None:
    """SIGKILL one pid found by leftovers.processes (a daemon whose pid file is gone)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
