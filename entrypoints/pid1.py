"""Pod start as PID 1: ending at once on SIGTERM until supervisord takes over, then becoming it."""

from __future__ import annotations

import importlib
import os
import signal
import socket
import time
from pathlib import Path


def end_on_sigterm() -> None:
    """PID 1 ignores signals it has no handler for, so a pod deleted while it starts would wait out its
    whole grace period. Until supervisord takes over, SIGTERM ends the pod at once (nothing is half
    written: every file is written to a temporary name and renamed).
    Ref: https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination"""

    def _exit(signum: int, _frame: object) -> None:
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)


def kick_supervisord(sock: Path, deadline_s: float = 5.0) -> None:
    """Fork a child that connects once to supervisord's control socket as soon as it exists.

    supervisord polls its sockets for up to 1 s before its first pass over the programs, so an idle
    start waits a full second before munged and slurmd are spawned. A connection makes that first poll
    return at once. Ref: supervisor/supervisord.py Supervisor.runforever (poll before transition).
    """
    if os.fork() != 0:
        return
    try:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(1.0)
                    s.connect(str(sock))
                break
            except OSError:  # not there yet, or a stale file from the last start
                time.sleep(0.005)
    finally:
        os._exit(0)


def run_supervisord(conf: Path) -> int:
    """Become supervisord in this process (PID 1) rather than exec a second interpreter.

    supervisord's main() is what its console script calls; running it here saves a Python start and the
    imports both share, the largest part of what our start adds over a bare slurmd (make bench). It
    installs its own SIGTERM handler; until then ours ends the pod at once. Returns 0 when it shuts down.
    Ref: supervisor/supervisord.py main(args)
    """
    supervisord = importlib.import_module("supervisor.supervisord")
    supervisord.main(["-n", "-c", str(conf)])
    return 0
