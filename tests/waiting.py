"""Bounded waits shared by the container suites: poll an outcome until it holds or its bound passes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
POLL_S = 0.25


def wait_for(what: str, check: Callable[[], T | None], timeout: float, poll: float = POLL_S) -> tuple[T, float]:
    """Poll ``check`` until it returns a value that is not None; (value, seconds waited)."""
    started = time.monotonic()
    while True:
        value = check()
        waited = time.monotonic() - started
        if value is not None:
            return value, waited
        if waited > timeout:
            raise AssertionError(f"{what}: not after {timeout:.0f}s")
        time.sleep(poll)
