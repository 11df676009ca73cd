"""`slurmpod probe ready|live`: Kubernetes readiness and liveness for every role.

ready: the pod does its Slurm job now. worker: its node is usable (not DOWN, DRAIN, NOT_RESPONDING,
INVALID_REG ...); controller: slurmctld answers; login: the Slurm config is reachable; db, accounting,
restapi: mariadbd, slurmdbd, slurmrestd accept connections on their ports.
live: supervisord answers, and reports no long-running program broken (FATAL, BACKOFF, UNKNOWN).
An unreachable supervisord fails liveness: kubelet then restarts the pod.
Ref: https://kubernetes.io/docs/tasks/configure-pod-container/configure-liveness-readiness-startup-probes/
"""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from slurmpod import podinfo
from slurmpod import well_known as wk
from slurmpod.entrypoints.supervisor import BROKEN_STATES, Supervisor, SupervisorCtl
from slurmpod.errors import SlurmpodError
from slurmpod.slurm import CliSlurmClient, SlurmClient


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    why: str


# Roles without a Slurm node: ready when their daemon accepts connections on its port here.
PORT_ROLES = {"db": wk.MARIADB_PORT, "accounting": wk.SLURMDBD_PORT, "restapi": wk.SLURMRESTD_PORT}


def listening(port: int, timeout: float, host: str = "127.0.0.1") -> Verdict:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return Verdict(True, f"port {port} accepts connections")
    except OSError as exc:
        return Verdict(False, f"port {port}: {exc.strerror or exc}")


def ready(client: SlurmClient, role: str, name: str, timeout: float) -> Verdict:
    if role in PORT_ROLES:
        return listening(PORT_ROLES[role], timeout)
    try:
        if role == "controller":
            return Verdict(client.ping(timeout=timeout), "slurmctld ping")
        if role == "login":
            client.sinfo_summary(timeout=timeout)
            return Verdict(True, "sinfo answers")
        state = client.node(name, timeout=timeout)
    except SlurmpodError as exc:
        return Verdict(False, str(exc))
    if state is None:
        return Verdict(False, f"node {name} not registered")
    if not state.usable:
        return Verdict(False, f"node {name} is {state}")
    return Verdict(True, f"node {name} is {state}")


def live(supervisor: Supervisor, timeout: float) -> Verdict:
    try:
        programs = supervisor.status(timeout=timeout)
    except SlurmpodError as exc:
        return Verdict(False, str(exc))
    bad = [f"{p.name} {p.state}" for p in programs if p.state in BROKEN_STATES]
    return Verdict(not bad, "; ".join(bad) if bad else "all programs running")


def main(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    pod = podinfo.identity(env)
    if args.kind == "live":
        verdict = live(SupervisorCtl(pod.run_dir), args.timeout)
    else:
        verdict = ready(CliSlurmClient(), pod.role, pod.name, args.timeout)
    print(f"{args.kind}: {'ok' if verdict.ok else 'not ok'}: {verdict.why}",
          file=sys.stdout if verdict.ok else sys.stderr)
    return 0 if verdict.ok else 1
