"""The session's cluster with jobs in cgroups: GPU isolation and ssh adoption tests.

The cluster spec gets `cgroups: true` (proctrack/cgroup, task/cgroup with ConstrainDevices, PrologFlags
with Contain) and every worker pod what the chart's `nodesets.<name>.cgroup.access: hostV1` gives it:
SYS_ADMIN, SYS_NICE and this host's /sys/fs/cgroup read-write (cgroup v1 here, ENVIRONMENT.md). Everything is put
back afterwards: the original ConfigMap, controller and workers.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import yaml
from clusterkit import Session, job, restore_cluster, wait_for, wait_idle, wait_ready

from slurmpod import well_known as wk
from slurmpod_host.cluster import lifecycle, runtime
from slurmpod_host.cluster.jobs import JobRecord

# What values `cgroup.access: hostV1` (with `cgroup.acceptNodeRootEquivalent: true`, which the chart requires
# for it) renders for a worker (deploy/helm/slurmpod/templates/worker.yaml). allowPrivilegeEscalation stays
# false there, as in the shipped manifests the patch starts from.
HOST_V1 = lifecycle.PodPatch(cap_add=("SYS_ADMIN", "SYS_NICE"), host_paths={"/sys/fs/cgroup": "/sys/fs/cgroup"})
JOB_RUNNING_WORST_S = 90.0  # a prolog (20 s deadline) and a scheduling pass, with room on a loaded host
# scancel to the job's end: KillWait (30 s) before SIGKILL, the epilog (PrologEpilogTimeout, 60 s), room.
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_KillWait
JOB_DONE_WORST_S = 120.0
SSH = ("ssh", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
       "-o", "ConnectTimeout=10")


def with_host_v1(patch: lifecycle.PodPatch) -> lifecycle.PodPatch:
    """``patch`` plus the hostV1 cgroup access."""
    return dataclasses.replace(patch, cap_add=(*HOST_V1.cap_add, *patch.cap_add),
                               host_paths={**(HOST_V1.host_paths or {}), **(patch.host_paths or {})})


@contextmanager
def cgroup_cluster(session: Session, patches: Mapping[str, lifecycle.PodPatch] | None = None) -> Iterator[None]:
    """The session's cluster with `cgroups: true`; each worker gets HOST_V1, or ``patches[worker]``."""
    name, controller = session.cluster.name, session.cluster.controller
    old = lifecycle.set_config_map(name, "cluster", {})
    spec = yaml.safe_load(old["cluster.yaml"])
    assert "cgroups" not in spec, spec  # the shipped ConfigMap leaves it at its default, false
    lifecycle.set_config_map(name, "cluster", {**old, "cluster.yaml": yaml.safe_dump({**spec, "cgroups": True})})
    try:
        try:
            lifecycle.replace_pod(session.client, name, controller)
            wait_ready(session, controller)
            for worker in session.cluster.workers:
                lifecycle.replace_pod(session.client, name, worker, (patches or {}).get(worker, HOST_V1))
            for worker in session.cluster.workers:
                wait_idle(session, worker)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{pod_logs(session)}") from None
        yield
    finally:
        restore_cluster(session, old, idle)


def pod_logs(s: Session, lines: int = 60) -> str:
    """The last ``lines`` of every pod's output, for a failure's message."""
    pods = (s.cluster.controller, *s.cluster.workers)
    return "\n".join(f"--- {p}\n{runtime.logs_tail(s.client, p, lines)}" for p in pods)


def wait_running(s: Session, job_id: int, worker: str) -> JobRecord:
    def running() -> JobRecord | None:
        record = job(s, job_id)
        assert record.state in {"PENDING", "CONFIGURING", "RUNNING"}, f"{record}\n{explain(s, worker)}"
        return record if record.state == "RUNNING" else None
    try:
        return wait_for(f"job {job_id} RUNNING", running, JOB_RUNNING_WORST_S)[0]
    except AssertionError as exc:
        if "RUNNING: not after" in str(exc):
            raise AssertionError(f"{exc}\n{explain(s, worker)}") from None
        raise


def sbatch(s: Session, *args: str) -> int:
    result = s.as_researcher("sbatch", "--parsable", *args)
    assert result.code == 0, result.stderr
    return int(result.stdout.strip().split(";")[0])


def cancel(s: Session, worker: str, *job_ids: int) -> None:
    """Cancel the jobs and wait until ``worker`` is IDLE again: a pod replaced while its node still
    completes a batch job is drained by slurmctld ("batch job complete failure")."""
    s.root_in(s.cluster.controller, "scancel", *(str(j) for j in job_ids), timeout=30)
    ids = ",".join(str(j) for j in job_ids)

    def done() -> bool | None:
        # A cancelled job stays COMPLETING (CG) while slurmd kills its tasks and runs the epilog; its node
        # reads IDLE+COMPLETING meanwhile, so IDLE alone is not enough before a pod is replaced.
        states = s.root_in(s.cluster.controller, "squeue", "-h", "-t", "all", "-j", ids, "-o", "%t", timeout=30)
        return True if states.code == 0 and "CG" not in states.stdout.split() else None
    wait_for(f"jobs {ids} to finish completing", done, JOB_DONE_WORST_S)
    idle(s, worker)


def idle(s: Session, worker: str) -> None:
    """wait_idle, saying on failure what went wrong (explain)."""
    try:
        wait_idle(s, worker)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{explain(s, worker)}") from None


def explain(s: Session, worker: str) -> str:
    """What slurmctld shows of ``worker`` and of every job it holds, the pod's last lines and the
    controller's errors and job lines: for a failure."""
    shown = s.root_in(s.cluster.controller, "scontrol", "show", "node", worker, timeout=30).stdout
    queue = s.root_in(s.cluster.controller, "squeue", "-h", "-t", "all", "-o", "%i|%T|%j|%N|%r|%V|%S",
                      timeout=30).stdout
    ctl = runtime.logs_tail(s.client, s.cluster.controller, "all").splitlines()
    errors = [x for x in ctl if "error" in x or "JobId=" in x]
    return "\n".join([shown, "--- jobs (id|state|name|nodes|reason|submitted|started)", queue,
                      f"--- {worker}", runtime.logs_tail(s.client, worker, 80),
                      "--- controller errors and job lines", *errors[-40:]])


def home(*parts: str) -> str:
    return "/".join((f"/home/{wk.DEMO_USER}", *parts))


def write_as_researcher(s: Session, path: str, text: str) -> None:
    result = s.as_researcher("sh", "-c", f"printf '%s' {shlex.quote(text)} > {shlex.quote(path)}")
    assert result.code == 0, result.stderr


def cgroup_paths(proc_self_cgroup: str) -> list[str]:
    """The paths of /proc/self/cgroup lines (``ID:CONTROLLERS:PATH``)."""
    return [m.group(1) for m in re.finditer(r"^\d+:[^:]*:(\S+)$", proc_self_cgroup, re.MULTILINE)]
