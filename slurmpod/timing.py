"""Time as a seam: a ``Clock`` (real, or a fake one tests advance) and a ``Deadline`` every hook keeps.

Every check and hook has a deadline; no wait in slurmpod is unbounded.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class Deadline:
    """A point in time, and what is left until it; ``budget`` caps one step's timeout by what is left."""

    def __init__(self, clock: Clock, seconds: float, floor: float = 0.5) -> None:
        self._clock = clock
        self._end = clock.monotonic() + seconds
        self._floor = floor  # the shortest timeout one step gets, even when the deadline is close

    def left(self) -> float:
        return max(0.0, self._end - self._clock.monotonic())

    @property
    def expired(self) -> bool:
        return self.left() <= 0.0

    def budget(self, cap: float) -> float:
        """A timeout for one step: at most ``cap``, at most what is left, at least the floor."""
        return max(self._floor, min(cap, self.left()))

    def sleep(self, seconds: float) -> None:
        self._clock.sleep(min(seconds, self.left()))
