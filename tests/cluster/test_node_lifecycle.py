"""Pod lifecycle -> Slurm node: limits, features, stale drains, probes and the node reaper, for real.

Pods are recreated through slurmpod_host.cluster.lifecycle (the StatefulSet template with a patch, then
delete with the preStop hook and start, as kubelet and the StatefulSet controller would). Every test
leaves the session cluster as it found it: its workers IDLE, every pod from the unpatched template.
"""

from __future__ import annotations

import os
import re

import pytest
from clusterkit import (
    Session,
    all_idle,
    host_memtotal_mib,
    node,
    node_json,
    nodes,
    restore_pod,
    scontrol,
    wait_for,
    wait_idle,
    wait_ready,
)

from slurmpod import well_known as wk
from slurmpod_host.cluster import lifecycle, runtime
from slurmpod_host.cluster.lifecycle import PodPatch

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

ADMIN_REASON = "maintenance"


def _replace(s: Session, pod: str, patch: PodPatch | None = None, *, run_prestop: bool = True) -> float:
    """Recreate ``pod`` with ``patch``; seconds until its node is IDLE again."""
    lifecycle.replace_pod(s.client, s.cluster.name, pod, patch or PodPatch(), run_prestop=run_prestop)
    return wait_idle(s, pod)


def test_cpu_and_memory_limits_become_core_and_mem_spec_and_follow_a_template_change(session: Session) -> None:
    pod = session.cluster.workers[-1]
    host_cpus = os.cpu_count() or 1
    memtotal = host_memtotal_mib()
    half, three_quarters = memtotal // 2, memtotal * 3 // 4
    try:
        _replace(session, pod, PodPatch(cpu_limit="1", memory_limit=f"{half}Mi"))
        n, raw = node(session, pod), node_json(session, pod)
        assert n is not None
        cores = raw["sockets"] * raw["cores"]
        # CPUTot is the host's; the pod may use one CPU, so every other core is specialized (1 of 2 here).
        assert (n.cpus, n.specialized_cores) == (host_cpus, cores - 1), raw
        assert n.real_memory == memtotal
        assert n.specialized_memory == memtotal - half

        # kubectl edit statefulset: limits "2"-CPU-host and 3/4 memory; the new pod of the same name
        # must register its own definition, not the one Slurm kept for its predecessor.
        _replace(session, pod, PodPatch(cpu_limit=str(host_cpus), memory_limit=f"{three_quarters}Mi"))
        n = node(session, pod)
        assert n is not None
        assert (n.cpus, n.specialized_cores, n.real_memory) == (host_cpus, 0, memtotal)
        assert n.specialized_memory == memtotal - three_quarters
        text = session.root_in(session.cluster.controller, "scontrol", "show", "node", pod).stdout
        assert "CoreSpecCount" not in text, text
        assert f"MemSpecLimit={memtotal - three_quarters}" in text, text
    finally:
        restore_pod(session, pod)
    n = node(session, pod)
    assert n is not None
    assert n.specialized_memory == memtotal - 1024  # the template's own limit (1Gi) again


def test_pod_killed_without_prestop_then_changed_registers_its_own_definition(session: Session) -> None:
    """No preStop ran, so slurmctld still holds the old record; reconcile-node must re-register the node."""
    pod = session.cluster.workers[-1]
    host_cpus, memtotal = os.cpu_count() or 1, host_memtotal_mib()
    three_quarters = memtotal * 3 // 4
    try:
        lifecycle.replace_pod(session.client, session.cluster.name, pod,
                              PodPatch(cpu_limit=str(host_cpus), memory_limit=f"{three_quarters}Mi"),
                              run_prestop=False)

        def reconciled() -> bool | None:
            return True if "EXITED" in _supervised(session, pod, "reconcile-node") else None

        wait_for(f"{pod} reconcile-node done", reconciled, 90)
        wait_idle(session, pod)
        n = node(session, pod)
        assert n is not None
        assert (n.specialized_cores, n.specialized_memory) == (0, memtotal - three_quarters), n
        assert "re-registering: slurmctld kept an old definition" in runtime.logs_tail(session.client, pod, 300)
    finally:
        restore_pod(session, pod)


# Bounds the fallback: reconcile-node's first look (worker.RECONCILE_DELAY_S), its delete and slurmd's
# restart and registration, on a loaded 2-core host.
REREGISTER_S = 60


@pytest.mark.parametrize("claim", [True, False], ids=["claims", "no-claim"])
def test_a_pod_registers_as_it_describes_itself_where_a_placeholder_of_its_name_stands(
        session: Session, claim: bool) -> None:
    """A FUTURE placeholder smaller than the pod (the autoscaler's, for an ordinal with no pod): slurmctld
    would register the pod into it and keep its one CPU and its features, or refuse it. A pod of a nodeset
    with placeholders (SLURMPOD_CLAIM_PLACEHOLDER, set by the chart) deletes it just before its slurmd
    starts, so the node registers at once as the pod describes it and reconcile-node has nothing to
    re-register. Any other pod does not wait for a claim: reconcile-node takes the placeholder over."""
    pod = session.cluster.workers[-1]
    host_cpus = os.cpu_count() or 1
    try:
        lifecycle.delete_pod(session.client, session.cluster.name, pod)  # its preStop deletes the node
        wait_for(f"{pod}'s record gone", lambda: True if node(session, pod) is None else None, 30)
        scontrol(session, "create", f"NodeName={pod}", "State=FUTURE", "CPUs=1", "RealMemory=1",
                 "Features=workers,placeholder")
        future = session.root_in(session.cluster.controller, "scontrol", "--future", "show", "node", pod).stdout
        assert "State=FUTURE" in future, future
        _replace(session, pod, PodPatch(env={wk.ENV_CLAIM_PLACEHOLDER: str(claim).lower()}))

        def as_it_describes_itself() -> bool | None:
            n = node(session, pod)
            ok = (n is not None and n.base == "IDLE" and "INVALID_REG" not in n.flags and n.cpus == host_cpus
                  and "placeholder" not in n.features)
            return True if ok else None

        wait_for(f"{pod} registered as the pod describes it", as_it_describes_itself, REREGISTER_S)
        logs = runtime.logs_tail(session.client, pod, 300)
        assert ("claimed the placeholder" in logs) is claim, logs
        assert ("re-registering" in logs) is not claim, logs
    finally:
        restore_pod(session, pod)


def test_features_annotation_shows_in_sinfo_and_empty_topology_registers(session: Session) -> None:
    pod = session.cluster.workers[-1]
    patch = PodPatch(annotations={wk.ANNOTATION_FEATURES: "ib,a100"}, env={wk.ENV_SLINKY_TOPOLOGY: ""})
    try:
        seconds = _replace(session, pod, patch)
        has_empty = session.root_in(pod, "sh", "-c", f'[ "${{{wk.ENV_SLINKY_TOPOLOGY}-unset}}" = "" ]')
        assert has_empty.code == 0, "the pod should see SLINKY_TOPOLOGY set to an empty value"
        n = node(session, pod)
        assert n is not None
        assert n.base == "IDLE" and "INVALID_REG" not in n.flags, n
        sinfo = session.root_in(session.cluster.controller, "sinfo", "-h", "-N", "-o", "%n %f").stdout
        features = dict(line.split(maxsplit=1) for line in sinfo.splitlines() if line.strip())
        assert set(features[pod].split(",")) == {"workers", "ib", "a100"}, sinfo
        assert set(features[session.cluster.workers[0]].split(",")) == {"workers"}, sinfo
        assert seconds < 60
    finally:
        restore_pod(session, pod)


def _supervised(s: Session, pod: str, program: str) -> str:
    out = s.root_in(pod, wk.SUPERVISORCTL, "-c", f"{wk.RUN_DIR}/{wk.SUPERVISORD_CONF}", "status", program)
    return out.stdout


def test_new_pod_clears_only_the_drain_slurmpod_set(session: Session) -> None:
    pod = session.cluster.workers[-1]
    try:
        # A predecessor killed after preStop drained it (no hook now): the new pod's reconcile-node resumes it.
        scontrol(session, "update", f"NodeName={pod}", "State=DRAIN", f"Reason={wk.REASON_POD_TERMINATING}")
        _replace(session, pod, run_prestop=False)
        wait_for(f"{pod} reconcile-node done",
                 lambda: True if "EXITED" in _supervised(session, pod, "reconcile-node") else None, 60)
        n = node(session, pod)
        assert n is not None
        # Usable again. Either reconcile-node resumed it ("cleared stale drain"), or slurmctld had already
        # dropped the DRAIN flag when the old slurmd went away unannounced and the new one registered
        # (ReturnToService=2), leaving only the reason text: both orders were observed.
        assert n.usable, n

        # An admin's drain survives the pod's replacement, preStop hook included.
        scontrol(session, "update", f"NodeName={pod}", "State=DRAIN", f"Reason={ADMIN_REASON}")
        before = node_json(session, pod)["slurmd_start_time"]
        lifecycle.replace_pod(session.client, session.cluster.name, pod)

        def settled() -> bool | None:
            registered = node_json(session, pod)["slurmd_start_time"] != before
            return True if registered and "EXITED" in _supervised(session, pod, "reconcile-node") else None

        wait_for(f"{pod} registered and reconcile-node done", settled, 90)
        n = node(session, pod)
        assert n is not None
        assert n.reason == ADMIN_REASON, n
        assert n.drained, n
    finally:
        scontrol(session, "update", f"NodeName={pod}", "State=RESUME")
        wait_idle(session, pod)


def _probe(s: Session, pod: str, kind: str) -> runtime.ExecResult:
    return s.root_in(pod, "slurmpod", "probe", kind, timeout=30)


def test_readiness_probe_follows_the_slurm_node_and_liveness_the_daemons(session: Session) -> None:
    pod = session.cluster.workers[0]
    wait_idle(session, pod)
    for p in (pod, session.cluster.controller, session.cluster.login):
        ready, live = _probe(session, p, "ready"), _probe(session, p, "live")
        assert ready.code == 0, f"{p}: {ready.stdout}{ready.stderr}"
        assert live.code == 0, f"{p}: {live.stdout}{live.stderr}"
    try:
        scontrol(session, "update", f"NodeName={pod}", "State=DRAIN", "Reason=sptest probe check")
        drained = _probe(session, pod, "ready")
        assert drained.code == 1, drained.stdout
        assert re.search(r"DRAIN", drained.stderr), drained.stderr
        assert _probe(session, pod, "live").code == 0
    finally:
        scontrol(session, "update", f"NodeName={pod}", "State=RESUME")
        wait_idle(session, pod)
    assert _probe(session, pod, "ready").code == 0


# The reaper deletes a dynamic node NOT_RESPONDING for nodeTimeoutSeconds (cluster spec, default 300,
# at least 10). For this test: `kubectl edit configmap cluster` -> 10 s and the reaper's pass interval
# 2 s (SLURMPOD_REAPER_INTERVAL, the env twin of `slurmpod daemon node-reaper --interval`, default 15 s)
# on a recreated controller pod; both are put back afterwards. Slurm itself first has to notice the pod
# is gone. Documented worst case: slurmctld pings a node every SlurmdTimeout/3 and marks it
# NOT_RESPONDING when a ping fails after MessageTimeout, at the latest SlurmdTimeout after its last
# contact (Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_SlurmdTimeout); then the reaper's timeout
# and two of its passes. The test asserts the outcome within twice that bound; how long it took is a
# figure (printed here), not an assertion.
SLURMD_TIMEOUT_S = 60  # slurm.conf.j2
MESSAGE_TIMEOUT_S = 10  # Slurm's default MessageTimeout
REAPER_TIMEOUT_S = 10
REAPER_INTERVAL_S = 2
REAP_WORST_CASE_S = SLURMD_TIMEOUT_S + MESSAGE_TIMEOUT_S + REAPER_TIMEOUT_S + 2 * REAPER_INTERVAL_S


def test_node_reaper_deletes_the_node_of_a_pod_gone_without_prestop(session: Session) -> None:
    name, controller, client = session.cluster.name, session.cluster.controller, session.client
    extra = f"{name}-worker-{len(session.cluster.workers)}"  # beyond the replicas: a scale-up pod
    old = lifecycle.set_config_map(name, "cluster", {})
    spec = old["cluster.yaml"].rstrip("\n") + f"\nnodeTimeoutSeconds: {REAPER_TIMEOUT_S}\n"
    lifecycle.set_config_map(name, "cluster", {**old, "cluster.yaml": spec})
    try:
        lifecycle.replace_pod(client, name, controller,
                              PodPatch(env={"SLURMPOD_REAPER_INTERVAL": str(REAPER_INTERVAL_S)}))
        wait_ready(session, controller)
        all_idle(session)
        plan = lifecycle.plan_pod(client, name, "worker", len(session.cluster.workers))
        assert plan.name == extra
        lifecycle.start_pod(client, name, plan)
        wait_idle(session, extra)

        client.containers.get(extra).kill()  # the pod is gone: no preStop, no drain, no delete
        lifecycle.delete_pod(client, name, extra, run_prestop=False)
        _, seconds = wait_for(f"node {extra} reaped", lambda: True if extra not in nodes(session) else None,
                              2 * REAP_WORST_CASE_S, poll=1.0)
        assert f'"node": "{extra}"' in runtime.logs_tail(client, controller, 400)  # the reaper's log line
        sinfo = session.root_in(controller, "sinfo", "-h", "-N", "-o", "%n").stdout
        assert extra not in sinfo.split()
        print(f"node {extra} removed {seconds:.1f}s after its pod was killed")
    finally:
        lifecycle.set_config_map(name, "cluster", old)
        if extra in {c.name for c in runtime.find(client, name).containers}:
            lifecycle.delete_pod(client, name, extra, run_prestop=False, grace_s=0)
        restore_pod(session, controller)
        if extra in nodes(session):
            scontrol(session, "delete", f"NodeName={extra}")
        all_idle(session)
