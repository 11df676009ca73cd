"""The latest verdict of each check, with when it was reached: written by the agent's runs, read by its
answers. Thread-safe: the schedule and the request handlers run on threads of their own."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

from slurmpod.prolog_epilog.result import Verdict


@dataclass(frozen=True, slots=True)
class Observed:
    verdict: Verdict
    at: float  # monotonic seconds when the verdict was reached

    def age(self, now: float) -> float:
        return max(0.0, now - self.at)


class Latest:
    """check name -> its latest ``Observed``; a newer verdict replaces an older one, never the reverse."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_check: dict[str, Observed] = {}

    def record(self, verdicts: Iterable[Verdict], at: float) -> None:
        with self._lock:
            for v in verdicts:
                known = self._by_check.get(v.check)
                if known is None or known.at <= at:
                    self._by_check[v.check] = Observed(v, at)

    def get(self, check: str) -> Observed | None:
        with self._lock:
            return self._by_check.get(check)

    def fresh(self, checks: Iterable[str], now: float, max_age: float) -> dict[str, Observed]:
        """Those of ``checks`` with a verdict at most ``max_age`` seconds old."""
        with self._lock:
            found = {name: self._by_check.get(name) for name in checks}
        return {name: o for name, o in found.items() if o is not None and o.age(now) <= max_age}

    def snapshot(self) -> dict[str, Observed]:
        with self._lock:
            return dict(self._by_check)
