"""preStop keeps a drain someone else set (an admin's, a health check's) and replaces only its own."""

from __future__ import annotations

import pytest

from slurmpod import slurm
from slurmpod import well_known as wk
from slurmpod.entrypoints.prestop import foreign_drain


def _node(states: set[str], reason: str) -> slurm.NodeState:
    return slurm.NodeState("w-0", frozenset(states), reason, 2, 1024, 0, 0, (), True)


@pytest.mark.parametrize(
    ("states", "reason", "foreign"),
    [
        ({"IDLE", "DRAIN"}, "maintenance", True),
        ({"IDLE", "DRAIN"}, "slurmpod: gpu-ecc: 3 uncorrectable", True),  # a health check's: kept
        ({"DOWN"}, "bad cable", True),
        ({"IDLE", "DRAIN"}, wk.REASON_POD_TERMINATING, False),  # our own, from an earlier preStop
        ({"IDLE"}, "maintenance", False),  # a stale reason on a usable node holds nothing
        ({"IDLE", "DRAIN"}, "", False),
    ],
    ids=["admin", "health-check", "down", "own", "not-drained", "no-reason"],
)
def test_foreign_drain(states: set[str], reason: str, foreign: bool) -> None:
    assert foreign_drain(_node(states, reason)) is foreign
