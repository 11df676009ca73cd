"""k8s-sync on the real control plane: Kubernetes and Slurm agree about every node.

A second Node object stands for another machine (no kubelet runs it; nothing is scheduled there). The
session's one real node runs both workers. worker-1 carries an admin's drain for the whole module, and
every test checks that it survives unchanged. Slurm state is read through Docker (kubekit.Kube.direct),
so the checks work while the API server or the kubelet is stopped.
Ref: https://kubernetes.io/docs/concepts/architecture/nodes/#node-status
Ref: https://kubernetes.io/docs/concepts/workloads/pods/disruptions/
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import waiting
from kubekit import (
    K8S_SYNC_INTERVAL_S,
    NAMESPACE,
    NOT_READY_GRACE_S,
    READY_SETTLE_S,
    READY_TIMEOUT_S,
    WORKER_SELECTOR,
    Kube,
    note,
)

from slurmpod import well_known as wk
from slurmpod_host.kube import lifecycle, release
from slurmpod_host.kube.layout import NODE_NAME

OTHER = "slurmpod-k8s-other"  # a Node object standing for a second machine
ADMIN = "slurmpod k8s test: an admin's drain"
WHY = "kernel upgrade"
CORDONED = f"slurmpod: k8s: cordoned: {WHY}"
NOT_READY = "slurmpod: k8s: node not ready"
CORDON_BOUND_S = 10.0  # the acceptance bound: a Node watch event starts a pass at once
# Several passes: what a missed event or a wrong decision would have done by then.
QUIET_S = 4 * K8S_SYNC_INTERVAL_S + 2
# kube-controller-manager marks a silent node Unknown after --node-monitor-grace-period (40 s, checked
# every --node-monitor-period, 5 s); k8s-sync drains after its own grace, within one interval.
# Ref: https://kubernetes.io/docs/reference/command-line-tools-reference/kube-controller-manager/
NODE_MONITOR_GRACE_S = 40.0
NODE_MONITOR_PERIOD_S = 5.0
# The grace runs from the kubelet's last lease renewal, every 10 s (a quarter of the lease's 40 s).
# Ref: https://kubernetes.io/docs/concepts/architecture/nodes/#heartbeats
LEASE_RENEW_S = 10.0
NOT_READY_BOUND_S = NODE_MONITOR_GRACE_S + NODE_MONITOR_PERIOD_S + NOT_READY_GRACE_S + 2 * K8S_SYNC_INTERVAL_S + 15
# Ready again: the restarted kubelet posts its status at once, then the settle period and one pass.
READY_BOUND_S = 30 + READY_SETTLE_S + 2 * K8S_SYNC_INTERVAL_S
API_DOWN_S = 4 * K8S_SYNC_INTERVAL_S + 4
EVICTED_BOUND_S = 5.0
# The check's drain, then a pass that sees the worker drained and idle (measured 12 s on a loaded host).
RESTART_BOUND_S = 30.0  # an eviction the API server admits deletes the pod at once (graceful: preStop runs)
WORKER_GRACE_S = 60.0  # nodesets.workers.terminationGracePeriodSeconds: the kubelet's bound on preStop + stop
JOB_BOUND_S = 60.0


def _sync_log(kube: Kube, lines: int = 25) -> str:
    """k8s-sync's last log lines (the controller's output, read through Docker)."""
    listed = subprocess.run(["docker", "ps", "-q", "--filter", f"label=io.kubernetes.pod.name={kube.controller}",
                             "--filter", "label=io.kubernetes.docker.type=container"],
                            capture_output=True, text=True, timeout=30, check=False).stdout.split()
    if not listed:
        return "(no controller container)"
    out = subprocess.run(["docker", "logs", "--tail", "2000", listed[0]], capture_output=True, text=True,
                         timeout=30, check=False)
    mine = [line for line in (out.stdout + out.stderr).splitlines() if "k8s_sync" in line]
    return "\n".join(mine[-lines:])


def wait_for(what: str, check: Any, timeout: float, poll: float = 0.25) -> Any:
    """waiting.wait_for, with k8s-sync's log in the message when the wait runs out."""
    try:
        return waiting.wait_for(what, check, timeout, poll)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nk8s-sync said:\n{_sync_log(_KUBE[0])}") from None


_KUBE: list[Kube] = []
_API_BACK: list[float] = []  # when the API server last came back (time.monotonic)


def _state(kube: Kube, worker: str) -> tuple[set[str], str]:
    return kube.slurm_node(worker)


def _drained_with(kube: Kube, worker: str, reason: str) -> bool | None:
    flags, now = _state(kube, worker)
    return True if "DRAIN" in flags and now == reason else None


def _in_service(kube: Kube, worker: str) -> bool | None:
    """No DRAIN flag (without accounting, slurmctld 24.11 keeps the old reason text after RESUME)."""
    flags, _ = _state(kube, worker)
    return True if "DRAIN" not in flags and "DOWN" not in flags else None


def _admin_drain_intact(kube: Kube) -> None:
    """worker-1 drained with the admin's reason. While its pod is away past SlurmdTimeout, slurmctld
    itself appends " : Not responding" to a node's reason (set_node_reason, src/slurmctld/node_mgr.c)."""
    flags, reason = _state(kube, kube.workers[1])
    assert "DRAIN" in flags and reason in (ADMIN, f"{ADMIN} : Not responding"), (flags, reason)


def _pod(kube: Kube, name: str) -> dict[str, Any] | None:
    done = kube.kubectl("-n", NAMESPACE, "get", "pod", name, "-o", "json", timeout=30, check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def _label(kube: Kube, name: str) -> str | None:
    pod = _pod(kube, name)
    return None if pod is None else pod["metadata"].get("labels", {}).get(wk.LABEL_SLURM_STATE)


def _counters(kube: Kube) -> dict[str, int]:
    done = kube.direct(kube.controller, "cat", f"{wk.RUN_DIR}/k8s-sync/counters.json")
    assert done.returncode == 0, done.stderr
    counters: dict[str, int] = json.loads(done.stdout)
    return counters


def _events(kube: Kube, name: str, reason: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kube.get("events", f"--field-selector=involvedObject.name={name}")["items"]
    return [e for e in items if e["reason"] == reason]


def _evict(kube: Kube, pod: str) -> Any:
    body = {"apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": {"name": pod, "namespace": NAMESPACE}}
    return kube.kubectl("create", "--raw", f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}/eviction", "-f", "-",
                        stdin=json.dumps(body), timeout=30, check=False)


def _running(kube: Kube, name: str) -> bool | None:
    pod = _pod(kube, name)
    return True if pod is not None and not pod["metadata"].get("deletionTimestamp") and \
        (pod.get("status") or {}).get("phase") == "Running" else None


def _node_ready(kube: Kube) -> bool | None:
    node = json.loads(kube.kubectl("get", "node", NODE_NAME, "-o", "json", timeout=30).stdout)
    ready = [c for c in node["status"].get("conditions") or [] if c["type"] == "Ready"]
    return True if ready and ready[0]["status"] == "True" else None


def _settled(kube: Kube) -> None:
    """The node Ready and worker-0 in Slurm service before a test begins. After an API server outage the
    node controller can still mark the node Unknown once it is back, if it reads the kubelet's lease
    before the kubelet has renewed it; that is over one grace period after the return. k8s-sync drains
    such a blip after its short test grace and lifts it once Ready has settled."""
    if _API_BACK:
        time.sleep(max(0.0, _API_BACK[-1] + NODE_MONITOR_GRACE_S + NODE_MONITOR_PERIOD_S - time.monotonic()))
    wait_for(f"{NODE_NAME} Ready", lambda: _node_ready(kube), NOT_READY_BOUND_S + READY_BOUND_S)
    wait_for(f"{kube.workers[0]} in service", lambda: _in_service(kube, kube.workers[0]),
             NOT_READY_BOUND_S + READY_BOUND_S)


def _workers_back(kube: Kube) -> None:
    """worker-0 Ready and in Slurm service; worker-1 running (a drained worker is never Ready: its
    readiness probe says so, docs/lifecycle.md)."""
    w0, w1 = kube.workers
    started = time.monotonic()
    release.wait_ready(kube.layout, NAMESPACE, 1, READY_TIMEOUT_S, f"statefulset.kubernetes.io/pod-name={w0}")
    wait_for(f"{w1} running", lambda: _running(kube, w1), READY_TIMEOUT_S)
    wait_for(f"{w0} back in Slurm service", lambda: _in_service(kube, w0), 60)
    note(f"{w0} Ready and in service, {w1} running, {time.monotonic() - started:.1f}s after the uncordon")


@pytest.fixture(scope="module")
def agreement(kube: Kube) -> Iterator[Kube]:
    _KUBE[:] = [kube]
    # Created with the Ready condition a machine whose kubelet has gone silent has (a Node's status may be
    # set at creation). kube-controller-manager 1.20 dereferences a Node's Ready condition without checking
    # it (doNoExecuteTaintingPass, pkg/controller/nodelifecycle): a Node with no Ready condition in its
    # informer's cache once it queued the Node for tainting takes the whole process down.
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": OTHER, "labels": {"kubernetes.io/hostname": OTHER}},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                                       "message": "no kubelet runs this node (slurmpod k8s test)",
                                       "lastHeartbeatTime": now, "lastTransitionTime": now}]}}
    kube.kubectl("delete", "node", OTHER, "--ignore-not-found")
    kube.kubectl("create", "-f", "-", stdin=json.dumps(node))
    created = json.loads(kube.kubectl("get", "node", OTHER, "-o", "json").stdout)
    assert [c["type"] for c in created["status"].get("conditions") or []] == ["Ready"], created["status"]
    done = kube.scontrol("update", f"nodename={kube.workers[1]}", "state=drain", f"reason={ADMIN}")
    assert done.returncode == 0, done.stderr
    try:
        yield kube
    finally:
        for name in lifecycle.RESTARTABLE:
            lifecycle.start_one(kube.layout, name)
        kube.kubectl("uncordon", NODE_NAME, check=False)
        kube.kubectl("annotate", "node", NODE_NAME, f"{wk.ANNOTATION_CORDON_REASON}-", check=False)
        kube.kubectl("delete", "node", OTHER, "--wait=false", check=False)
        kube.scontrol("update", f"nodename={kube.workers[1]}", "state=resume")


def test_every_worker_carries_its_slurm_state(agreement: Kube) -> None:
    kube = agreement
    w0, w1 = kube.workers
    wait_for("worker labels idle and drained", lambda: True if (_label(kube, w0), _label(kube, w1)) == (
        "idle", "drained") else None, 3 * K8S_SYNC_INTERVAL_S + 5)
    pod = _pod(kube, w0)
    assert pod is not None
    (cond,) = [c for c in pod["status"]["conditions"] if c["type"] == wk.CONDITION_SLURM_NODE]
    assert (cond["status"], cond["reason"]) == ("True", "Idle")
    job = kube.submit("sleep 30", "-w", w0, "-o", "/dev/null")
    _, waited = wait_for(f"{w0} labelled allocated", lambda: True if _label(kube, w0) == "allocated" else None,
                         30 + 2 * K8S_SYNC_INTERVAL_S)
    note(f"job {job} running: {w0} labelled allocated after {waited:.1f}s")
    kube.exec(kube.controller, "scancel", str(job))
    wait_for(f"{w0} labelled idle again", lambda: True if _label(kube, w0) == "idle" else None,
             30 + 2 * K8S_SYNC_INTERVAL_S)
    _admin_drain_intact(kube)


def test_cordon_drains_that_machines_workers_within_10s_and_uncordon_returns_them(agreement: Kube) -> None:
    kube = agreement
    w0 = kube.workers[0]
    kube.kubectl("cordon", OTHER)
    time.sleep(QUIET_S)
    assert _in_service(kube, w0), "cordoning another machine drained this one's worker"
    kube.kubectl("uncordon", OTHER)
    kube.kubectl("annotate", "node", NODE_NAME, f"{wk.ANNOTATION_CORDON_REASON}={WHY}", "--overwrite")
    started = time.monotonic()
    kube.kubectl("cordon", NODE_NAME)
    _, waited = wait_for(f"{w0} drained by the cordon", lambda: _drained_with(kube, w0, CORDONED), CORDON_BOUND_S)
    note(f"kubectl cordon -> {w0} drained in {time.monotonic() - started:.1f}s")
    assert waited <= CORDON_BOUND_S
    _admin_drain_intact(kube)
    assert _events(kube, w0, "SlurmNodeDrained"), "no Event on the pod"
    started = time.monotonic()
    kube.kubectl("uncordon", NODE_NAME)
    wait_for(f"{w0} returned by the uncordon", lambda: _in_service(kube, w0), CORDON_BOUND_S)
    note(f"kubectl uncordon -> {w0} in service in {time.monotonic() - started:.1f}s")
    _admin_drain_intact(kube)


def test_a_drain_lifted_by_hand_is_put_back_while_the_cordon_lasts(agreement: Kube) -> None:
    kube = agreement
    w0 = kube.workers[0]
    kube.kubectl("cordon", NODE_NAME)
    try:
        wait_for(f"{w0} drained", lambda: _drained_with(kube, w0, CORDONED), CORDON_BOUND_S)
        kube.scontrol("update", f"nodename={w0}", "state=resume")
        wait_for(f"{w0} drained again", lambda: _drained_with(kube, w0, CORDONED), 3 * K8S_SYNC_INTERVAL_S + 5)
    finally:
        kube.kubectl("uncordon", NODE_NAME)
    wait_for(f"{w0} returned", lambda: _in_service(kube, w0), CORDON_BOUND_S)


def test_with_the_api_server_stopped_nothing_is_drained_or_undrained(agreement: Kube) -> None:
    kube = agreement
    w0 = kube.workers[0]
    kube.kubectl("cordon", NODE_NAME)
    wait_for(f"{w0} drained", lambda: _drained_with(kube, w0, CORDONED), CORDON_BOUND_S)
    skipped = _counters(kube)["passes_skipped"]
    lifecycle.stop_one(kube.layout, "kube-apiserver")
    try:
        assert kube.kubectl("get", "nodes", timeout=30, check=False).returncode != 0, "the API server still answers"
        time.sleep(API_DOWN_S)
        assert _drained_with(kube, w0, CORDONED), f"undrained while the API server was stopped\n{_sync_log(kube)}"
        # An admin lifts the drain while nothing can be read: k8s-sync must not put it back blind.
        done = kube.direct(kube.controller, "scontrol", "update", f"nodename={w0}", "state=resume")
        assert done.returncode == 0, done.stderr
        time.sleep(API_DOWN_S)
        assert _in_service(kube, w0), f"drained while the API server was stopped: {_state(kube, w0)}\n{_sync_log(kube)}"
        _admin_drain_intact(kube)
        assert _counters(kube)["passes_skipped"] >= skipped + 2
    finally:
        note(f"kube-apiserver back in {lifecycle.start_one(kube.layout, 'kube-apiserver'):.1f}s")
        _API_BACK.append(time.monotonic())
    # Readable again, the cordon still holds: the drain comes back; uncordoned, it goes. The kubelet's
    # lease lapsed during the outage, so the node controller may still mark the node Unknown once (see
    # _settled): then k8s-sync drains for NotReady and lifts it once Ready has settled, which bounds the
    # return by one grace period and one return to Ready.
    wait_for(f"{w0} drained again", lambda: _drained_with(kube, w0, CORDONED), 30)
    kube.kubectl("uncordon", NODE_NAME)
    wait_for(f"{w0} returned", lambda: _in_service(kube, w0),
             NODE_MONITOR_GRACE_S + NODE_MONITOR_PERIOD_S + READY_BOUND_S)
    _admin_drain_intact(kube)


def test_a_stopped_kubelet_drains_past_the_grace_period_and_ready_returns(agreement: Kube) -> None:
    kube = agreement
    w0 = kube.workers[0]
    _settled(kube)
    lifecycle.stop_one(kube.layout, "kubelet")
    started = time.monotonic()
    try:
        _, waited = wait_for(f"{w0} drained for NotReady", lambda: _drained_with(kube, w0, NOT_READY),
                             NOT_READY_BOUND_S, poll=1.0)
        note(f"kubelet stopped -> {w0} drained ({NOT_READY!r}) after {waited:.1f}s")
        assert time.monotonic() - started >= NODE_MONITOR_GRACE_S - LEASE_RENEW_S, \
            "drained before the node controller's grace period"
        _admin_drain_intact(kube)
    finally:
        note(f"kubelet back in {lifecycle.start_one(kube.layout, 'kubelet'):.1f}s")
    _, waited = wait_for(f"{w0} returned once Ready", lambda: _in_service(kube, w0), READY_BOUND_S, poll=1.0)
    note(f"kubelet started -> {w0} in service after {waited:.1f}s")
    _admin_drain_intact(kube)


def test_a_restart_pod_fault_restarts_the_idle_worker_once(agreement: Kube) -> None:
    """The mounts check's failure asks for a pod restart: its drained, idle worker's pod is deleted, the
    replacement keeps the health drain (re-applied byte for byte) and is not deleted again."""
    kube = agreement
    w0 = kube.workers[0]
    _settled(kube)
    original = kube.exec(w0, "cat", wk.HEALTH_CONFIG)
    assert original.returncode == 0, original.stderr
    doc = json.loads(original.stdout)
    faulty = json.dumps({**doc, "required_mounts": [*doc.get("required_mounts", []), "/datasets"]})
    uid = (_pod(kube, w0) or {})["metadata"]["uid"]
    wrote = kube.exec(w0, "sh", "-c", f"printf '%s\\n' '{faulty}' > {wk.HEALTH_CONFIG}")
    assert wrote.returncode == 0, wrote.stderr
    kube.exec(w0, "slurmpod", "check", "run", "--context", "periodic", "--act", timeout=60)
    reason = "slurmpod: mounts: restart pod: not mounted: /datasets"
    wait_for(f"{w0} drained by the mounts check", lambda: _drained_with(kube, w0, reason), 10)
    try:
        def deleting() -> bool | None:
            meta = (_pod(kube, w0) or {}).get("metadata", {})
            return True if meta.get("uid") != uid or meta.get("deletionTimestamp") else None

        _, waited = wait_for(f"{w0} deleted for a restart", deleting, RESTART_BOUND_S)
        note(f"restart-pod fault -> {w0} deleted after {waited:.1f}s")
        assert _events(kube, w0, "SlurmpodRestartPod")
        # The old pod, deleting, is never _running; it terminates gracefully first (preStop, then the
        # kubelet's grace period at most).
        wait_for(f"{w0}'s replacement running", lambda: _running(kube, w0), WORKER_GRACE_S + READY_TIMEOUT_S)
        new_uid = (_pod(kube, w0) or {})["metadata"]["uid"]
        wait_for(f"{w0}'s health drain kept by the new pod", lambda: _drained_with(kube, w0, reason), 30)
        time.sleep(QUIET_S)
        assert (_pod(kube, w0) or {})["metadata"]["uid"] == new_uid, "restarted twice for one fault"
        assert _counters(kube)["pod_deletions"] == 1
    finally:
        kube.scontrol("update", f"nodename={w0}", "state=resume")
    wait_for(f"{w0} in service", lambda: _in_service(kube, w0), 30)
    _admin_drain_intact(kube)


def test_an_idle_worker_is_evicted_at_once_and_a_busy_one_only_after_its_job(agreement: Kube) -> None:
    kube = agreement
    w0, w1 = kube.workers
    _settled(kube)
    kube.kubectl("annotate", "node", NODE_NAME, f"{wk.ANNOTATION_CORDON_REASON}={WHY}", "--overwrite")
    wait_for(f"{w0} labelled idle", lambda: True if _label(kube, w0) == "idle" else None, 30)
    uid = (_pod(kube, w0) or {})["metadata"]["uid"]
    done = _evict(kube, w0)
    assert done.returncode == 0, done.stderr
    wait_for(f"{w0} deleted", lambda: True if (_pod(kube, w0) or {}).get("metadata", {}).get(
        "deletionTimestamp") or (_pod(kube, w0) or {}).get("metadata", {}).get("uid") != uid else None,
        EVICTED_BOUND_S, poll=0.2)
    _workers_back(kube)
    job = kube.submit("sleep 600", "-w", w0, "-o", "/dev/null")
    wait_for(f"{w0} labelled allocated", lambda: True if _label(kube, w0) == "allocated" else None, 60)
    busy_uid = (_pod(kube, w0) or {})["metadata"]["uid"]
    drained_uid = (_pod(kube, w1) or {})["metadata"]["uid"]
    refused = _evict(kube, w0)
    assert refused.returncode != 0 and "disruption budget" in refused.stderr, refused.stderr
    try:
        drain = kube.kubectl("drain", NODE_NAME, f"--pod-selector={WORKER_SELECTOR}", "--delete-emptydir-data",
                             "--timeout=20s", timeout=60, check=False)
        assert drain.returncode != 0 and "disruption budget" in drain.stderr, drain.stderr
        assert (_pod(kube, w0) or {})["metadata"]["uid"] == busy_uid
        assert kube.job(job)["job_state"] == ["RUNNING"]
        flags, reason = _state(kube, w0)
        assert "DRAIN" in flags and reason == CORDONED, (flags, reason)  # DRAINING: no new jobs (the why from above)
        # The admin-drained worker is not busy: no budget covered it, and the drain evicted it.
        after = _pod(kube, w1)
        assert after is None or after["metadata"]["uid"] != drained_uid or after["metadata"].get("deletionTimestamp")
        kube.exec(kube.controller, "scancel", str(job))
        started = time.monotonic()
        drain = kube.kubectl("drain", NODE_NAME, f"--pod-selector={WORKER_SELECTOR}", "--delete-emptydir-data",
                             f"--timeout={int(JOB_BOUND_S)}s", timeout=JOB_BOUND_S + 30, check=False)
        assert drain.returncode == 0, drain.stderr
        note(f"job ended -> kubectl drain through in {time.monotonic() - started:.1f}s")
    finally:
        kube.kubectl("uncordon", NODE_NAME)
    _workers_back(kube)
    _admin_drain_intact(kube)
