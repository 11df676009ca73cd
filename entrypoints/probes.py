"""`slurmpod probe ready|live`: Kubernetes readiness and liveness for every role.

ready: the pod does its Slurm job now. worker: its node is usable (not DOWN, DRAIN, NOT_RESPONDING,
INVALID_REG ...); controller: slurmctld answers; login: the Slurm config is reachable.
live: the pod's daemons answer (supervisord reports every long-running program RUNNING).
Ref: https://kubernetes.io/docs/tasks/configure-pod-container/configure-liveness-readiness-startup-probes/
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from slurmpod import kubelet_format, slurm
from slurmpod import well_known as wk
from slurmpod.entrypoints import supervisor
from slurmpod.errors import BadInput, SlurmpodError


def _role() -> str:
    labels = os.path.join(os.environ.get(wk.ENV_PODINFO_DIR, wk.PODINFO_DIR), wk.PODINFO_LABELS)
    try:
        with open(labels, encoding="utf-8") as fh:
            role = kubelet_format.parse(fh.read(), labels).get(wk.LABEL_ROLE)
    except (OSError, BadInput):
        role = None
    return role or os.environ.get("SLURMPOD_ROLE", "worker")


def ready(role: str, name: str, timeout: float) -> tuple[bool, str]:
    if role == "controller":
        return (slurm.ping(timeout), "slurmctld ping")
    if role == "login":
        slurm.run(["sinfo", "--noheader", "--summarize"], timeout)
        return True, "sinfo answers"
    state = slurm.node(name, timeout)
    if state is None:
        return False, f"node {name} not registered"
    if not slurm.usable(state):
        return False, f"node {name} is {'+'.join(sorted(state.states))} {state.reason}".strip()
    return True, f"node {name} is {'+'.join(sorted(state.states))}"


def live(timeout: float) -> tuple[bool, str]:
    """Every autorestarting program RUNNING (or STARTING after a crash, which supervisord handles)."""
    try:
        proc = supervisor.run(["status"], timeout)
    except subprocess.TimeoutExpired:
        return False, "supervisorctl timed out"
    except OSError as exc:
        return False, f"cannot run {wk.SUPERVISORCTL}: {exc.strerror}"
    bad = [
        line
        for line in proc.stdout.splitlines()
        if line.split() and line.split()[1] in {"FATAL", "BACKOFF", "UNKNOWN"}
    ]
    if not proc.stdout.strip():
        return False, f"supervisord not answering: {proc.stderr.strip()[:200]}"
    return (not bad), ("; ".join(bad) if bad else "all programs running")


def main(args: argparse.Namespace) -> int:
    try:
        if args.kind == "live":
            ok, why = live(args.timeout)
        else:
            ok, why = ready(_role(), os.environ.get(wk.ENV_POD_NAME, ""), args.timeout)
    except SlurmpodError as exc:
        ok, why = False, str(exc)
    print(f"{args.kind}: {'ok' if ok else 'not ok'}: {why}", file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1
