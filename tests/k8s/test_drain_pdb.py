"""`kubectl drain` of the node respects the workers' PodDisruptionBudget (maxUnavailable 1): the eviction
API lets one worker go and refuses the other while the first is not back (the node is cordoned, so it
cannot come back), and the drain times out with the second worker still running. Uncordoned, the evicted
worker's replacement registers and every worker is Ready again.
Ref: https://kubernetes.io/docs/tasks/administer-cluster/safely-drain-node/
"""

from __future__ import annotations

from kubekit import NAMESPACE, READY_TIMEOUT_S, WORKER_SELECTOR, WORKERS, Kube, note
from waiting import wait_for

from slurmpod_host.kube import release
from slurmpod_host.kube.layout import NODE_NAME

DRAIN_TIMEOUT_S = 30  # one eviction (preStop, measured 9-18 s) and several 5 s retries of the refused one


def _workers(kube: Kube) -> dict[str, str]:
    """Worker pod name -> uid, of the pods not being deleted."""
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in release.pods(kube.layout, NAMESPACE, WORKER_SELECTOR)
            if not p["metadata"].get("deletionTimestamp")}


def test_kubectl_drain_respects_the_workers_pdb(kube: Kube) -> None:
    pdb = kube.get("pdb")["items"]
    assert [p["spec"]["maxUnavailable"] for p in pdb] == [1]
    assert pdb[0]["status"]["disruptionsAllowed"] == 1, pdb[0]["status"]
    before = _workers(kube)
    try:
        done = kube.kubectl("drain", NODE_NAME, f"--pod-selector={WORKER_SELECTOR}", "--delete-emptydir-data",
                            f"--timeout={DRAIN_TIMEOUT_S}s", timeout=DRAIN_TIMEOUT_S + 30, check=False)
        note(f"kubectl drain: exit {done.returncode}")
        assert done.returncode != 0, done.stdout
        assert "disruption budget" in done.stderr, done.stderr
        after = _workers(kube)
        survivors = [n for n, uid in after.items() if before.get(n) == uid]
        assert len(survivors) == WORKERS - 1, (before, after)  # exactly one evicted, the other kept
    finally:
        kube.kubectl("uncordon", NODE_NAME)
    waited = release.wait_ready(kube.layout, NAMESPACE, WORKERS, READY_TIMEOUT_S, WORKER_SELECTOR)
    note(f"uncordoned: both workers Ready after {waited:.1f}s")
    for worker in kube.workers:
        wait_for(f"{worker} IDLE", lambda w=worker: True if "IDLE" in kube.node_state(w) and
                 "DRAIN" not in kube.node_state(w) else None, 30)
