"""The kubelet runs the chart's readiness probe on its own schedule: a worker whose Slurm node is drained
goes NotReady within periodSeconds x failureThreshold (+ one probe's timeout), and Ready again once the
node is resumed."""

from __future__ import annotations

from kubekit import NOT_READY_BOUND_S, PROBE_PERIOD_S, PROBE_TIMEOUT_S, Kube, note
from waiting import wait_for


def test_a_drained_worker_goes_not_ready_within_the_probe_bound(kube: Kube) -> None:
    worker = kube.workers[1]
    assert kube.pod_ready(worker)
    done = kube.scontrol("update", f"nodename={worker}", "state=drain", "reason=k8s-suite: probe test")
    assert done.returncode == 0, done.stderr
    try:
        _, waited = wait_for(f"{worker} NotReady", lambda: True if kube.pod_ready(worker) is False else None,
                             NOT_READY_BOUND_S)
        note(f"drained -> NotReady in {waited:.1f}s (bound {NOT_READY_BOUND_S}s)")
    finally:
        done = kube.scontrol("update", f"nodename={worker}", "state=resume")
        assert done.returncode == 0, done.stderr
    # One success marks it Ready again: at most one period and one probe later.
    _, waited = wait_for(f"{worker} Ready again", lambda: True if kube.pod_ready(worker) else None,
                         PROBE_PERIOD_S + PROBE_TIMEOUT_S + 5)
    note(f"resumed -> Ready in {waited:.1f}s")
