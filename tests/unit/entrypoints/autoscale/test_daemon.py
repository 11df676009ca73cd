"""The autoscaler pass by pass over recording fakes of the Kubernetes and Slurm seams: what slurmctld and
the API server are asked to do, what is counted, and that a failed read or a conflict changes nothing.

Pods are not emulated: a test makes the Slurm node a new pod would register (``register``), and the
StatefulSet's replicas are the fake's Scale.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from fakes.kube import FakeKube
from fakes.slurm_client import FakeClock, FakeSlurm

from slurmpod import reasons
from slurmpod.demand import PendingJob
from slurmpod.entrypoints import cluster_spec
from slurmpod.entrypoints.autoscale import act, daemon, decide
from slurmpod.entrypoints.cluster_spec import AutoscalingSpec, NodeSetSpec, NodeShape
from slurmpod.errors import PermanentError, SlurmpodError, TransientError
from slurmpod.nodestate import NodeState

NS = "slurm"
STS = "slurm-worker-gpu"
SPEC = NodeSetSpec("gpu", "gpu", STS, AutoscalingSpec(enabled=True, max_replicas=3, idle_seconds=60, step=1))
ADMIN = "rack 7 PSU swap (admin)"


def name(i: int) -> str:
    return f"{STS}-{i}"


class World:
    def __init__(self, replicas: int = 0, spec: NodeSetSpec = SPEC) -> None:
        self.kube, self.slurm, self.clock = FakeKube(), FakeSlurm(), FakeClock()
        self.kube.add_statefulset(STS, replicas, namespace=NS)
        for i in range(replicas):
            self.register(i)
        self.wanted: dict[str, int] = {"gpu": 0}
        self.demand_error: SlurmpodError | None = None
        self.scaler = daemon.Autoscaler(self.kube, self.slurm, NS, [spec], demand=self.demand)

    def demand(self, nodes: Sequence[NodeState]) -> Mapping[str, int]:
        del nodes
        if self.demand_error is not None:
            raise self.demand_error
        return dict(self.wanted)

    def register(self, i: int, base: str = "IDLE") -> None:
        self.slurm.add_node(name(i), base)

    def run(self, advance: float = 0.0) -> tuple[decide.Plan, ...]:
        self.clock.now += advance
        return self.scaler.one_pass(self.clock.now)

    @property
    def replicas(self) -> int:
        return self.kube.replicas(STS, NS)

    def reason(self, i: int) -> str:
        return self.slurm.nodes_by_name[name(i)].reason

    def drained(self, i: int) -> bool:
        return self.slurm.nodes_by_name[name(i)].drained

    @property
    def slurm_writes(self) -> list[str]:
        return [m for m in self.slurm.methods if m in ("drain", "resume", "delete_node")]

    def counted(self) -> dict[str, int]:
        return dict(self.scaler.counters.get("gpu", {}))


def test_demand_scales_out_a_step_a_pass_up_to_max() -> None:
    w = World()
    w.wanted["gpu"] = 5
    w.run()
    assert w.replicas == 1
    assert w.kube.called("set_scale") == [(NS, STS, 1, "1")]  # at the version read
    w.run(15)  # the new pod counts as capacity while it starts, the rest is still wanted
    w.run(15)
    w.run(15)
    assert w.replicas == 3  # maxReplicas
    assert w.counted()["scale_out"] == 3


def test_no_scale_in_while_demand_waits() -> None:
    w = World(2)
    w.wanted["gpu"] = 1  # e.g. a job that fits no node yet
    for _ in range(10):
        w.run(60)
    assert w.replicas == 2 and w.slurm_writes == []


def test_idle_nodes_drain_from_the_top_and_replicas_follow_once_they_are_drained() -> None:
    w = World(2)
    w.run()  # timers start
    w.run(59)
    assert w.slurm_writes == []
    w.run(1)
    assert w.slurm.called("drain") == [(name(1), reasons.AUTOSCALE_SCALE_IN)]
    assert w.replicas == 2  # not in the pass that drained it: seen DRAINED with no job first
    w.run(15)
    assert w.replicas == 1
    assert w.slurm.called("drain")[-1] == (name(0), reasons.AUTOSCALE_SCALE_IN)
    w.run(15)
    assert w.replicas == 0
    assert w.counted() == {"scale_out": 0, "drain": 2, "undrain": 0, "scale_in": 2}


def test_a_restarted_autoscaler_counts_idle_time_from_slurmctlds_last_busy_time() -> None:
    """The timers of the autoscaler that ran before are gone; slurmctld's LastBusyTime is not. A node with
    no job for 90 s (idleSeconds 60) is drained in the first pass; one busy 30 s ago waits its last 30 s."""
    wall = 1_800_000_000.0
    w = World(2)
    w.slurm._set(name(0), last_busy=int(wall - 30))
    w.slurm._set(name(1), last_busy=int(wall - 90))
    w.scaler.one_pass(w.clock.now, wall)
    assert w.slurm.called("drain") == [(name(1), reasons.AUTOSCALE_SCALE_IN)]
    w.clock.now += 29
    w.scaler.one_pass(w.clock.now, wall + 29)
    assert not w.drained(0)
    w.clock.now += 1
    w.scaler.one_pass(w.clock.now, wall + 30)
    assert w.drained(0)


def test_a_job_that_lands_on_a_drained_node_keeps_it_and_returning_demand_lifts_the_drain() -> None:
    w = World(2)
    w.run()
    w.run(60)
    assert w.drained(1)
    # slurmctld started a job on it between our read and our drain: DRAINING, not DRAINED
    node = w.slurm.nodes_by_name[name(1)]
    w.slurm.nodes_by_name[name(1)] = type(node)(node.name, "MIXED", node.flags, node.reason)
    for _ in range(5):
        w.run(15)
    assert w.replicas == 2  # never past the node with a job
    w.wanted["gpu"] = 1
    w.run(15)
    assert not w.drained(1) and w.slurm.called("resume") == [(name(1),)]
    assert w.counted()["undrain"] == 1


def test_an_admins_drain_is_never_lifted_nor_its_node_removed() -> None:
    w = World(2)
    w.slurm.drain(name(1), ADMIN)
    w.wanted["gpu"] = 2
    w.run()
    assert w.replicas == 3  # the admin's node is no capacity
    w.wanted["gpu"] = 0
    for _ in range(10):
        w.run(60)
    assert w.replicas == 2  # the pod that never registered goes; the admin's node and all below it stay
    assert (w.reason(1), w.drained(1)) == (ADMIN, True)
    assert w.slurm.called("resume") == [] and w.slurm.called("drain") == [(name(1), ADMIN)]  # the admin's own


def test_never_below_min() -> None:
    spec = NodeSetSpec("gpu", "gpu", STS, AutoscalingSpec(enabled=True, min_replicas=1, idle_seconds=0))
    w = World(2, spec)
    for _ in range(6):
        w.run(15)
    assert w.replicas == 1 and not w.drained(0)


def fault_slurm(w: World) -> None:
    w.slurm.down = True


def fault_slurm_hangs(w: World) -> None:
    w.slurm.hang.add("nodes")


def fault_demand(w: World) -> None:
    w.demand_error = TransientError("squeue timed out after 15 s")


def fault_demand_missing(w: World) -> None:
    w.wanted.clear()


def fault_api_down(w: World) -> None:
    w.kube.down = True


def fault_no_statefulset(w: World) -> None:
    w.kube.fail["get_scale"] = PermanentError("Kubernetes API read scale: HTTP 404 Not Found")


def fault_forbidden(w: World) -> None:
    w.kube.fail["get_scale"] = PermanentError("Kubernetes API read scale: HTTP 403 Forbidden")


def fault_garbled_scale(w: World) -> None:
    del w.kube.scales[(NS, STS)]["metadata"]["resourceVersion"]


FAULTS = [fault_slurm, fault_slurm_hangs, fault_demand, fault_demand_missing, fault_api_down, fault_no_statefulset,
          fault_forbidden, fault_garbled_scale]


@pytest.mark.parametrize("fault", FAULTS, ids=[f.__name__.removeprefix("fault_") for f in FAULTS])
@pytest.mark.parametrize("demand", [0, 3], ids=["idle", "pending"])
def test_a_failed_read_does_nothing(fault: object, demand: int) -> None:
    w = World(2)
    w.run()
    w.wanted["gpu"] = demand
    w.slurm.calls.clear()
    w.kube.calls.clear()
    fault(w)  # type: ignore[operator]
    for _ in range(3):
        assert w.run(600) == ()
    assert w.kube.writes == [] and w.slurm_writes == []
    assert w.replicas == 2 and not w.drained(1)


def test_a_conflict_on_set_scale_changes_nothing_and_the_next_pass_decides_again() -> None:
    w = World(1)
    w.wanted["gpu"] = 2
    snap = daemon.observe_once(w.kube, w.slurm, NS, [SPEC], demand=w.demand, now=w.clock.now)
    (v,) = snap.nodesets
    plan = decide.plan(v, decide.tick(v, decide.Timers(), snap.now), snap.now)
    w.kube.scale_by_hand(STS, 1, NS)  # someone touched the StatefulSet: a new resourceVersion
    act.Executor(w.kube, w.slurm, NS, w.scaler.counters).apply(plan)
    assert w.replicas == 1 and w.counted() == {}
    assert w.kube.called("set_scale") == [(NS, STS, 2, "1")]
    w.run()
    assert w.replicas == 2 and w.kube.called("set_scale")[-1] == (NS, STS, 2, "2")
    assert w.counted()["scale_out"] == 1


def test_a_replicas_change_by_hand_is_taken_as_the_new_start() -> None:
    w = World(1)
    w.wanted["gpu"] = 1
    w.kube.scale_by_hand(STS, 3, NS)  # a user scaled up; the new pods are starting
    w.run()
    assert w.replicas == 3 and w.kube.called("set_scale") == []


def test_a_drain_reads_the_node_again_and_never_overwrites_a_reason_set_meanwhile() -> None:
    w = World(1)
    w.run()
    snap = daemon.observe_once(w.kube, w.slurm, NS, [SPEC], demand=w.demand, now=w.clock.now + 60)
    (v,) = snap.nodesets
    plan = decide.plan(v, w.scaler.timers["gpu"], snap.now)
    assert plan.of(decide.Kind.DRAIN) is not None
    w.slurm.drain(name(0), ADMIN)
    act.Executor(w.kube, w.slurm, NS, w.scaler.counters).apply(plan)
    assert w.reason(0) == ADMIN and w.counted() == {}


def test_a_lift_reads_the_node_again_and_never_lifts_a_health_drain_set_meanwhile() -> None:
    w = World(1)
    w.slurm.drain(name(0), reasons.AUTOSCALE_SCALE_IN)
    w.wanted["gpu"] = 1
    snap = daemon.observe_once(w.kube, w.slurm, NS, [SPEC], demand=w.demand, now=w.clock.now)
    (v,) = snap.nodesets
    plan = decide.plan(v, decide.Timers(), snap.now)
    assert plan.of(decide.Kind.UNDRAIN) is not None
    health = reasons.health("gpu.xid", "XID 79")
    w.slurm.drain(name(0), health)
    act.Executor(w.kube, w.slurm, NS, w.scaler.counters).apply(plan)
    assert w.reason(0) == health and w.drained(0) and w.slurm.called("resume") == []


def test_one_failed_drain_does_not_stop_the_next() -> None:
    spec = NodeSetSpec("gpu", "gpu", STS, AutoscalingSpec(enabled=True, idle_seconds=0, step=2))
    w = World(2, spec)
    w.slurm.fail["drain"] = TransientError("scontrol timed out")
    w.run()
    assert [args[0] for args in w.slurm.called("drain")] == [name(1), name(0)]
    del w.slurm.fail["drain"]
    w.run(15)
    assert w.drained(0) and w.drained(1) and w.counted()["drain"] == 2


def test_each_decision_is_logged_with_its_context(caplog: pytest.LogCaptureFixture) -> None:
    w = World(0)
    w.wanted["gpu"] = 2
    with caplog.at_level(logging.INFO, logger="slurmpod.entrypoints.autoscale"):
        w.run()
    (record,) = [r for r in caplog.records if r.getMessage() == "autoscale"]
    assert record.ctx == {"nodeset": "gpu", "action": "scale_out", "from": 0, "to": 1, "nodes": "",  # type: ignore[attr-defined]
                          "why": "2 nodes pending, 0 idle or starting"}


def test_the_counters_file_is_what_the_exporter_reads(tmp_path: Path) -> None:
    path = tmp_path / "autoscale" / "counters.json"
    kube, slurm, clock = FakeKube(), FakeSlurm(), FakeClock()
    kube.add_statefulset(STS, 0, namespace=NS)
    other = NodeSetSpec("cpu", "cpu", "slurm-worker-cpu", AutoscalingSpec(enabled=True))
    kube.add_statefulset("slurm-worker-cpu", 0, namespace=NS)
    daemon.run(kube, slurm, NS, [SPEC, other], demand=lambda nodes: {"gpu": 1, "cpu": 0}, counters_file=path,
               clock=clock, passes=1)
    assert json.loads(path.read_text()) == {"decisions": {
        "cpu": {"drain": 0, "scale_in": 0, "scale_out": 0, "undrain": 0},
        "gpu": {"drain": 0, "scale_in": 0, "scale_out": 1, "undrain": 0}}}
    assert [p.name for p in path.parent.iterdir()] == ["counters.json"]  # replaced atomically, no leftovers
    # a restarted daemon counts on from the file
    slurm.add_node(f"{STS}-0")
    daemon.run(kube, slurm, NS, [SPEC, other], demand=lambda nodes: {"gpu": 2, "cpu": 0}, counters_file=path,
               clock=clock, passes=1)
    assert json.loads(path.read_text())["decisions"]["gpu"]["scale_out"] == 2


@pytest.mark.parametrize("text", ["", "not json", "[]", '{"decisions": {"gpu": {"drain": "x", "undrain": true}}}'],
                         ids=["empty", "garbled", "not-an-object", "wrong-types"])
def test_an_unreadable_counters_file_counts_from_zero(tmp_path: Path, text: str) -> None:
    path = tmp_path / "counters.json"
    path.write_text(text)
    assert act.load_counters(path) in ({}, {"gpu": {}})
    act.write_counters(path, act.load_counters(path), ["gpu"])
    assert json.loads(path.read_text()) == {"decisions": {"gpu": {"drain": 0, "scale_in": 0, "scale_out": 0,
                                                                  "undrain": 0}}}


def test_run_sleeps_out_the_interval(tmp_path: Path) -> None:
    clock = FakeClock()
    kube = FakeKube()
    kube.add_statefulset(STS, 0, namespace=NS)
    daemon.run(kube, FakeSlurm(), NS, [SPEC], demand=lambda nodes: {"gpu": 0}, counters_file=tmp_path / "c.json",
               interval_s=15.0, clock=clock, passes=3)
    assert clock.slept == [15.0, 15.0]
    assert len(kube.called("get_scale")) == 3


# --- placeholders over the fakes ---

SHAPED = replace(SPEC, shape=NodeShape(cpus=4, real_memory_mib=8192, gpus=2))


def test_a_nodeset_at_zero_keeps_a_placeholder_per_ordinal_and_its_scale_out_deletes_none() -> None:
    """Each pod's reconcile-node takes its own placeholder over once its slurmd is up; until then the
    partition keeps every record, so a submission is never refused for a pod that is starting."""
    w = World(spec=SHAPED)
    w.run()
    assert sorted(n for n, s in w.slurm.nodes_by_name.items() if s.base == "FUTURE") == [name(0), name(1), name(2)]
    assert w.slurm.nodes_by_name[name(1)].features == ("gpu",)
    assert w.slurm.nodes_by_name[name(1)].cpus == 4 and w.slurm.nodes_by_name[name(1)].real_memory == 8192
    w.wanted["gpu"] = 1
    w.run(15)
    assert w.replicas == 1 and not w.slurm.called("delete_node")
    assert all(w.slurm.nodes_by_name[name(i)].base == "FUTURE" for i in range(3))
    # Its pod's slurmd was refused against the placeholder (slurmctld drains it with its own reason):
    # the pod is starting, so the next pass starts no other pod for the same job.
    refused = replace(w.slurm.nodes_by_name[name(0)], flags=frozenset({"DYNAMIC_NORM", "DRAIN", "INVALID_REG"}),
                      reason="CoreSpec differ")
    w.slurm.nodes_by_name[name(0)] = refused
    w.run(15)
    assert w.replicas == 1 and not w.slurm.called("delete_node")


def test_placeholders_come_back_once_the_removed_pods_records_are_gone() -> None:
    w = World(replicas=1, spec=SHAPED)
    w.run()
    assert w.slurm.nodes_by_name[name(0)].base == "IDLE"  # its pod's node, no placeholder
    w.run(61)  # idle past idleSeconds: drained
    w.run(15)  # drained with no job: replicas to 0
    assert w.replicas == 0
    assert w.slurm.nodes_by_name[name(0)].base == "IDLE"  # still its old record: no placeholder over it
    w.slurm.delete_node(name(0))  # preStop (or the node-reaper) deletes it
    w.run(15)
    assert w.slurm.nodes_by_name[name(0)].base == "FUTURE"


def test_the_demand_counts_a_job_its_partition_refuses_while_the_nodeset_takes_its_placeholders_over() -> None:
    """A pass hands the demand every node record it read: a job with PartitionConfig counts while one of the
    nodeset's ordinals has no record (its pod's reconcile-node deleted the placeholder, its slurmd not
    registered yet), and not after."""
    spec = cluster_spec.parse({
        "nodesets": [{"name": "gpu", "statefulSet": STS, "shape": {"cpu": "4", "memory": "8Gi"},
                      "autoscaling": {"enabled": True, "maxReplicas": 2}}],
        "partitions": [{"name": "main", "nodesets": ["gpu"]}]})
    slurm = FakeSlurm()
    slurm.pending = [PendingJob(7, ("main",), "", nodes=1, gpus_per_node=0, cpus_per_node=1, needs_records=True)]
    read = daemon._demand_source(spec, slurm)
    assert read([NodeState(name(0), "IDLE")]) == {"gpu": 1}
    assert read([NodeState(name(0), "IDLE"), NodeState(name(1), "FUTURE")]) == {"gpu": 0}
    # observe_once passes what it read, placeholders included
    slurm.add_node(name(0), "FUTURE")
    kube = FakeKube()
    kube.add_statefulset(STS, 0, namespace=NS)
    seen: list[tuple[str, ...]] = []
    daemon.observe_once(kube, slurm, NS, spec.nodesets, now=0.0,
                        demand=lambda nodes: seen.append(tuple(n.name for n in nodes)) or {"gpu": 0})
    assert seen == [(name(0),)]
