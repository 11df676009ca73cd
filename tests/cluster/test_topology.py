"""Topology on real Slurm: rendered at controller start, kept in sync as worker pods come and go.

Four workers in two blocks, placed by their pods' `slurmpod.io/topology` annotation (what a webhook such
as Slinky's sets); the controller learns each placement from the worker's `slurmd --extra` registration.
24.11 runs topology/tree (its dynamic slurmd exits on topology/block: see entrypoints/topology_sync.py);
26.05 runs topology/block from topology.yaml.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import Any

import pytest
import yaml
from clusterkit import Session, all_idle, job, nodes, restore_pod, scontrol, wait_for, wait_idle, wait_ready
from policyvolume import PolicyVolume

from slurmpod import well_known as wk
from slurmpod.topology import hostlist
from slurmpod_host.cluster import lifecycle, runtime
from slurmpod_host.cluster.jobs import JobRecord
from slurmpod_host.cluster.lifecycle import PodPatch

pytestmark = [pytest.mark.docker, pytest.mark.cluster, pytest.mark.smoke]

SYNC_INTERVAL_S = 2
# Documented worst case for a placement change to reach `scontrol show topology`: the worker's slurmd
# registers (IDLE within clusterkit.IDLE_TIMEOUT_S), then one sync pass, then a reconfigure, which
# re-execs slurmctld (SlurmctldTimeout=60 s bounds how long it may be away).
FOLLOW_WORST_CASE_S = 2 * SYNC_INTERVAL_S + 60


def _plugin(flavor: str) -> str:
    return "tree" if flavor == "24.11" else "block"


def _shown(s: Session) -> dict[str, frozenset[str]]:
    """Unit -> nodes from `scontrol show topology` (leaf switches or base blocks; lines with Nodes=)."""
    out = s.root_in(s.cluster.controller, "scontrol", "show", "topology", timeout=30).stdout
    units: dict[str, frozenset[str]] = {}
    for line in out.splitlines():
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        name = fields.get("SwitchName") or fields.get("BlockName")
        if name and fields.get("Nodes") and "Switches" not in fields and "[" not in name and "," not in name:
            units[name] = frozenset(hostlist.expand(fields["Nodes"]))
    return units


def _rendered(s: Session) -> dict[str, frozenset[str]]:
    """Unit -> nodes from the file topology-sync wrote (topology.conf or topology.yaml)."""
    path = wk.TOPOLOGY_CONF if s.flavor == "24.11" else wk.TOPOLOGY_YAML
    text = s.root_in(s.cluster.controller, "cat", path, timeout=30).stdout
    units: dict[str, frozenset[str]] = {}
    if PurePosixPath(path).suffix == ".yaml":
        doc: Any = yaml.safe_load(text)
        for topo in doc:
            entries = topo["tree"]["switches"] if "tree" in topo else topo["block"]["blocks"]
            for entry in entries:
                nodes = frozenset(hostlist.expand(entry["nodes"])) if entry.get("nodes") else frozenset()
                units[str(entry.get("switch", entry.get("block")))] = nodes
        return units
    for line in text.splitlines():
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        if "SwitchName" in fields and "Nodes" in fields:
            units[fields["SwitchName"]] = frozenset(hostlist.expand(fields["Nodes"]))
        elif "BlockName" in fields:
            units[fields["BlockName"]] = frozenset(hostlist.expand(fields["Nodes"]))
    return units


def _file_matches(s: Session, expected: dict[str, frozenset[str]]) -> bool:
    """24.11: topology.conf lists every node. 25.05+: topology.yaml lists the units, and placed nodes
    join them by their own Topology= registration (see topology/sync.py), so no node is listed."""
    rendered = _rendered(s)
    if s.flavor == "24.11":
        return rendered == expected
    return {k: rendered.get(k) for k in expected} == dict.fromkeys(expected, frozenset())


def _wait_topology(s: Session, expected: dict[str, frozenset[str]], what: str) -> float:
    def matches() -> bool | None:
        shown = _shown(s)
        return True if {k: shown.get(k) for k in expected} == expected and _file_matches(s, expected) else None
    try:
        return wait_for(what, matches, FOLLOW_WORST_CASE_S, poll=1.0)[1]
    except AssertionError:
        raise AssertionError(f"{what}: shown {_shown(s)}, rendered {_rendered(s)}, want {expected}") from None


def _job_nodes(s: Session, *argv: str) -> frozenset[str]:
    result = s.as_researcher("srun", *argv, "hostname", timeout=120)
    assert result.code == 0, result.stderr
    return frozenset(result.stdout.split())


# The policy's topology rule for jobs without GPUs too (GRES for fake GPUs is not under test here),
# one unit = the 2 nodes of a block; larger jobs left to Slurm, so the 3-node job above still spans.
PLACEMENT_POLICY = """
topology: {{plugin: {plugin}, groupSize: 2, gpuJobsOnly: false, oversize: allow, maxSwitchWaitSeconds: 300}}
"""
# A job waits for its switch count up to wait4switch, capped by SchedulerParameters=max_switch_wait (default
# 300 s); a block segment waits indefinitely. Once the block frees, the next scheduling pass starts it: the
# main loop runs at least every 60 s, backfill every 30 s. Ref: https://slurm.schedmd.com/sbatch.html#OPT_switches,
# https://slurm.schedmd.com/sched_config.html
PLACED_START_S = 90.0


def _hold(s: Session, pod: str) -> str:
    """A job that takes ``pod`` whole and keeps it until cancelled; returns its id once it runs."""
    held = s.as_researcher("sbatch", "--parsable", "--exclusive", "-w", pod, "-o", "/dev/null",
                           "--wrap", "sleep 300", timeout=60)
    assert held.code == 0, held.stderr
    job_id = held.stdout.strip().split(";")[0]
    wait_for(f"hold job on {pod} running", lambda: job(s, job_id).state == "RUNNING" or None, 60)
    return job_id


def _submit_2_nodes(s: Session) -> str:
    sub = s.as_researcher("sbatch", "--parsable", "-N2", "-o", "/dev/null", "--wrap", "sleep 20", timeout=60)
    assert sub.code == 0, sub.stderr
    return str(sub.stdout.strip().split(";")[0])


def _held_back(s: Session, job_id: str) -> None:
    """A 2-node job submitted with one free node in each block carries the policy's constraint and waits."""
    if s.flavor == "24.11":
        record = job(s, job_id)
        assert (record.switches, record.switch_wait_s) == (1, 300), record  # --switches=1@300 set by the policy
    else:
        assert _segment_size(s, job_id) == 2  # --segment=2 set by the policy

    def considered() -> JobRecord | None:
        j = job(s, job_id)
        return j if j.state != "PENDING" or j.reason != "None" else None

    # Considered by the scheduler (its Reason leaves "None") and still pending: not spread over 2 blocks.
    record, _ = wait_for(f"job {job_id} considered", considered, PLACED_START_S, poll=1.0)
    assert record.state == "PENDING", record


def _segment_size(s: Session, job_id: str) -> int | None:
    """The job's segment size as slurmctld reports it (text `Segment*=` or JSON `*segment*`)."""
    out = s.root_in(s.cluster.controller, "scontrol", "show", "job", "-o", job_id, timeout=30)
    for item in out.stdout.split():
        key, _, value = item.partition("=")
        if key.lower().startswith("segment") and value.isdigit():
            return int(value)
    doc = json.loads(s.root_in(s.cluster.controller, "scontrol", "show", "job", "--json", job_id, timeout=30).stdout)
    found = [v for k, v in doc["jobs"][0].items() if "segment" in k.lower()]
    print(f"job {job_id}: text {out.stdout.strip()!r}, JSON segment fields {found!r}")
    for value in found:
        number = value.get("number") if isinstance(value, dict) else value
        if isinstance(number, int):
            return number
    return None


def _started(s: Session, job_id: str) -> JobRecord | None:
    record = job(s, job_id)
    return record if record.state in ("RUNNING", "COMPLETING", "COMPLETED") else None


def test_topology_follows_pods_and_places_jobs(session: Session) -> None:
    name, controller, client = session.cluster.name, session.cluster.controller, session.client
    plugin = _plugin(session.flavor)
    w = [f"{name}-worker-{i}" for i in range(4)]
    extra = [pod for pod in w if pod not in session.cluster.workers]  # scale-up pods beyond the replicas
    place = {w[0]: "b1/host0", w[1]: "b1/host1", w[2]: "b2/host2", w[3]: "b2/host3"}
    old = lifecycle.set_config_map(name, "cluster", {})
    spec = old["cluster.yaml"].replace("topologyPlugin: none", f"topologyPlugin: {plugin}")
    spec = spec.rstrip("\n") + f"\ntopology:\n  syncIntervalSeconds: {SYNC_INTERVAL_S}\n"
    lifecycle.set_config_map(name, "cluster", {**old, "cluster.yaml": spec})
    old_policy = lifecycle.set_config_map(name, "policy", {"policy.yaml": PLACEMENT_POLICY.format(plugin=plugin)})
    hold_job = ""
    holds: list[str] = []
    try:
        lifecycle.replace_pod(client, name, controller)
        wait_ready(session, controller)
        for pod in w:
            lifecycle.replace_pod(client, name, pod, PodPatch(annotations={wk.ANNOTATION_TOPOLOGY: place[pod]}))
        for pod in w:
            wait_idle(session, pod)
        both = {"b1": frozenset(w[:2]), "b2": frozenset(w[2:])}
        seconds = _wait_topology(session, both, "4 workers in 2 blocks")
        print(f"{plugin}: scontrol show topology matched the rendering {seconds:.1f}s after the 4 pods were IDLE")
        # The controller pod is new in this test: its whole log (workers registering can push the line out
        # of any fixed tail) holds the reconfigure that applied the 4 placements.
        ctl_log = runtime.logs_tail(client, controller, "all")
        reconfigures = ctl_log.count("topology changed; reconfigured")
        print(f"{plugin}: {reconfigures} reconfigure(s) in the controller's {len(ctl_log.splitlines())} log lines")
        topo_lines = [line for line in ctl_log.splitlines() if "topology" in line.lower()]
        assert reconfigures >= 1, "no reconfigure logged; topology lines:\n" + "\n".join(topo_lines[-40:])

        # One node of b1 taken whole: a 2-node job fits only in b2. Without topology Slurm takes the lowest
        # idle names (w1, w2), across the blocks.
        held = session.as_researcher("sbatch", "--parsable", "--exclusive", "-w", w[0], "--wrap", "sleep 300",
                                     timeout=60)
        assert held.code == 0, held.stderr
        hold_job = held.stdout.strip().split(";")[0]
        wait_for("hold job running", lambda: True if session.root_in(
            controller, "squeue", "-h", "-j", hold_job, "-o", "%T").stdout.strip() == "RUNNING" else None, 60)
        assert _job_nodes(session, "-N2") == both["b2"]
        assert session.root_in(controller, "scancel", hold_job, timeout=30).code == 0
        hold_job = ""
        all_idle(session)
        for pod in w[2:]:
            wait_idle(session, pod)
        # Two free 2-node blocks: a 2-node job takes one whole block.
        assert _job_nodes(session, "-N2") in (both["b1"], both["b2"])
        # No block holds 3 nodes: what Slurm itself does (the policy leaves larger jobs alone) is run it
        # across both blocks: tree joins them under the root switch; block under the 2-block level.
        three = _job_nodes(session, "-N3")
        assert len(three) == 3 and three & both["b1"] and three & both["b2"]

        # The job_submit policy keeps a 2-node job to one leaf switch / block: with one node taken in
        # each block, Slurm alone would run it across both (as the 3-node job above); with the policy's
        # constraint it waits, then starts in the block that frees up.
        for pod in (w[0], w[2]):
            holds.append(_hold(session, pod))
        placed = _submit_2_nodes(session)
        holds.insert(0, placed)  # cancelled in `finally` too
        _held_back(session, placed)
        assert session.root_in(controller, "scancel", holds.pop(), timeout=30).code == 0
        started, took = wait_for(f"job {placed} started", lambda: _started(session, placed), PLACED_START_S,
                                 poll=1.0)
        print(f"{plugin}: the constrained job started {took:.1f}s after b2 freed (bound {PLACED_START_S:.0f}s)")
        assert frozenset(hostlist.expand(started.nodes)) == both["b2"], started
        while holds:
            assert session.root_in(controller, "scancel", holds.pop(), timeout=30).code == 0
        all_idle(session)

        # Larger than any block, with `oversize: reject`: the policy refuses the 3-node job and says why
        # (a 3-node job behaves as the policy says), on srun's stderr.
        policy = PolicyVolume(session)
        try:
            policy.publish({"policy.yaml": PLACEMENT_POLICY.format(plugin=plugin).replace(
                "oversize: allow", "oversize: reject")})
            refused = session.as_researcher("srun", "-N3", "hostname", timeout=120)
            assert refused.code != 0
            unit = "leaf switch" if plugin == "tree" else "block"
            assert f"a 3-node job does not fit one {unit} of 2 nodes: ask for at most 2 nodes" in refused.stderr, \
                refused.stderr
        finally:
            policy.restore()

        # A pod goes (scale-in: its node deleted as the reaper would): the topology follows.
        lifecycle.delete_pod(client, name, w[3])
        if w[3] in nodes(session):
            scontrol(session, "delete", f"NodeName={w[3]}")
        seconds = _wait_topology(session, {"b1": frozenset(w[:2]), "b2": frozenset({w[2]})}, "w3 gone")
        print(f"{plugin}: topology followed a deleted pod in {seconds:.1f}s")
    finally:
        for job in [hold_job, *holds]:
            if job:
                session.root_in(controller, "scancel", job, timeout=30)
        lifecycle.set_config_map(name, "cluster", old)
        lifecycle.set_config_map(name, "policy", old_policy)
        running = {c.name for c in runtime.find(client, name).containers}
        for pod in extra:
            if pod in running:
                lifecycle.delete_pod(client, name, pod, run_prestop=False, grace_s=0)
        restore_pod(session, controller)
        for pod, state in nodes(session).items():  # a Topology= slurmctld refused leaves its own drain
            if state.reason.startswith("Failed to set topology"):
                scontrol(session, "update", f"NodeName={pod}", "State=RESUME")
        for pod in extra:
            if pod in nodes(session):
                scontrol(session, "delete", f"NodeName={pod}")
        for pod in session.cluster.workers:
            restore_pod(session, pod)
        all_idle(session)
