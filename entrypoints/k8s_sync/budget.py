"""The cluster-wide rate limit on remediations (pod deletions, node taints): at most N per window.

k8s-sync runs once per cluster (in the controller pod), so its own count is the cluster's. The times
of past remediations are kept in a file, so a restarted daemon does not get a fresh allowance.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Budget:
    limit: int
    window_s: float
    spent_at: tuple[float, ...] = ()

    def left(self, now: float) -> int:
        return max(0, self.limit - sum(1 for t in self.spent_at if now - t < self.window_s))

    def spend(self, now: float) -> Budget:
        recent = tuple(t for t in self.spent_at if now - t < self.window_s)
        return Budget(self.limit, self.window_s, (*recent, now))


def load(path: Path, limit: int, window_s: float) -> Budget:
    """The budget with the times the file holds; an unreadable file counts as none spent."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raw = []
    times: Iterable[object] = raw if isinstance(raw, list) else []
    return Budget(limit, window_s, tuple(float(t) for t in times if isinstance(t, int | float)))


def save(path: Path, budget: Budget) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(list(budget.spent_at)), encoding="utf-8")
    os.replace(tmp, path)
