"""What k8s-sync remembers across passes and restarts: the cluster-wide rate limit on remediations (pod
deletions, node taints: at most N per window) and the faults it has already restarted a pod for.

k8s-sync runs once per cluster (in the controller pod), so its own count is the cluster's. Both are kept
in a file, so a restarted daemon gets no fresh allowance and restarts no pod twice for one fault. A
restarted pod's node keeps its health reason byte for byte (the worker re-applies it when it registers
again), so "the same reason on the same node" is the same fault.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class Budget:
    limit: int
    window_s: float
    spent_at: tuple[float, ...] = ()
    restarted: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))  # node -> reason

    def left(self, now: float) -> int:
        return max(0, self.limit - sum(1 for t in self.spent_at if now - t < self.window_s))

    def spend(self, now: float) -> Budget:
        recent = tuple(t for t in self.spent_at if now - t < self.window_s)
        return Budget(self.limit, self.window_s, (*recent, now), self.restarted)

    def restart(self, node: str, reason: str) -> Budget:
        return Budget(self.limit, self.window_s, self.spent_at, MappingProxyType({**self.restarted, node: reason}))

    def keep_restarts(self, reasons: Mapping[str, str]) -> Budget:
        """Forget the faults whose node no longer holds that reason (cleared, or another fault)."""
        kept = {n: r for n, r in self.restarted.items() if reasons.get(n) == r}
        if len(kept) == len(self.restarted):
            return self
        return Budget(self.limit, self.window_s, self.spent_at, MappingProxyType(kept))

    def same(self, other: Budget) -> bool:
        return self.spent_at == other.spent_at and dict(self.restarted) == dict(other.restarted)


def load(path: Path, limit: int, window_s: float) -> Budget:
    """What the file holds; an unreadable or garbled file counts as nothing spent and nothing restarted."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raw = {}
    doc = raw if isinstance(raw, dict) else {}
    times = doc.get("spent_at")
    restarted = doc.get("restarted")
    times = times if isinstance(times, list) else []
    restarted = restarted if isinstance(restarted, dict) else {}
    return Budget(limit, window_s, tuple(float(t) for t in times if isinstance(t, int | float)),
                  MappingProxyType({str(k): str(v) for k, v in restarted.items() if isinstance(v, str)}))


def save(path: Path, budget: Budget) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({"spent_at": list(budget.spent_at), "restarted": dict(budget.restarted)},
                              sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)
