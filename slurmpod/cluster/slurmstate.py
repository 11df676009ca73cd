"""Slurm node states from `scontrol show nodes --json` (pyslurm cannot be used; see ENVIRONMENT.md).

Ref: https://slurm.schedmd.com/rest_api.html#v0.0.42_node (the same schema `--json` prints)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from slurmpod.errors import TransientError

# Ref: https://slurm.schedmd.com/sinfo.html#SECTION_NODE-STATE-CODES
BASE_STATES = frozenset({"UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE"})
# Flags that make an IDLE node unusable for jobs.
UNUSABLE_FLAGS = frozenset({"DRAIN", "DRAINING", "DRAINED", "NOT_RESPONDING", "FAIL", "INVALID_REG",
                            "POWERED_DOWN", "POWERING_DOWN", "POWERING_UP", "REBOOT_REQUESTED",
                            "MAINTENANCE"})


@dataclass(frozen=True, slots=True)
class NodeState:
    name: str
    base: str
    flags: frozenset[str]
    reason: str

    @property
    def usable_idle(self) -> bool:
        return self.base == "IDLE" and not (self.flags & UNUSABLE_FLAGS)

    def __str__(self) -> str:
        text = "+".join([self.base, *sorted(self.flags)])
        return f"{text} ({self.reason})" if self.reason else text


def _state(raw: object) -> tuple[str, frozenset[str]]:
    parts = [str(p).upper() for p in raw] if isinstance(raw, list) else str(raw).upper().split("+")
    base = next((p for p in parts if p in BASE_STATES), "UNKNOWN")
    return base, frozenset(p for p in parts if p != base)


def parse_nodes(text: str) -> tuple[NodeState, ...]:
    """Nodes of a `scontrol show nodes --json` document; TransientError when it is not one."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TransientError(f"scontrol --json printed no JSON: {exc}: {text[:200]!r}") from None
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    if not isinstance(nodes, list):
        raise TransientError(f"scontrol --json has no nodes list: {text[:200]!r}")
    out = []
    for node in nodes:
        base, flags = _state(node.get("state", "UNKNOWN"))
        out.append(NodeState(str(node.get("name", "")), base, flags, str(node.get("reason", "") or "")))
    return tuple(out)


def not_idle(expected: Iterable[str], nodes: Iterable[NodeState]) -> Mapping[str, str]:
    """Each expected node that is not usable and IDLE yet, with what Slurm says about it."""
    by_name = {n.name: n for n in nodes}
    return {name: (str(by_name[name]) if name in by_name else "not registered")
            for name in expected if name not in by_name or not by_name[name].usable_idle}
