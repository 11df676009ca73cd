"""Helpers for the cluster tests: the session's cluster and how to run things in it."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from waiting import wait_for

from slurmpod import nodestate
from slurmpod import well_known as wk
from slurmpod_host.cluster import cli, jobs, lifecycle, runtime
from slurmpod_host.cluster import well_known as host_wk
from slurmpod_host.cluster.jobs import JobRecord

NAME = "sptest"
WORKERS = 2
UP_TIMEOUT_S = 240
COMMAND_TIMEOUT_S = 600
# True: every cluster these suites bring up enforces its NetworkPolicies (`cluster up --enforce-network-policy`,
# iptables on the bridge; docs/testing.md). SLURMPOD_ENFORCE_NETWORK_POLICY=1 in the environment does the same.
ENFORCE_NETWORK_POLICY = True
UP_ARGS = ("--enforce-network-policy",) if ENFORCE_NETWORK_POLICY else ()
T = TypeVar("T")


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
    # -P: the installed packages, never the checkout's ./slurmpod folder (which would shadow them)
    return subprocess.run([sys.executable, "-P", "-m", "slurmpod.cli", *args], env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


# --- Node state and pod lifecycle helpers (tests/cluster/test_node_lifecycle.py, test_faults.py) ---

IDLE_TIMEOUT_S = 90.0


def out_dir(s: Session, suite: str, name: str) -> str:
    """A fresh directory for a test's job output in the researcher's shared home."""
    path = f"/home/{wk.DEMO_USER}/{suite}/{name}"
    result = s.as_researcher("sh", "-c", f"rm -rf {shlex.quote(path)} && mkdir -p {shlex.quote(path)}")
    assert result.code == 0, result.stderr
    return path


def sbatch(s: Session, *args: str) -> int:
    """sbatch as the researcher; the job id."""
    result = s.as_researcher("sbatch", "--parsable", *args, timeout=60)
    assert result.code == 0, result.stderr
    return int(result.stdout.strip().split(";")[0])


def scontrol_json(s: Session, *args: str) -> str:
    result = s.root_in(s.cluster.controller, "scontrol", "show", *args, "--json", timeout=30)
    assert result.code == 0, result.stderr
    return result.stdout


def nodes(s: Session) -> dict[str, nodestate.NodeState]:
    """Every node, from `scontrol show nodes --json` parsed by slurmpod.nodestate."""
    return {n.name: n for n in nodestate.parse_nodes(scontrol_json(s, "nodes"))}


def node(s: Session, name: str) -> nodestate.NodeState | None:
    """One node from `scontrol show node NAME --json`; None when Slurm does not know it."""
    result = s.root_in(s.cluster.controller, "scontrol", "show", "node", name, "--json", timeout=30)
    if result.code != 0:
        return None
    return next((n for n in nodestate.parse_nodes(result.stdout) if n.name == name), None)


def node_json(s: Session, name: str) -> dict[str, Any]:
    """The raw JSON object of one node (fields slurmpod.slurm does not model, e.g. slurmd_start_time)."""
    found: list[dict[str, Any]] = json.loads(scontrol_json(s, "node", name))["nodes"]
    return next(n for n in found if n["name"] == name)


def usable(s: Session, name: str) -> nodestate.NodeState | None:
    n = node(s, name)
    return n if n is not None and n.usable_idle else None


def wait_idle(s: Session, name: str, timeout: float = IDLE_TIMEOUT_S) -> float:
    """Seconds until ``name`` is IDLE and usable (not DRAIN, DOWN, NOT_RESPONDING, INVALID_REG ...)."""
    return wait_for(f"node {name} IDLE", lambda: usable(s, name), timeout)[1]


def all_idle(s: Session, timeout: float = IDLE_TIMEOUT_S) -> None:
    for worker in s.cluster.workers:
        wait_idle(s, worker, timeout)


def scontrol(s: Session, *args: str) -> None:
    result = s.root_in(s.cluster.controller, "scontrol", *args, timeout=30)
    assert result.code == 0, f"scontrol {' '.join(args)}: {result.stderr}"


def job(s: Session, job_id: int | str) -> JobRecord:
    """The job as slurmctld holds it (`scontrol show job --json`; a finished job stays MinJobAge, 300 s)."""
    result = s.root_in(s.cluster.controller, *jobs.argv(job_id), timeout=30)
    assert result.code == 0, result.stderr
    return jobs.one(result.stdout, job_id)


def all_jobs(s: Session) -> dict[int, JobRecord]:
    """Every job slurmctld still holds, by id, in one call."""
    result = s.root_in(s.cluster.controller, *jobs.argv(), timeout=30)
    assert result.code == 0, result.stderr
    return {j.job_id: j for j in jobs.parse(result.stdout)}


def lift_requeue_hold(s: Session, job_id: int | str, record: JobRecord) -> None:
    """slurmctld holds a requeued batch job back (up to the credential lifetime, 120 s by default) before it
    may start again. That delay is Slurm's, not the feature a test checks, so tests lift it as an admin
    could, once they have seen the requeue (``record``: the job as `job` read it).
    Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_cred_expire"""
    if record.state == "PENDING" and record.reason == "BeginTime":
        print(f"requeued job {job_id} held until {record.start_time}: released with StartTime=now")
        scontrol(s, "update", f"jobid={job_id}", "StartTime=now")


def restore_pod(s: Session, pod: str) -> None:
    """Recreate ``pod`` from the unpatched template (when it is missing or was patched) and wait for it."""
    lifecycle.replace_pod(s.client, s.cluster.name, pod)
    if pod in s.cluster.workers:
        wait_idle(s, pod)
    else:
        wait_ready(s, pod)


def restore_cluster(s: Session, cluster_map: Mapping[str, str],
                    wait_worker: Callable[[Session, str], object] = wait_idle) -> None:
    """Put the cluster ConfigMap's data back to ``cluster_map``, then every pod back to its template: the
    controller (and a reconfigure), then all workers at once, each waited for with ``wait_worker``."""
    lifecycle.set_config_map(s.cluster.name, "cluster", cluster_map)
    restore_pod(s, s.cluster.controller)
    scontrol(s, "reconfigure")
    for worker in s.cluster.workers:
        lifecycle.replace_pod(s.client, s.cluster.name, worker)
    for worker in s.cluster.workers:
        wait_worker(s, worker)


@contextmanager
def spec_edited(s: Session, edit: Callable[[str], str]) -> Iterator[None]:
    """The session's cluster with its ClusterSpec (the cluster ConfigMap's cluster.yaml) passed through
    ``edit``: the controller restarted on it and reconfigured, every worker IDLE; afterwards the
    ConfigMap and every pod back as they were (restore_cluster)."""
    old = lifecycle.set_config_map(s.cluster.name, "cluster", {})
    lifecycle.set_config_map(s.cluster.name, "cluster", {**old, "cluster.yaml": edit(old["cluster.yaml"])})
    try:
        lifecycle.replace_pod(s.client, s.cluster.name, s.cluster.controller)
        wait_ready(s, s.cluster.controller)
        scontrol(s, "reconfigure")
        all_idle(s)
        yield
    finally:
        restore_cluster(s, old)


def wait_ready(s: Session, pod: str, timeout: float = IDLE_TIMEOUT_S) -> float:
    """Seconds until `slurmpod probe ready` passes in ``pod`` (what the readinessProbe runs)."""
    def ready() -> bool | None:
        return True if s.root_in(pod, "slurmpod", "probe", "ready", timeout=20).code == 0 else None
    return wait_for(f"pod {pod} ready", ready, timeout)[1]


def host_memtotal_mib() -> int:
    """The host's MemTotal in MiB (the pods share this host's /proc/meminfo)."""
    for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no MemTotal in /proc/meminfo")


@contextmanager
def own_cluster(docker_client: Any, name: str, flavor: str, workers: int, state_root: Path,
                *up_args: str) -> Iterator[Session]:
    """A cluster of its own (`cluster up` with ``up_args``), state under ``state_root``; down after."""
    from slurmpod_host.cluster import demo

    demo.ensure_images(flavor, sys.stderr)
    env = {**os.environ, host_wk.ENV_STATE_DIR: str(state_root)}
    run_slurmpod(env, "cluster", "down", "--name", name, timeout=120)  # leftovers of an aborted run
    try:
        up = run_slurmpod(env, "cluster", "up", "--name", name, *UP_ARGS, *up_args, "--workers", str(workers),
                          "--flavor", flavor, "--timeout", str(UP_TIMEOUT_S), timeout=UP_TIMEOUT_S + 120)
        if up.returncode != 0:
            pytest.fail(f"cluster up {' '.join(up_args)} failed (exit {up.returncode}):\n{up.stdout}\n{up.stderr}",
                        pytrace=False)
        sys.stderr.write(up.stdout)
        with pytest.MonkeyPatch.context() as mp:
            # cli.attach and lifecycle read the state dir from the env: set while the tests run.
            mp.setenv(host_wk.ENV_STATE_DIR, str(state_root))
            cluster = cli.attach(docker_client, name)
            assert cluster is not None, up.stdout
            yield Session(cluster, docker_client, flavor, env)
    finally:
        down = run_slurmpod(env, "cluster", "down", "--name", name, timeout=120)
        assert down.returncode == 0, down.stderr


@contextmanager
def auth_slurm_cluster(docker_client: Any, name: str, flavor: str, workers: int, state_root: Path) -> Iterator[Session]:
    """A cluster of its own with auth/slurm (`cluster up --auth slurm`), state under ``state_root``; down after."""
    with own_cluster(docker_client, name, flavor, workers, state_root, "--auth", "slurm") as s:
        yield s
