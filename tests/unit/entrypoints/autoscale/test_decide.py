"""The autoscaler's decisions for one nodeset, as a table: replicas, the nodes by ordinal, the demand,
the settings and how long each node has been idle -> what it does.

Nodes are written by ordinal, one word each:
  idle        IDLE, in service, no job          alloc      ALLOCATED (a job)
  ours        IDLE+DRAIN, our scale-in reason   ours-busy  MIXED+DRAIN, our reason (a job landed after our drain)
  admin       IDLE+DRAIN, an admin's reason     health     IDLE+DRAIN, a health check's reason
  k8s         IDLE+DRAIN, k8s-sync's reason     -          no Slurm node yet (the pod is starting)
  unknown     UNKNOWN (not registered yet)      gone       IDLE+NOT_RESPONDING (its pod restarting)
  prestop     IDLE+DRAIN, preStop's reason      held-flag  IDLE+REBOOT_REQUESTED (unusable, no reason)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType

import pytest

from slurmpod import reasons
from slurmpod.entrypoints.autoscale import decide
from slurmpod.entrypoints.autoscale.decide import Kind, Slot, Timers
from slurmpod.entrypoints.autoscale.observe import NodeSetView, Scale
from slurmpod.entrypoints.cluster_spec import AutoscalingSpec, NodeShape
from slurmpod.nodestate import NodeState

STS = "slurm-worker-gpu"
NOW = 100_000.0
LONG = 10_000.0  # idle (or starting) this long: past any idleSeconds below
ADMIN = "rack 7 PSU swap (admin)"
HEALTH = "slurmpod: gpu.xid: XID 79 on GPU 0"

_WORDS: dict[str, tuple[str, frozenset[str], str]] = {
    "idle": ("IDLE", frozenset(), ""),
    "alloc": ("ALLOCATED", frozenset(), ""),
    "ours": ("IDLE", frozenset({"DRAIN"}), reasons.AUTOSCALE_SCALE_IN),
    "ours-busy": ("MIXED", frozenset({"DRAIN"}), reasons.AUTOSCALE_SCALE_IN),
    "admin": ("IDLE", frozenset({"DRAIN"}), ADMIN),
    "health": ("IDLE", frozenset({"DRAIN"}), HEALTH),
    "k8s": ("IDLE", frozenset({"DRAIN"}), "slurmpod: k8s: cordoned"),
    "unknown": ("UNKNOWN", frozenset(), ""),
    "gone": ("IDLE", frozenset({"NOT_RESPONDING"}), ""),
    "prestop": ("IDLE", frozenset({"DRAIN"}), reasons.POD_TERMINATING),
    "held-flag": ("IDLE", frozenset({"REBOOT_REQUESTED"}), ""),
}


def name(i: int) -> str:
    return f"{STS}-{i}"


def nodes(words: str) -> dict[int, NodeState]:
    out = {}
    for i, word in enumerate(words.split()):
        if word != "-":
            base, flags, reason = _WORDS[word]
            out[i] = NodeState(name(i), base, flags | {"DYNAMIC_NORM"}, reason)
    return out


def view(replicas: int, words: str = "", demand: int = 0, **settings: int) -> NodeSetView:
    s = AutoscalingSpec(enabled=True, **{"min_replicas": 0, "max_replicas": 4, "idle_seconds": 300, "step": 1,
                                         **settings})  # type: ignore[arg-type]
    return NodeSetView("gpu", STS, s, Scale(replicas, "7"), nodes(words), demand)


def timers(v: NodeSetView, idle: dict[int, float] | None = None, starting: dict[int, float] | None = None) -> Timers:
    """Every idle node and starting pod for LONG, unless ``idle``/``starting`` say otherwise (ordinal -> s)."""
    seen = decide.tick(v, Timers(), NOW)
    return Timers(
        MappingProxyType({n: NOW - (idle or {}).get(int(n.rsplit("-", 1)[1]), LONG) for n in seen.idle}),
        MappingProxyType({n: NOW - (starting or {}).get(int(n.rsplit("-", 1)[1]), LONG) for n in seen.starting}))


def summary(plan: decide.Plan) -> list[str]:
    """Decisions as "drain 3,2" or "scale_in 2", nodes by ordinal."""
    out = []
    for d in plan.decisions:
        if d.kind in (Kind.DRAIN, Kind.UNDRAIN):
            out.append(f"{d.kind.value} {','.join(n.rsplit('-', 1)[1] for n in d.nodes)}")
        else:
            out.append(f"{d.kind.value} {d.to}")
    return out


@dataclass(frozen=True)
class Case:
    replicas: int
    words: str
    demand: int
    want: list[str]
    settings: dict[str, int] = field(default_factory=dict)
    idle: dict[int, float] | None = None  # ordinal -> seconds idle (others: LONG)
    starting: dict[int, float] | None = None  # ordinal -> seconds starting (others: LONG)
    waiting: str = ""  # a fragment of the plan's `waiting`


CASES = {
    # --- scale out ---
    "zero-to-one-on-demand": Case(0, "", 3, ["scale_out 1"]),
    "zero-out-by-step": Case(0, "", 3, ["scale_out 2"], {"step": 2}),
    "step-caps-a-big-demand": Case(1, "alloc", 10, ["scale_out 3"], {"step": 2, "max_replicas": 8}),
    "max-caps-the-step": Case(3, "alloc alloc alloc", 5, ["scale_out 4"], {"step": 4}),
    "at-max-nothing-more": Case(4, "alloc alloc alloc alloc", 2, [], waiting="at maxReplicas 4: 2 more"),
    "above-max-never-grows": Case(6, "alloc alloc alloc alloc alloc alloc", 2, []),
    "starting-pods-count-as-capacity": Case(3, "alloc - unknown", 2, []),
    "starting-pods-short-of-demand": Case(3, "alloc - unknown", 3, ["scale_out 4"]),
    "a-restarting-pod-counts-as-capacity": Case(2, "alloc gone", 1, []),
    "idle-nodes-count-as-capacity": Case(2, "idle idle", 2, []),
    "no-scale-in-while-demand": Case(3, "idle idle idle", 1, []),
    "below-min-scales-out-without-demand": Case(0, "", 0, ["scale_out 2"], {"min_replicas": 2}),
    "below-min-and-demand-takes-the-larger": Case(0, "", 3, ["scale_out 3"], {"min_replicas": 1, "step": 3}),
    # --- our drains lifted when demand returns; nobody else's ---
    "demand-lifts-our-drains-first": Case(3, "alloc ours ours", 2, ["undrain 2,1"]),
    "lifted-nodes-count-before-growing": Case(3, "alloc ours ours", 3, ["undrain 2,1", "scale_out 4"]),
    "lift-a-draining-node-too": Case(3, "alloc ours-busy ours", 1, ["undrain 2,1"]),
    "admin-and-health-drains-never-lifted": Case(3, "admin health ours", 2, ["undrain 2", "scale_out 4"]),
    "k8s-drain-never-lifted": Case(2, "alloc k8s", 1, ["scale_out 3"]),
    "terminating-ordinals-above-replicas-ignored": Case(2, "alloc alloc ours ours", 1, ["scale_out 3"]),
    "our-drains-below-min-lifted": Case(3, "ours ours ours", 0, ["undrain 1,0", "scale_in 2"], {"min_replicas": 2}),
    # --- scale in: drain the highest ordinals first, lower replicas past drained idle ones ---
    "idle-long-drains-the-top-one": Case(4, "idle idle idle idle", 0, ["drain 3"], waiting="drained step"),
    "step-drains-that-many-from-the-top": Case(4, "idle idle idle idle", 0, ["drain 3,2"], {"step": 2}),
    "drained-idle-nodes-are-removed": Case(4, "idle idle ours ours", 0, ["drain 1", "scale_in 2"]),
    "to-zero": Case(2, "ours ours", 0, ["scale_in 0"]),
    "never-below-min": Case(3, "idle idle idle", 0, ["drain 2"], {"min_replicas": 2, "step": 3}),
    "never-below-min-when-drained": Case(4, "ours ours ours ours", 0, ["undrain 0", "scale_in 1"],
                                         {"min_replicas": 1}),
    "not-idle-long-enough": Case(2, "idle idle", 0, [], idle={1: 100.0}, waiting="idle for 100 s of 300 s"),
    "only-the-top-run-is-drained": Case(3, "idle alloc idle", 0, ["drain 2"], {"step": 3}, waiting="runs a job"),
    "a-busy-top-node-drains-nothing-below": Case(3, "idle idle alloc", 0, [], {"step": 3}),
    "idle-seconds-zero-drains-at-once": Case(1, "idle", 0, ["drain 0"], {"idle_seconds": 0}, idle={0: 0.0}),
    # --- a job that landed after our drain keeps its node ---
    "a-job-on-our-drained-node-keeps-it": Case(4, "idle idle ours-busy ours", 0, ["scale_in 3"],
                                               waiting="runs a job"),
    "never-below-a-node-with-a-job": Case(3, "ours alloc ours", 0, ["scale_in 2"]),
    # --- someone else's hold keeps the node and everything below it ---
    "admin-drain-at-the-top-stays": Case(2, "idle admin", 0, [], waiting="held for another reason"),
    "health-drain-at-the-top-stays": Case(2, "ours health", 0, [], waiting="held for another reason"),
    "unusable-flag-stays": Case(2, "ours held-flag", 0, []),
    "k8s-drained-idle-node-is-removed": Case(2, "idle k8s", 0, ["drain 0", "scale_in 1"]),
    # --- a pod that never registers ---
    "a-starting-pod-stays-a-while": Case(2, "idle -", 0, [], starting={1: 10.0}, waiting="is starting"),
    "a-pod-starting-past-idle-seconds-is-removed": Case(2, "idle -", 0, ["drain 0", "scale_in 1"]),
    "prestop-and-not-responding-are-starting": Case(3, "alloc prestop gone", 0, [], starting={1: 5.0, 2: 5.0}),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_plan(case: Case) -> None:
    v = view(case.replicas, case.words, case.demand, **case.settings)
    plan = decide.plan(v, timers(v, case.idle, case.starting), NOW)
    assert summary(plan) == case.want
    assert case.waiting in plan.waiting
    assert (plan.nodeset, plan.stateful_set, plan.replicas, plan.resource_version) == ("gpu", STS, case.replicas, "7")


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_invariants(case: Case) -> None:
    """Whatever the input: never above max by our hand, never below min, never past a node with a job
    or someone else's hold, never a drain while demand waits, and only our own drains lifted."""
    v = view(case.replicas, case.words, case.demand, **case.settings)
    plan = decide.plan(v, timers(v, case.idle, case.starting), NOW)
    s = v.settings
    out, scale_in = plan.of(Kind.SCALE_OUT), plan.of(Kind.SCALE_IN)
    if out is not None:
        assert out.to > v.replicas and out.to <= max(s.max_replicas, s.min_replicas)
    if scale_in is not None:
        assert v.demand == 0 and s.min_replicas <= scale_in.to < v.replicas
        for i in range(scale_in.to, v.replicas):
            node = v.nodes.get(i)
            assert node is None or not node.busy
            assert node is None or reasons.owner(node.reason) not in (reasons.Owner.OTHER, reasons.Owner.HEALTH)
    if v.demand > 0:
        assert plan.of(Kind.DRAIN) is None
    for n in (plan.of(Kind.UNDRAIN) or decide.Decision(Kind.UNDRAIN, "")).nodes:
        assert next(x for x in v.nodes.values() if x.name == n).reason == reasons.AUTOSCALE_SCALE_IN


def test_the_plan_is_a_pure_function_of_its_input() -> None:
    v = view(4, "idle idle ours ours")
    t = timers(v)
    assert decide.plan(v, t, NOW) == decide.plan(v, t, NOW)


def test_the_idle_timer_resets_when_a_node_gets_a_job() -> None:
    """Idle 250 s, then a job, then idle again: the 300 s count starts over."""
    t = Timers()
    t = decide.tick(view(1, "idle"), t, NOW)
    t = decide.tick(view(1, "idle"), t, NOW + 250)
    assert t.idle == {name(0): NOW}
    t = decide.tick(view(1, "alloc"), t, NOW + 260)
    assert t.idle == {}
    t = decide.tick(view(1, "idle"), t, NOW + 270)
    assert t.idle == {name(0): NOW + 270}
    assert decide.plan(view(1, "idle"), t, NOW + 569).decisions == ()
    assert summary(decide.plan(view(1, "idle"), t, NOW + 570)) == ["drain 0"]


WALL = 1_800_000_000.0  # the time since the epoch at NOW


def _busy(v: NodeSetView, ordinal: int, last_busy: float) -> NodeSetView:
    nodes = dict(v.nodes)
    nodes[ordinal] = replace(nodes[ordinal], last_busy=int(last_busy))
    return replace(v, nodes=MappingProxyType(nodes))


def test_a_node_first_seen_idle_counts_from_its_last_busy_time() -> None:
    """A restarted autoscaler: slurmctld says the node has had no job for 400 s, past idleSeconds (300),
    so the first pass drains it instead of waiting 300 s more."""
    v = _busy(view(1, "idle"), 0, WALL - 400)
    t = decide.tick(v, Timers(), NOW, WALL)
    assert t.idle == {name(0): NOW - 400}
    assert summary(decide.plan(v, t, NOW)) == ["drain 0"]
    assert decide.plan(v, decide.tick(v, Timers(), NOW), NOW).decisions == ()  # no wall clock: it waits


@pytest.mark.parametrize(("last_busy", "since"), [(0, NOW), (WALL + 3600, NOW), (WALL - 100, NOW - 100)],
                         ids=["none", "in-the-future", "recent"])
def test_a_last_busy_time_never_counts_more_than_it_says(last_busy: float, since: float) -> None:
    v = _busy(view(1, "idle"), 0, last_busy)
    t = decide.tick(v, Timers(), NOW, WALL)
    assert t.idle == {name(0): since}
    assert decide.plan(v, t, NOW).decisions == ()


def test_a_node_seen_idle_before_keeps_its_timer_whatever_its_last_busy_time() -> None:
    v = _busy(view(1, "idle"), 0, WALL - 5000)
    t = decide.tick(v, Timers(MappingProxyType({name(0): NOW - 10})), NOW, WALL)
    assert t.idle == {name(0): NOW - 10}


def test_a_starting_pod_keeps_its_start_and_loses_it_once_registered() -> None:
    t = decide.tick(view(2, "idle -"), Timers(), NOW)
    t = decide.tick(view(2, "idle unknown"), t, NOW + 50)
    assert t.starting == {name(1): NOW}
    t = decide.tick(view(2, "idle idle"), t, NOW + 60)
    assert t.starting == {} and t.idle == {name(0): NOW, name(1): NOW + 60}


def test_only_ordinals_below_replicas_are_timed() -> None:
    t = decide.tick(view(1, "idle idle ours"), Timers(), NOW)
    assert set(t.idle) == {name(0)} and t.starting == {}


# --- placeholders: FUTURE records for the ordinals without a pod ---

SHAPE = NodeShape(cpus=8, real_memory_mib=65536, gpus=4)


def _with(v: NodeSetView, shape: NodeShape = SHAPE, future: tuple[int, ...] = ()) -> NodeSetView:
    """``v`` with a shape, and FUTURE placeholders at ``future`` ordinals."""
    extra = {i: NodeState(name(i), "FUTURE", frozenset({"DYNAMIC_NORM"})) for i in future}
    return replace(v, shape=shape, nodes={**v.nodes, **extra})


@pytest.mark.parametrize(
    ("replicas", "words", "future", "demand", "made"),
    [
        (0, "", (), 0, (0, 1, 2, 3)),  # a new nodeset at zero: every ordinal up to max gets one
        (0, "", (0, 1, 2, 3), 0, ()),  # they exist: nothing to do
        (0, "", (0, 1, 2, 3), 3, ()),  # a scale-out leaves them to the pods it starts
        (2, "idle idle", (3,), 0, (2,)),  # a gap above the pods is filled
        (1, "alloc", (1, 2, 3), 5, ()),  # and none is made below the new replicas
    ],
    ids=["new-at-zero", "already-there", "scale-out-keeps-them", "gap-filled", "none-below-the-new-replicas"],
)
def test_placeholders(replicas: int, words: str, future: tuple[int, ...], demand: int, *,
                      made: tuple[int, ...]) -> None:
    v = _with(view(replicas, words, demand), future=future)
    p = decide.plan(v, timers(v), NOW)
    assert p.placeholders == tuple(name(i) for i in made)


def test_scale_in_leaves_the_removed_ordinals_to_a_later_pass() -> None:
    """The drained nodes above the new replicas still have records (their pods are stopping): no placeholder
    until the record is gone."""
    v = _with(view(2, "ours ours", 0))
    p = decide.plan(v, timers(v), NOW)
    assert p.of(Kind.SCALE_IN) is not None and p.of(Kind.SCALE_IN).to == 0
    assert p.placeholders == (name(2), name(3))


def test_an_unknown_shape_makes_no_placeholder() -> None:
    v = _with(view(0, "", 0), shape=NodeShape())
    assert decide.plan(v, timers(v), NOW).placeholders == ()


@pytest.mark.parametrize("refused", [False, True], ids=["not-yet-registered", "registration-refused"])
def test_a_placeholder_below_the_replicas_is_a_pod_starting(refused: bool) -> None:
    """Its pod's reconcile-node replaces it; it counts as starting, so nothing more is started for the
    demand it will serve. One that refused the pod's registration is drained by slurmctld with its own
    reason (FUTURE+DRAIN+INVALID_REG): still a pod starting, not someone's hold."""
    v = _with(view(1, "", 1), future=(0,))
    if refused:
        state = NodeState(name(0), "FUTURE", frozenset({"DYNAMIC_NORM", "DRAIN", "INVALID_REG"}), "CoreSpec differ")
        v = replace(v, nodes={**v.nodes, 0: state})
    assert decide.slot(v.nodes[0]) is Slot.STARTING
    p = decide.plan(v, timers(v, starting={0: 0.0}), NOW)
    assert p.of(Kind.SCALE_OUT) is None and name(0) not in p.placeholders
