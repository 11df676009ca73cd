"""One model of a Slurm node's state, shared by the pod runtime, the health checks and the emulator.

Slurm reports a node's state as one base state plus flags (`scontrol show nodes --json` gives a list
such as ["IDLE", "DRAIN", "DYNAMIC_NORM"]; the text form joins them with '+': IDLE+DRAIN).
Ref: https://slurm.schedmd.com/sinfo.html#SECTION_NODE-STATE-CODES
Ref: https://slurm.schedmd.com/rest_api.html#v0.0.42_node (the schema `--json` prints)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from slurmpod.errors import TransientError

# Ref: https://slurm.schedmd.com/sinfo.html#SECTION_NODE-STATE-CODES (base states)
BASE_STATES = frozenset({"UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE"})
# Base states in which a node can run jobs.
WORKING_STATES = frozenset({"IDLE", "ALLOCATED", "MIXED"})
# DRAIN is the flag; DRAINING/DRAINED are the names sinfo derives from it, accepted from text output.
DRAIN_FLAGS = frozenset({"DRAIN", "DRAINING", "DRAINED"})
# Flags that keep a node from taking new jobs.
UNUSABLE_FLAGS = DRAIN_FLAGS | frozenset({
    "NOT_RESPONDING", "FAIL", "FAILING", "INVALID_REG", "INVALID", "POWERED_DOWN", "POWERING_DOWN",
    "POWERING_UP", "REBOOT_REQUESTED", "REBOOT_ISSUED", "MAINTENANCE",
})
# Ref: https://slurm.schedmd.com/dynamic_nodes.html (DYNAMIC_NORM: registered with slurmd -Z)
DYNAMIC_FLAGS = frozenset({"DYNAMIC_NORM", "DYNAMIC_FUTURE"})


@dataclass(frozen=True, slots=True)
class NodeState:
    """A node as slurmctld reports it."""

    name: str
    base: str
    flags: frozenset[str] = frozenset()
    reason: str = ""
    reason_user: str = ""  # reason_set_by_user: who set the reason
    reason_time: int = 0  # reason_changed_at: when the reason was set, seconds since the epoch
    cpus: int = 0
    real_memory: int = 0  # MiB
    specialized_cores: int = 0  # CoreSpecCount
    specialized_memory: int = 0  # MemSpecLimit, MiB
    features: tuple[str, ...] = ()
    active_features: tuple[str, ...] = ()
    gres: str = ""
    # The node's Extra data: the JSON text `slurmd --extra` registered (or `scontrol update extra=`).
    # Ref: https://slurm.schedmd.com/extra_constraints.html#SECTION_NODE-EXTRA-DATA
    extra: str = ""
    # The node's `Topology=` value, "topo:unit" (25.05+; empty when it has none or its unit was unknown).
    # Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_Topology
    topology: str = ""
    # LastBusyTime: when the node last had a job, seconds since the epoch; 0 when slurmctld has none. It
    # is in slurmctld's saved state (24.05+), so it outlives a restart of slurmctld or of its readers.
    # Ref: https://slurm.schedmd.com/scontrol.html (LastBusyTime), https://slurm.schedmd.com/power_save.html
    last_busy: int = 0

    @property
    def dynamic(self) -> bool:
        return bool(self.flags & DYNAMIC_FLAGS)

    @property
    def drained(self) -> bool:
        """DRAIN set: no new jobs; running ones finish (DRAINING) or none left (DRAINED)."""
        return bool(self.flags & DRAIN_FLAGS)

    @property
    def down(self) -> bool:
        return self.base == "DOWN" or "FAIL" in self.flags

    @property
    def not_responding(self) -> bool:
        return "NOT_RESPONDING" in self.flags

    @property
    def busy(self) -> bool:
        """Jobs hold the node: allocated (all or part), or a job's epilog still running on it."""
        return self.base in {"ALLOCATED", "MIXED"} or "COMPLETING" in self.flags

    @property
    def held(self) -> bool:
        """Kept out of service by a drain or a DOWN state (each comes with a reason)."""
        return self.drained or self.down

    @property
    def usable(self) -> bool:
        """Can take new jobs now: a working base state and no flag that forbids it."""
        return self.base in WORKING_STATES and not (self.flags & UNUSABLE_FLAGS)

    @property
    def usable_idle(self) -> bool:
        return self.base == "IDLE" and self.usable

    @property
    def placeholder(self) -> bool:
        """A FUTURE record no slurmd has taken: the autoscaler's stand-in for a pod that does not run yet
        (one that refused a pod's registration included). Ref: https://slurm.schedmd.com/dynamic_nodes.html"""
        return self.base == "FUTURE"

    @property
    def registered(self) -> bool:
        """slurmd has registered and answers: the node is past UNKNOWN/FUTURE and responding."""
        return self.base not in {"UNKNOWN", "FUTURE"} and not self.not_responding

    def __str__(self) -> str:
        text = "+".join([self.base, *sorted(self.flags - DYNAMIC_FLAGS)])
        return f"{text} ({self.reason})" if self.reason else text


def split_state(raw: object) -> tuple[str, frozenset[str]]:
    """A JSON state list, or text such as 'IDLE+DRAIN', -> (base, flags)."""
    items = raw if isinstance(raw, list) else str(raw).split("+")
    parts = [str(p).upper() for p in items if p]
    base = next((p for p in parts if p in BASE_STATES), "UNKNOWN")
    return base, frozenset(p for p in parts if p != base)


def number(value: Any) -> int:
    """Slurm's JSON wraps some numbers as {"set": bool, "infinite": bool, "number": n}."""
    if isinstance(value, dict):
        return int(value.get("number", 0) or 0) if value.get("set", True) else 0
    return int(value or 0)


def load_json(text: str, what: str) -> dict[str, Any]:
    """A Slurm --json document; output that is not one (a crash, a half write) is a TransientError."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TransientError(f"{what} printed no JSON ({exc.msg}): {text[:200]!r}") from None
    if not isinstance(doc, dict):
        raise TransientError(f"{what} printed JSON that is not an object: {text[:200]!r}")
    return doc


def from_json(node: dict[str, Any]) -> NodeState:
    base, flags = split_state(node.get("state", "UNKNOWN"))
    features, active = (_names(node.get(key)) for key in ("features", "active_features"))
    return NodeState(
        name=str(node.get("name", "")),
        base=base,
        flags=flags,
        reason=str(node.get("reason", "") or ""),
        reason_user=str(node.get("reason_set_by_user", "") or ""),
        reason_time=number(node.get("reason_changed_at", 0)),
        cpus=number(node.get("cpus", 0)),
        real_memory=number(node.get("real_memory", 0)),
        specialized_cores=number(node.get("specialized_cores", 0)),
        specialized_memory=number(node.get("specialized_memory", 0)),
        features=features,
        active_features=active,
        gres=str(node.get("gres", "") or ""),
        extra=str(node.get("extra", "") or ""),
        topology=str(node.get("topology", "") or ""),
        last_busy=number(node.get("last_busy", 0)),
    )


def _names(value: Any) -> tuple[str, ...]:
    """A feature list: JSON's list, or the comma-separated string older data_parsers print."""
    if isinstance(value, str):
        return tuple(f for f in value.split(",") if f)
    return tuple(str(f) for f in value or [])


def parse_nodes(text: str) -> tuple[NodeState, ...]:
    """Nodes of a `scontrol show nodes --json` document; TransientError when it is not one."""
    doc = load_json(text, "scontrol show nodes --json")
    nodes = doc.get("nodes", [])
    if not isinstance(nodes, list):
        raise TransientError(f"scontrol show nodes --json has no nodes list: {text[:200]!r}")
    return tuple(from_json(n) for n in nodes if isinstance(n, dict))
