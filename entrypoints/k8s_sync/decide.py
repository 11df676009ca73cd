"""The decisions of one k8s-sync pass: a pure function of the snapshot, the settings and the budget.

Kubernetes -> Slurm, per worker pod and the Kubernetes node it runs on:
- cordoned, or NotReady (or Unknown) past the grace period: drain its Slurm node with
  ``slurmpod: k8s: <why>``; while the cause lasts, drain again if someone lifted it;
- the cause gone (and Ready for the settle period): lift that drain;
- a reason anyone else set (an admin's, a health check's, preStop's, Slinky's) is never changed;
- a node whose state is unknown (no Ready condition, no Node object, no Slurm record) is left as it is.
Slurm -> Kubernetes:
- the pod's label and condition carry its Slurm state: allocated (jobs on it, drained or not), down,
  drained, idle. The chart's PodDisruptionBudget protects the allocated ones;
- remediation, each only when its setting is on and within the budget: a drained idle node whose
  health reason says "restart pod" has its pod deleted (once per fault: the same reason on the same
  node, kept in budget.Budget);
  one whose reason says "replace node" has its Kubernetes node tainted NoSchedule and given a
  condition naming the check and the worker. The taint is lifted once a worker on that node is back
  in service, by the k8s-sync whose worker the condition names (never another release's).
Ref: https://kubernetes.io/docs/concepts/architecture/nodes/#condition
Ref: https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/
Ref: https://slurm.schedmd.com/scontrol.html#OPT_State_1 (DRAIN, RESUME)
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from slurmpod import reasons
from slurmpod import well_known as wk
from slurmpod.entrypoints.cluster_spec import K8sSyncSpec
from slurmpod.entrypoints.k8s_sync.observe import KubeNode, Snapshot, WorkerPod
from slurmpod.kube.seam import Condition, Taint
from slurmpod.nodestate import NodeState

NOT_READY = "node not ready"
CORDONED = "cordoned"
TAINT_EFFECT = "NoSchedule"  # keeps new pods off; evicts nothing (the worker is idle and drained already)
CONDITION_MESSAGE_MAX = 512


class State(enum.StrEnum):
    """The value of the worker pod's label slurmpod.io/slurm-state."""

    IDLE = "idle"
    ALLOCATED = "allocated"
    DRAINED = "drained"
    DOWN = "down"


@dataclass(frozen=True, slots=True)
class Drain:
    pod: WorkerPod
    reason: str
    cause: str
    was: str  # the node's reason before: "" or an older reason of ours


@dataclass(frozen=True, slots=True)
class Undrain:
    pod: WorkerPod
    reason: str  # the reason lifted
    cause: str


@dataclass(frozen=True, slots=True)
class Mirror:
    pod: WorkerPod
    state: State
    label: bool  # the label differs
    condition: Condition | None  # the condition to write, when it differs


@dataclass(frozen=True, slots=True)
class DeletePod:
    pod: WorkerPod
    reason: str  # the health reason that asks for it


@dataclass(frozen=True, slots=True)
class SetTaints:
    node: KubeNode
    taints: tuple[Taint, ...]  # the node's whole new list
    condition: Condition | None
    cause: str
    budgeted: bool  # counts against the remediation budget (adding; lifting never does)


@dataclass(frozen=True, slots=True)
class NodeCondition:
    node: KubeNode
    condition: Condition
    cause: str


Action = Drain | Undrain | Mirror | DeletePod | SetTaints | NodeCondition


@dataclass(frozen=True, slots=True)
class Plan:
    actions: tuple[Action, ...]
    deferred: tuple[str, ...] = field(default=())  # remediations the budget held back, by object name


class _Keep:
    """The cause is uncertain (unknown Ready, or settling): neither drain nor lift."""


KEEP = _Keep()


def state_of(node: NodeState) -> State:
    """Busy first: a node running jobs is allocated even when drained or not responding."""
    if node.busy:
        return State.ALLOCATED
    if node.down or node.not_responding:
        return State.DOWN
    if node.drained:
        return State.DRAINED
    if node.base == "IDLE":
        return State.IDLE
    return State.DOWN  # UNKNOWN, FUTURE: not taking jobs


def _condition_reason(node: NodeState, state: State) -> str:
    if state is State.ALLOCATED and node.drained:
        return "Draining"
    return state.value.capitalize()


def pod_condition(node: NodeState) -> Condition:
    state = state_of(node)
    status = "False" if node.held or node.not_responding else "True"
    shown = node if node.held else dataclasses.replace(node, reason="")  # a stale reason holds nothing
    return Condition(wk.CONDITION_SLURM_NODE, status, _condition_reason(node, state),
                     str(shown)[:CONDITION_MESSAGE_MAX])


def cause(node: KubeNode, slurm: NodeState, now: float, s: K8sSyncSpec) -> str | _Keep | None:
    """What the Kubernetes node's state asks of its workers' Slurm nodes: a drain for this reason (str),
    no drain of ours (None), or leave things as they are (KEEP)."""
    if node.unschedulable:
        return f"{CORDONED}: {node.cordon_reason}" if node.cordon_reason.strip() else CORDONED
    ready = node.ready
    if ready.status not in ("True", "False", "Unknown") or ready.since <= 0:
        return KEEP  # no Ready condition yet, or no time for it: unknown
    ours_not_ready = holding_reason(slurm) == reasons.k8s(NOT_READY)
    if ready.status != "True":
        if now - ready.since >= s.not_ready_grace_seconds:
            return NOT_READY
        return KEEP if ours_not_ready else None
    if ours_not_ready and now - ready.since < s.ready_settle_seconds:
        return KEEP  # Ready again only just: a flapping node stays drained until it has settled
    return None


def holding_reason(slurm: NodeState) -> str:
    """The reason that holds the node out of service; "" for a node in service. Without accounting,
    slurmctld 24.11 keeps the old reason text after RESUME (clusteracct_storage_g_node_up() clears it
    only with an accounting plugin), so a reason alone says nothing."""
    return slurm.reason if slurm.held else ""


def _drain_or_lift(pod: WorkerPod, node: KubeNode, slurm: NodeState, now: float,
                   s: K8sSyncSpec) -> Drain | Undrain | None:
    want = cause(node, slurm, now, s)
    if isinstance(want, _Keep):
        return None
    current = holding_reason(slurm)
    owner = reasons.owner(current)
    if want is None:
        if owner is reasons.Owner.K8S:
            return Undrain(pod, current, f"node {node.name} schedulable and Ready")
        return None
    reason = reasons.k8s(want)
    # The autoscaler's scale-in drain yields to ours: its lift on returning demand must not put a node
    # on a cordoned or NotReady Kubernetes node back in service.
    if owner in (reasons.Owner.NONE, reasons.Owner.AUTOSCALE) or (owner is reasons.Owner.K8S and current != reason):
        return Drain(pod, reason, f"node {node.name} {want}", current)
    return None  # held for someone else's reason: theirs to lift


def _mirror(pod: WorkerPod, slurm: NodeState) -> Mirror | None:
    state = state_of(slurm)
    want = pod_condition(slurm)
    have = pod.conditions.get(wk.CONDITION_SLURM_NODE)
    label = pod.labels.get(wk.LABEL_SLURM_STATE) != state.value
    condition = None if have == want else want
    return Mirror(pod, state, label, condition) if label or condition else None


def _idle_drained(slurm: NodeState) -> bool:
    return slurm.drained and not slurm.busy


def _camel(check: str) -> str:
    return "".join(part.capitalize() for part in check.replace("-", ".").replace("_", ".").split(".") if part)


def _fault_condition(check: str, reason: str) -> Condition:
    return Condition(wk.CONDITION_HARDWARE_FAULT, "True", _camel(check) or "HealthCheck",
                     reason[:CONDITION_MESSAGE_MAX])


def _ours(condition: Condition | None, members: Sequence[tuple[WorkerPod, NodeState]]) -> bool:
    """The node's fault condition names one of this release's workers: this k8s-sync set it. Another
    release's workers on the same machine never lift it."""
    return condition is not None and any(condition.message.startswith(f"{p.namespace}/{p.name}: ")
                                         for p, _ in members)


def _node_taints(node: KubeNode, members: Sequence[tuple[WorkerPod, NodeState]],
                 s: K8sSyncSpec) -> list[SetTaints | NodeCondition]:
    faulty = [(p, n) for p, n in members if reasons.remediation_of(n.reason) == "replace_node" and _idle_drained(n)]
    ours = [t for t in node.taints if t.key == wk.TAINT_HARDWARE_FAULT]
    others = tuple(t for t in node.taints if t.key != wk.TAINT_HARDWARE_FAULT)
    have = node.conditions.get(wk.CONDITION_HARDWARE_FAULT)
    if faulty:
        pod, slurm = faulty[0]
        check = reasons.health_check_of(slurm.reason) or "health"
        want = _fault_condition(check, f"{pod.namespace}/{pod.name}: {slurm.reason}")
        if not ours and s.replace_node:
            return [SetTaints(node, (*others, Taint(wk.TAINT_HARDWARE_FAULT, check, TAINT_EFFECT)), want,
                              f"worker {pod.name} drained and idle: {slurm.reason}", budgeted=True)]
        if ours and (have is None or have.status != "True"):
            return [NodeCondition(node, want, f"worker {pod.name}: {slurm.reason}")]
        return []
    in_service = any(n.registered and not n.held for _p, n in members)
    if ours and in_service and have is not None and have.status == "True" and _ours(have, members):
        lifted = Condition(wk.CONDITION_HARDWARE_FAULT, "False", "Repaired",
                           "a worker on this node is back in Slurm service")
        return [SetTaints(node, others, lifted, "a worker on the node is back in service", budgeted=False)]
    return []


def plan(snap: Snapshot, s: K8sSyncSpec, budget_left: int,
         restarted: Mapping[str, str] | None = None) -> Plan:
    """``restarted``: node -> the reason a pod was already deleted for (never twice for one fault)."""
    done = restarted or {}
    syncs: list[Action] = []
    mirrors: list[Action] = []
    remedies: list[tuple[str, Action]] = []
    by_node: dict[str, list[tuple[WorkerPod, NodeState]]] = {}
    for pod in snap.pods:
        slurm = snap.slurm.get(pod.name)
        node = snap.nodes.get(pod.node_name) if pod.node_name else None
        if slurm is None:
            continue  # not registered (yet): nothing to say about it
        if node is not None:
            by_node.setdefault(node.name, []).append((pod, slurm))
            sync = _drain_or_lift(pod, node, slurm, snap.now, s)
            if sync is not None:
                syncs.append(sync)
        mirror = _mirror(pod, slurm)
        if mirror is not None:
            mirrors.append(mirror)
        if (s.restart_pod and reasons.remediation_of(slurm.reason) == "restart_pod" and _idle_drained(slurm)
                and not pod.deleting and done.get(pod.name) != slurm.reason):
            remedies.append((pod.name, DeletePod(pod, slurm.reason)))
    for name in sorted(by_node):
        remedies.extend((name, step) for step in _node_taints(snap.nodes[name], by_node[name], s))
    actions: list[Action] = [*syncs, *mirrors]
    deferred: list[str] = []
    for name, step in remedies:
        costly = isinstance(step, DeletePod) or (isinstance(step, SetTaints) and step.budgeted)
        if costly and budget_left <= 0:
            deferred.append(name)
            continue
        budget_left -= 1 if costly else 0
        actions.append(step)
    return Plan(tuple(actions), tuple(deferred))
