"""The autoscaler's decisions for one nodeset, from one pass's snapshot. Pure: no I/O, no clock.

A StatefulSet removes its highest ordinals first when its replicas are lowered, whether their pods are
busy or not, and the PodDisruptionBudget does not apply to a scale-down. So replicas are lowered only
past nodes that hold no job: idle nodes are drained first (highest ordinals first, at most ``step`` per
pass) with `slurmpod: autoscale: scale-in`, and replicas come down on a later pass, once those nodes are
seen DRAINED with no job. A job that landed meanwhile keeps its node: replicas stay above it.
Ref: https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/#deployment-and-scaling-guarantees
Ref: https://kubernetes.io/docs/concepts/workloads/pods/disruptions/#pod-disruption-budgets
Ref: https://slurm.schedmd.com/sinfo.html#SECTION_NODE-STATE-CODES (DRAINING: jobs still run; DRAINED: none)

Rules, per nodeset with R replicas and a demand of D nodes:
- R below minReplicas: scale out to minReplicas.
- D > 0: lift our scale-in drains on nodes below R; then, if D is more than the nodes idle, starting
  or just lifted, scale out by at most ``step`` and never above maxReplicas. Nothing is removed.
- D == 0: from the top ordinal down to minReplicas, drain nodes idle for idleSeconds (at most ``step``),
  and lower replicas to just above the highest node that must stay: one with a job, one held for
  someone else's reason (an admin's, a health check's), one not idle long enough, or a pod still
  starting. A pod that has not registered in Slurm for idleSeconds is removed like an idle node (it
  serves nothing: no Kubernetes node to run on, or a slurmd that never starts).
- Our drains below minReplicas are lifted: those nodes are never removed.

Placeholders: Slurm knows a nodeset's nodes only while their pods run, so at zero replicas a job for it
would be refused ("Requested node configuration is not available"). Every ordinal from the replicas up
to maxReplicas with no Slurm record gets a FUTURE placeholder of the nodeset's shape: jobs are then
accepted and wait (ReqNodeNotAvail) until the autoscaler starts their pods. A scale-out leaves the
placeholders of the pods it starts in place: each pod deletes its own just before its slurmd starts
(daemons.claim_placeholder), so the partition keeps every record while the pods are scheduled and start
(docs/autoscaling.md).
Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_FUTURE, https://slurm.schedmd.com/dynamic_nodes.html
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from slurmpod import reasons
from slurmpod.entrypoints.autoscale.observe import NodeSetView
from slurmpod.nodestate import NodeState

REASON = reasons.AUTOSCALE_SCALE_IN


class Kind(enum.StrEnum):
    """What a decision does; the counters' and the exporter's `action` label."""

    SCALE_OUT = "scale_out"
    DRAIN = "drain"
    UNDRAIN = "undrain"
    SCALE_IN = "scale_in"


class Slot(enum.Enum):
    """What a pod below the replicas is to the autoscaler."""

    STARTING = "starting"  # no Slurm node yet, not registered, or its pod restarting: may serve soon
    IDLE = "idle"  # in service with no job
    BUSY = "busy"  # a job holds it (drained or not)
    OURS = "ours"  # drained by the autoscaler, no job: may be removed
    YIELDED = "yielded"  # drained by k8s-sync (its Kubernetes node cordoned or NotReady), no job: may be removed
    HELD = "held"  # held for someone else's reason (an admin's, a health check's) or unusable: stays


REMOVABLE = frozenset({Slot.OURS, Slot.YIELDED})


@dataclass(frozen=True, slots=True)
class Decision:
    kind: Kind
    why: str
    nodes: tuple[str, ...] = ()  # drain, undrain: the Slurm nodes, highest ordinal first
    to: int = 0  # scale_out, scale_in: the new replicas


@dataclass(frozen=True, slots=True)
class Plan:
    nodeset: str
    stateful_set: str
    replicas: int  # as read
    resource_version: str  # the Scale's, the precondition of a change
    decisions: tuple[Decision, ...] = ()  # in the order they are carried out
    waiting: str = ""  # why no more is done, for the log; "" when there is nothing to say
    placeholders: tuple[str, ...] = ()  # FUTURE records made for ordinals that have no pod and no record

    def of(self, kind: Kind) -> Decision | None:
        return next((d for d in self.decisions if d.kind is kind), None)


@dataclass(frozen=True, slots=True)
class Timers:
    """When each node was first seen idle, and each pod first seen starting (monotonic seconds)."""

    idle: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    starting: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))


def slot(node: NodeState | None) -> Slot:
    if node is None or node.placeholder:
        # No record yet, or its placeholder, which the pod deletes before its slurmd starts, or reconcile-node
        # after slurmctld refused slurmd against it (drained with slurmctld's own reason: no one's hold).
        return Slot.STARTING
    if node.busy:
        return Slot.BUSY
    owner = reasons.owner(node.reason)
    if reasons.autoscale_may_lift(node):
        return Slot.OURS
    if node.held and owner is reasons.Owner.K8S:
        return Slot.YIELDED
    if node.held and owner in (reasons.Owner.OTHER, reasons.Owner.HEALTH):
        return Slot.HELD
    if not node.registered or node.held:
        # Held by preStop's reason or slurmctld's "Not responding", or not registered yet: a pod
        # (re)starting; its new slurmd lifts the one, the node-reaper deletes the other.
        return Slot.STARTING
    return Slot.IDLE if node.usable_idle else Slot.HELD


def _ours(node: NodeState | None) -> bool:
    """Drained by the autoscaler, with a job on it or not."""
    return node is not None and reasons.autoscale_may_lift(node)


def tick(view: NodeSetView, before: Timers, now: float, wall: float | None = None) -> Timers:
    """The timers after this pass: an idle node keeps the time it was first seen idle, and a starting pod
    the time it was first seen starting; any other state (a job, a drain) forgets it. With ``wall`` (the
    time since the epoch at ``now``), a node first seen idle counts from its LastBusyTime, when slurmctld
    has one: a restarted autoscaler does not wait a whole idleSeconds again."""
    idle: dict[str, float] = {}
    starting: dict[str, float] = {}
    for i in range(view.replicas):
        name = view.node_name(i)
        node = view.nodes.get(i)
        match slot(node):
            case Slot.IDLE:
                idle[name] = before.idle.get(name, _idle_since(node, now, wall))
            case Slot.STARTING:
                starting[name] = before.starting.get(name, now)
            case _:
                pass
    return Timers(MappingProxyType(idle), MappingProxyType(starting))


def _idle_since(node: NodeState | None, now: float, wall: float | None) -> float:
    """When ``node`` went idle, on the monotonic clock: its LastBusyTime where it has one (never in the
    future, whatever the clocks say), else now."""
    if wall is None or node is None or node.last_busy <= 0:
        return now
    return now - max(0.0, wall - node.last_busy)


def plan(view: NodeSetView, timers: Timers, now: float) -> Plan:
    """``timers``: as ``tick`` returned them for this pass."""
    s, r = view.settings, view.replicas
    slots = {i: slot(view.nodes.get(i)) for i in range(r)}
    decisions: list[Decision] = []
    lift = [i for i in range(r) if _ours(view.nodes.get(i)) and (view.demand > 0 or i < s.min_replicas)]
    if lift:
        why = (f"{view.demand} nodes pending" if view.demand > 0 else f"below minReplicas {s.min_replicas}")
        decisions.append(Decision(Kind.UNDRAIN, why, tuple(view.node_name(i) for i in reversed(lift))))
    waiting = ""
    if view.demand > 0 or r < s.min_replicas:
        decisions_out, waiting = _scale_out(view, slots, len([i for i in lift if slots[i] is Slot.OURS]))
        decisions.extend(decisions_out)
    else:
        decisions_in, waiting = _scale_in(view, slots, timers, now)
        decisions.extend(decisions_in)
    out = next((d.to for d in decisions if d.kind is Kind.SCALE_OUT), r)
    after = min(next((d.to for d in decisions if d.kind is Kind.SCALE_IN), out), r)
    make = tuple(view.node_name(i) for i in range(max(after, out), s.max_replicas)
                 if i not in view.nodes) if view.shape.known else ()
    return Plan(view.name, view.stateful_set, r, view.scale.resource_version, tuple(decisions), waiting, make)


def _scale_out(view: NodeSetView, slots: Mapping[int, Slot], lifted: int) -> tuple[list[Decision], str]:
    s, r = view.settings, view.replicas
    free = sum(1 for state in slots.values() if state in (Slot.IDLE, Slot.STARTING)) + lifted
    needed = view.demand - free
    target = max(r, s.min_replicas)
    why = f"below minReplicas {s.min_replicas}"
    if needed > 0:
        grown = min(s.max_replicas, r + min(s.step, needed))
        if grown > target:
            target, why = grown, f"{view.demand} nodes pending, {free} idle or starting"
    waiting = ""
    if needed > 0 and target < r + needed and target >= s.max_replicas:
        waiting = f"at maxReplicas {s.max_replicas}: {needed} more nodes pending"
    if target > r:
        return [Decision(Kind.SCALE_OUT, why, to=target)], waiting
    return [], waiting


def _scale_in(view: NodeSetView, slots: Mapping[int, Slot], timers: Timers,
              now: float) -> tuple[list[Decision], str]:
    """Walk down from the top ordinal: removable nodes are passed, long-idle ones drained (at most
    ``step``); the first node that must stay ends the walk, and replicas come down to just above it."""
    s, r = view.settings, view.replicas
    drain: list[str] = []
    kept: int | None = None  # the highest ordinal that stays
    waiting = ""
    for i in range(r - 1, s.min_replicas - 1, -1):
        name, state = view.node_name(i), slots[i]
        if state in REMOVABLE or (state is Slot.STARTING and _for(timers.starting, name, now) >= s.idle_seconds):
            continue
        idle_for = _for(timers.idle, name, now)
        if state is Slot.IDLE and idle_for >= s.idle_seconds and len(drain) < s.step:
            drain.append(name)
            kept = i if kept is None else kept
            continue
        kept = i if kept is None else kept
        waiting = _why_kept(name, state, idle_for, s.idle_seconds, len(drain) >= s.step)
        break
    decisions = []
    if drain:
        decisions.append(Decision(Kind.DRAIN, f"nothing pending, idle for {s.idle_seconds} s or more", tuple(drain)))
    to = max(s.min_replicas, 0 if kept is None else kept + 1)
    if to < r:
        decisions.append(Decision(Kind.SCALE_IN, "nothing pending; the nodes above are drained with no job", to=to))
    return decisions, waiting


def _for(since: Mapping[str, float], name: str, now: float) -> float:
    """How long the timer has run; -1 when it has not started."""
    start = since.get(name)
    return -1.0 if start is None else now - start


def _why_kept(name: str, state: Slot, idle_for: float, idle_seconds: int, step_used: bool) -> str:
    match state:
        case Slot.BUSY:
            return f"{name} runs a job"
        case Slot.HELD:
            return f"{name} is held for another reason than ours (an admin's, a health check's), or unusable"
        case Slot.STARTING:
            return f"{name} is starting"
        case Slot.IDLE if step_used:
            return f"{name}: this pass drained step nodes already"
        case _:
            return f"{name} idle for {max(0.0, idle_for):.0f} s of {idle_seconds} s"
