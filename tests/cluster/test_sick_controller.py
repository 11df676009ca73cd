"""The pod runtime survives a sick controller, a stopped supervisord and a read-only /home, for real.

Each test leaves the session cluster as it found it: slurmctld running, every worker IDLE.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from clusterkit import Session, all_idle, node, restore_pod, scontrol, wait_for, wait_idle

from slurmpod import reasons
from slurmpod import well_known as wk
from slurmpod_host.cluster import lifecycle, runtime
from slurmpod_host.cluster.lifecycle import PodPatch

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

SUPERVISORCTL = (wk.SUPERVISORCTL, "-c", f"{wk.RUN_DIR}/{wk.SUPERVISORD_CONF}")
# An admin's reason slurmpod must never change: 300 characters, with quotes at both ends and inside.
ADMIN_REASON = '"admin: ' + "cable check 'rack 7' " * 14 + 'done later"'
PRESTOP_GRACE_S = 20
# How long the controller stays down while a worker pod starts (the figure; shorter only when
# debugging by hand).
CONTROLLER_DOWN_S = int(os.environ.get("SLURMPOD_TEST_CONTROLLER_DOWN_S", "360"))


def _supervisorctl(s: Session, pod: str, *args: str) -> runtime.ExecResult:
    return s.root_in(pod, *SUPERVISORCTL, *args, timeout=60)


@contextmanager
def slurmctld_stopped(s: Session) -> Iterator[None]:
    ctl = s.cluster.controller
    assert _supervisorctl(s, ctl, "stop", "slurmctld").code == 0
    try:
        yield
    finally:
        assert _supervisorctl(s, ctl, "start", "slurmctld").code == 0
        wait_for("slurmctld answers", lambda: True if s.root_in(ctl, "scontrol", "ping").code == 0 else None, 120)


def _reason(s: Session, name: str) -> str:
    n = node(s, name)
    assert n is not None, f"node {name} has no record"
    return n.reason


def test_prestop_with_slurmctld_stopped_ends_in_time_and_changes_nothing(session: Session) -> None:
    """No answer is not "no node": preStop drains nothing, overwrites no reason, deletes no node."""
    ours, admins = session.cluster.workers
    all_idle(session)
    # Whatever reason text an earlier test left on our node (slurmctld 24.11.5 keeps it after RESUME)
    # must be exactly what is there afterwards.
    ours_before = _reason(session, ours)
    scontrol(session, "update", f"NodeName={admins}", "State=DRAIN", f'Reason="{ADMIN_REASON}"')
    try:
        assert _reason(session, admins) == ADMIN_REASON
        with slurmctld_stopped(session):
            started = time.monotonic()
            results = {pod: session.root_in(pod, "env", f"{wk.ENV_GRACE_SECONDS}={PRESTOP_GRACE_S}",
                                            "slurmpod", "prestop", timeout=PRESTOP_GRACE_S + 30)
                       for pod in (ours, admins)}
            took = time.monotonic() - started
        for pod, result in results.items():
            # it gave up at its deadline (the exec's own timeout would say 124) and said so
            assert result.code == 1, (pod, result.code, result.stdout, result.stderr)
            assert "gave up at the deadline" in result.stdout + result.stderr, (pod, result.stderr)
        print(f"two preStop hooks against a stopped slurmctld took {took:.1f}s (grace {PRESTOP_GRACE_S}s each)")
        for pod in (ours, admins):  # the hook's report is in the pod's own log, where an operator looks
            pod_log = session.client.api.logs(pod, stdout=True, stderr=True, tail=400).decode(errors="replace")
            reports = [line for line in pod_log.splitlines() if "prestop done" in line]
            assert reports and "gave up at the deadline" in reports[-1], (pod, pod_log[-2000:])
        # Every record and every reason as it was: ours not drained by us, the admin's byte for byte.
        after = node(session, ours)
        assert after is not None and not after.drained, after
        assert _reason(session, ours) == ours_before
        assert _reason(session, admins) == ADMIN_REASON
    finally:
        for pod in (ours, admins):
            _supervisorctl(session, pod, "start", "slurmd")
        scontrol(session, "update", f"NodeName={admins}", "State=RESUME")
        all_idle(session)


def test_worker_started_while_the_controller_is_down_for_six_minutes_registers(session: Session) -> None:
    """reconcile-node waits as long as it takes, then lifts the stale drain its predecessor left."""
    pod = session.cluster.workers[-1]
    all_idle(session)
    # The predecessor drained itself (preStop) and was killed before it could delete its node.
    scontrol(session, "update", f"NodeName={pod}", "State=DRAIN", f"Reason={reasons.POD_TERMINATING}")
    try:
        with slurmctld_stopped(session):
            lifecycle.delete_pod(session.client, session.cluster.name, pod, run_prestop=False, grace_s=0)
            lifecycle.start_pod(session.client, session.cluster.name,
                                lifecycle.plan_pod(session.client, session.cluster.name, "worker",
                                                   session.cluster.workers.index(pod)))
            time.sleep(CONTROLLER_DOWN_S)
            # Still waiting, not given up: supervisord keeps reconcile-node running.
            state = _supervisorctl(session, pod, "status", "reconcile-node").stdout
            assert "RUNNING" in state, state
        # Back: slurmd registers, reconcile-node lifts our stale drain. Bound: its longest backoff
        # (10 s) and supervisord's restart backoff of slurmd (1 s more per failed start, ~1 s x 36 tries).
        seconds = wait_idle(session, pod, timeout=180)
        # ... and reconcile-node lifted its predecessor's drain. (slurmctld 24.11.5 keeps the reason text
        # of a re-registered dynamic node after RESUME, without the DRAIN flag: IDLE and usable, which is
        # what wait_idle checks; `sinfo -R` does not list it.) Bound: reconcile-node's delay and backoff.
        def lifted() -> bool | None:
            n = node(session, pod)
            logged = "cleared stale drain" in runtime.logs_tail(session.client, pod, 200)
            return True if n is not None and not n.drained and logged else None

        _, after = wait_for(f"{pod} stale drain lifted", lifted, 60)
        print(f"{pod} IDLE {seconds:.1f}s after slurmctld came back, its stale drain lifted {after:.1f}s later")
    finally:
        restore_pod(session, pod)


def test_liveness_fails_while_supervisord_is_stopped(session: Session) -> None:
    """`probe live` needs supervisord to answer: a stopped PID 1 fails liveness, so kubelet restarts it."""
    pod = session.cluster.workers[0]
    pid = session.client.api.inspect_container(pod)["State"]["Pid"]  # PID 1 of the pod, seen from the host
    assert session.root_in(pod, "slurmpod", "probe", "live", timeout=30).code == 0
    os.kill(pid, signal.SIGSTOP)
    try:
        stopped = session.root_in(pod, "slurmpod", "probe", "live", "--timeout", "3", timeout=30)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert stopped.code == 1, stopped.stdout
    assert "supervisor" in stopped.stderr, stopped.stderr
    assert session.root_in(pod, "slurmpod", "probe", "live", timeout=30).code == 0


def test_read_only_home_does_not_stop_a_pod(session: Session) -> None:
    """A pod whose /home refuses writes (read-only, or root-squashed NFS) starts, with a warning."""
    pod, login = session.cluster.workers[-1], session.cluster.login
    home, aside = f"/home/{wk.DEMO_USER}", f"/home/.{wk.DEMO_USER}-aside"
    # The researcher's home is missing from the shared volume, and this pod mounts it read-only
    # (`readOnly: true` on its volumeMount), so the entrypoint cannot make it.
    assert session.root_in(login, "mv", home, aside).code == 0
    try:
        lifecycle.replace_pod(session.client, session.cluster.name, pod, PodPatch(read_only_mounts=("/home",)))
        wait_idle(session, pod)
        logs = runtime.logs_tail(session.client, pod, 200)
        assert "home directory not made" in logs, logs
        assert session.root_in(pod, "touch", "/home/x").code != 0  # it really was read-only
    finally:
        assert session.root_in(login, "mv", aside, home).code == 0
        restore_pod(session, pod)
