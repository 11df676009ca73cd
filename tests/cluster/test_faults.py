"""Faults, for real: daemons killed in a pod, the controller pod restarted, a worker deleted mid-job.

No admin action in between: recovery is supervisord's, slurmctld's (StateSaveLocation on a PVC) and the
preStop hook's. Each test leaves the session cluster with its workers IDLE and its pods as it found them.
"""

from __future__ import annotations

import shlex
import time

import pytest
from clusterkit import (
    Session,
    all_idle,
    all_jobs,
    job,
    node_json,
    out_dir,
    restore_pod,
    sbatch,
    scontrol,
    wait_for,
    wait_idle,
    wait_ready,
)

from slurmpod import well_known as wk
from slurmpod_host.cluster import lifecycle, runtime
from slurmpod_host.cluster.jobs import JobRecord

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

RECOVERY_S = 10.0  # the issue: a killed daemon is back, the node IDLE, within 10 s
PRESTOP_S = 5.0  # the issue: drain + requeue in the preStop hook within 5 s
JOB_TIMEOUT_S = 180.0
RERUN_S = 60.0  # requeued job: start on the other worker, sleep 2 s, end (Slurm alone would wait 120 s)


def _out_dir(s: Session, name: str) -> str:
    return out_dir(s, "sptest-faults", name)


def _pids(s: Session, pod: str, daemon: str) -> set[str]:
    return set(s.root_in(pod, "pgrep", "-x", daemon).stdout.split())


def _recovered(s: Session, pod: str, daemon: str, old_pids: set[str], registered: object) -> bool | None:
    """The daemon runs again (a new process) and does its job; the node is IDLE."""
    pids = _pids(s, pod, daemon)
    if not pids or pids & old_pids:
        return None
    if daemon == "slurmd":  # re-registered with slurmctld, and the node usable
        raw = node_json(s, pod)
        ok = raw["slurmd_start_time"] != registered and "IDLE" in raw["state"] and len(raw["state"]) <= 2
    elif daemon == "munged":  # credentials encode and decode again
        ok = s.root_in(pod, "sh", "-c", "munge -n | unmunge >/dev/null").code == 0
    else:  # sshd greets on port 22, seen from the login pod
        probe = f"exec 3<>/dev/tcp/{pod}/22 && head -c 4 <&3"
        ok = s.root_in(s.cluster.login, "timeout", "2", "bash", "-c", probe).stdout == "SSH-"
    if ok:
        raw = node_json(s, pod)
        ok = "IDLE" in raw["state"] and not set(raw["state"]) - {"IDLE", "DYNAMIC_NORM"}
    return True if ok else None


@pytest.mark.parametrize("daemon", ["slurmd", "munged", "sshd"])
def test_killed_daemon_is_restarted_and_node_idle_within_10s(session: Session, daemon: str) -> None:
    pod = session.cluster.workers[0]
    wait_idle(session, pod)
    old = _pids(session, pod, daemon)
    assert old, f"{daemon} not running in {pod}"
    registered = node_json(session, pod)["slurmd_start_time"]
    killed = session.root_in(pod, "pkill", "-9", "-x", daemon)
    assert killed.code == 0, killed.stderr
    _, seconds = wait_for(f"{daemon} back in {pod}", lambda: _recovered(session, pod, daemon, old, registered),
                          RECOVERY_S + 20)
    print(f"{daemon}: kill -9 -> back and node IDLE in {seconds:.1f}s")
    assert seconds <= RECOVERY_S
    wait_idle(session, pod)


def _wait_done(s: Session, jobs: list[int], timeout: float = JOB_TIMEOUT_S) -> dict[int, JobRecord]:
    final = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL"}

    def done() -> dict[int, JobRecord] | None:
        known = all_jobs(s)
        states = {j: known[j] for j in jobs if j in known}
        return states if len(states) == len(jobs) and all(st.state in final for st in states.values()) else None

    return wait_for(f"jobs {jobs} done", done, timeout, poll=1.0)[0]


def test_held_and_pending_jobs_survive_a_controller_pod_restart(session: Session) -> None:
    out = _out_dir(session, "controller-restart")
    held = sbatch(session, "--hold", "-o", f"{out}/%j.out", "--wrap", "hostname")
    pending = sbatch(session, f"--dependency=afterok:{held}", "-o", f"{out}/%j.out", "--wrap", "hostname")
    assert job(session, held).reason == "JobHeldUser"
    assert (job(session, pending).state, job(session, pending).reason) == ("PENDING", "Dependency")

    # `kubectl delete pod`: the StatefulSet makes a new controller pod; StateSaveLocation is its PVC.
    started = time.monotonic()
    lifecycle.replace_pod(session.client, session.cluster.name, session.cluster.controller)
    wait_ready(session, session.cluster.controller)
    all_idle(session)
    print(f"controller pod replaced, workers IDLE again after {time.monotonic() - started:.1f}s")

    assert (job(session, held).state, job(session, held).reason) == ("PENDING", "JobHeldUser")
    assert (job(session, pending).state, job(session, pending).reason) == ("PENDING", "Dependency")
    release = session.as_researcher("scontrol", "release", str(held))
    assert release.code == 0, release.stderr
    states = _wait_done(session, [held, pending])
    assert {j: st.state for j, st in states.items()} == {held: "COMPLETED", pending: "COMPLETED"}
    for job_id in (held, pending):
        host = session.as_researcher("cat", f"{out}/{job_id}.out").stdout.strip()
        assert host in session.cluster.workers


# Runs 120 s the first time and 2 s once requeued (SLURM_RESTART_COUNT >= 1), so the test shows the
# requeue without waiting two minutes; each run appends a line, the last one ends with `hostname`.
# Ref: https://slurm.schedmd.com/sbatch.html#OPT_SLURM_RESTART_COUNT
REQUEUE_SCRIPT = """#!/bin/bash
run=${SLURM_RESTART_COUNT:-0}
echo "start run=$run host=$(hostname)"
if [ "$run" -eq 0 ]; then sleep 120; else sleep 2; fi
echo "done run=$run host=$(hostname)"
"""


def test_prestop_requeues_a_running_job_which_completes_on_another_worker(session: Session) -> None:
    victim, other = session.cluster.workers[0], session.cluster.workers[1]
    out = _out_dir(session, "prestop")
    script = f"{out}/job.sh"
    write = session.as_researcher("sh", "-c", f"printf %s {shlex.quote(REQUEUE_SCRIPT)} > {script}")
    assert write.code == 0, write.stderr
    # Pinned to the victim by draining the other worker while the job starts: `-w victim` would pin
    # the requeued job to the victim too (a required node list survives a requeue).
    scontrol(session, "update", f"NodeName={other}", "State=DRAIN", "Reason=sptest pin job")
    try:
        job_id = sbatch(session, "--requeue", "--open-mode=append", "-o", f"{out}/%j.out", script)
        running, _ = wait_for(f"job {job_id} running on {victim}",
                              lambda: (st if (st := job(session, job_id)).state == "RUNNING" else None), 60)
        assert running.nodes == victim
    finally:
        scontrol(session, "update", f"NodeName={other}", "State=RESUME")
    wait_idle(session, other)
    wait_for("job output started", lambda: True if session.as_researcher(
        "grep", "-q", "start run=0", f"{out}/{job_id}.out").code == 0 else None, 30)

    try:
        started = time.monotonic()
        hook_s = lifecycle.delete_pod(session.client, session.cluster.name, victim)
        print(f"preStop (drain + requeue + stop slurmd + delete node) took {hook_s:.2f}s, "
              f"the whole pod deletion {time.monotonic() - started:.1f}s")
        assert 0 < hook_s <= PRESTOP_S
        # The hook also lifted Slurm's two-minute hold on requeued jobs: the rerun starts at once.
        states = _wait_done(session, [job_id], timeout=RERUN_S)
        print(f"requeued job {job_id} completed on {other} {time.monotonic() - started:.1f}s after the delete began")
        assert states[job_id].state == "COMPLETED", states[job_id]
        assert states[job_id].restarts == 1
        lines = session.as_researcher("cat", f"{out}/{job_id}.out").stdout.splitlines()
        assert lines[0] == f"start run=0 host={victim}", lines
        assert lines[-1] == f"done run=1 host={other}", lines
        assert f"done run=0 host={victim}" not in lines
    finally:
        if victim not in {c.name for c in runtime.find(session.client, session.cluster.name).containers}:
            restore_pod(session, victim)
    all_idle(session)


def test_fifty_jobs_around_a_controller_restart_all_complete(session: Session) -> None:
    out = _out_dir(session, "fifty")
    wrap = 'echo "$SLURM_JOB_ID $(hostname)"'
    submit = (f"for i in $(seq 25); do sbatch --parsable -o {out}/%j.out --wrap {shlex.quote(wrap)} || exit 1; "
              "done")
    before = session.as_researcher("bash", "-c", submit, timeout=120)
    assert before.code == 0, before.stderr
    # The controller's container restarts in place (a crash or OOM kill: restartPolicy Always).
    session.client.containers.get(session.cluster.controller).restart(timeout=30)
    wait_ready(session, session.cluster.controller)
    after = session.as_researcher("bash", "-c", submit, timeout=120)
    assert after.code == 0, after.stderr
    jobs = [int(j) for j in (before.stdout + after.stdout).split()]
    assert len(set(jobs)) == 50
    states = _wait_done(session, jobs, timeout=300)
    assert {st.state for st in states.values()} == {"COMPLETED"}
    listing = session.as_researcher("sh", "-c", f"cat {out}/*.out").stdout.splitlines()
    got = {int(line.split()[0]): line.split()[1] for line in listing}
    assert set(got) == set(jobs)
    assert set(got.values()) <= set(session.cluster.workers)
    all_idle(session)


def test_sigterm_stops_every_daemon_within_the_grace_period(session: Session) -> None:
    """kubelet's SIGTERM to PID 1: supervisord stops its programs and exits 0, long before SIGKILL."""
    pod = session.cluster.workers[-1]
    grace = int(session.root_in(pod, "sh", "-c", f"echo ${wk.ENV_GRACE_SECONDS}").stdout.strip())
    try:
        started = time.monotonic()
        session.client.api.stop(pod, timeout=grace)  # SIGTERM, SIGKILL only after `grace` seconds
        took = time.monotonic() - started
        state = session.client.api.inspect_container(pod)["State"]
        assert state["ExitCode"] == 0, state  # 137 would mean SIGKILL at the end of the grace period
        assert took < grace / 2, f"stopped in {took:.1f}s of a {grace}s grace period"
        logs = runtime.logs_tail(session.client, pod, 80)
        for program in ("slurmd", "munged", "sshd"):
            assert f"stopped: {program}" in logs, logs
    finally:
        restore_pod(session, pod)
