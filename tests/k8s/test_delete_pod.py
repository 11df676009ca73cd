"""`kubectl delete pod` of a worker under a running batch job: the kubelet runs the real preStop hook,
which drains the node and requeues the job inside the grace period, so the container exits by itself;
the job completes on the other worker, and the replacement pod the StatefulSet controller makes
registers IDLE."""

from __future__ import annotations

import time
from typing import Any

from kubekit import KUBELET_REMOVAL_S, READY_TIMEOUT_S, Kube, delete_and_watch, note
from waiting import wait_for

GRACE_S = 60  # nodesets.workers.terminationGracePeriodSeconds: the kubelet's bound on preStop + stop
RERUN_S = 60.0  # the requeued job starts on the other worker (preStop lifts Slurm's hold), sleeps 2 s, ends
# Runs 300 s the first time and 2 s once requeued (SLURM_RESTART_COUNT >= 1); each run appends a line.
# Ref: https://slurm.schedmd.com/sbatch.html#OPT_SLURM_RESTART_COUNT
SCRIPT = """run=${SLURM_RESTART_COUNT:-0}
echo "start run=$run host=$(hostname)"
if [ "$run" -eq 0 ]; then sleep 300; else sleep 2; fi
echo "done run=$run host=$(hostname)"
"""


def _drain(kube: Kube, node: str, reason: str) -> None:
    done = kube.scontrol("update", f"nodename={node}", "state=drain", f"reason={reason}")
    assert done.returncode == 0, done.stderr


def _resume(kube: Kube, node: str) -> None:
    done = kube.scontrol("update", f"nodename={node}", "state=resume")
    assert done.returncode == 0, done.stderr


def idle(kube: Kube, node: str) -> bool | None:
    state = kube.node_state(node)
    return True if "IDLE" in state and not state & {"DRAIN", "DOWN", "NOT_RESPONDING"} else None


def test_delete_pod_under_a_job_requeues_it_to_the_other_worker(kube: Kube, docker_client: Any) -> None:
    victim, other = kube.workers
    # Pinned to the victim by draining the other worker while it starts (-w would pin the rerun too).
    _drain(kube, other, "k8s-suite: pin job")
    try:
        job = kube.submit(SCRIPT, "--requeue", "--open-mode=append", "-o", "requeue-%j.out")
        wait_for(f"job {job} running", lambda: True if kube.job(job)["job_state"] == ["RUNNING"] else None, 60)
        assert kube.job(job)["nodes"] == victim
    finally:
        _resume(kube, other)
    wait_for(f"{other} IDLE", lambda: idle(kube, other), 30)
    wait_for("job output started", lambda: True if kube.as_researcher(
        f"grep -q 'start run=0' requeue-{job}.out").returncode == 0 else None, 30)

    started = time.monotonic()
    end = delete_and_watch(kube, docker_client, victim, GRACE_S)
    note(f"kubectl delete pod {victim} (grace {GRACE_S}s): {end.describe()}")
    # preStop and the daemons' stop ended inside the grace period: the container exited by itself (a
    # SIGKILL at the period's end would read 137), and the kubelet had no hook failure to report.
    assert end.died_s is not None and end.died_s < GRACE_S and end.exit_code == 0, end.describe()
    assert not [e for e in end.events if e.startswith("FailedPreStopHook")], end.describe()
    assert end.removed_s is not None and end.removed_s < end.died_s + KUBELET_REMOVAL_S, end.describe()

    def finished() -> dict[str, object] | None:
        j = kube.job(job)
        return j if j["job_state"] == ["COMPLETED"] or "FAILED" in j["job_state"] else None
    final, _ = wait_for(f"job {job} completed", finished, RERUN_S)
    note(f"requeued job {job} completed {time.monotonic() - started:.1f}s after the delete began")
    assert final["job_state"] == ["COMPLETED"] and final["restart_cnt"] == 1, final
    lines = kube.as_researcher(f"cat requeue-{job}.out && rm -f requeue-{job}.out").stdout.splitlines()
    assert lines[0] == f"start run=0 host={victim}", lines
    assert lines[-1] == f"done run=1 host={other}", lines
    assert f"done run=0 host={victim}" not in lines

    # The replacement: same name, a new pod object, Ready through its probe and an IDLE Slurm node.
    _, ready_s = wait_for(f"replacement {victim} Ready", lambda: True if kube.pod_ready(victim) else None,
                          READY_TIMEOUT_S)
    _, idle_s = wait_for(f"{victim} IDLE", lambda: idle(kube, victim), 30)
    note(f"replacement {victim} Ready {ready_s:.1f}s after the job ended, IDLE {idle_s:.1f}s later")
