"""Slurm node states from `scontrol show nodes --json` (slurmpod.cluster.slurmstate)."""

from __future__ import annotations

import json

import pytest

from slurmpod.cluster import slurmstate
from slurmpod.errors import TransientError


def _doc(*nodes: tuple[str, object, str]) -> str:
    return json.dumps({"nodes": [{"name": n, "state": s, "reason": r} for n, s, r in nodes],
                       "meta": {}, "errors": [], "warnings": []})


@pytest.mark.parametrize(
    ("state", "usable"),
    [
        (["IDLE"], True),
        (["IDLE", "DYNAMIC_NORM"], True),
        (["IDLE", "DRAIN"], False),
        (["IDLE", "NOT_RESPONDING"], False),
        (["DOWN", "NOT_RESPONDING"], False),
        (["ALLOCATED"], False),
        (["MIXED"], False),
        (["IDLE", "INVALID_REG"], False),
        ("IDLE", True),  # older plain-string form
        ("IDLE+DRAIN", False),
        ("idle", True),
    ],
    ids=str,
)
def test_usable_idle(state: object, usable: bool) -> None:
    (node,) = slurmstate.parse_nodes(_doc(("w0", state, "")))
    assert node.usable_idle is usable


def test_not_idle_reports_each_waiting_node() -> None:
    nodes = slurmstate.parse_nodes(_doc(("w0", ["IDLE"], ""), ("w1", ["IDLE", "DRAIN"], "slurmpod: test")))
    assert slurmstate.not_idle(["w0", "w1", "w2"], nodes) == {
        "w1": "IDLE+DRAIN (slurmpod: test)",
        "w2": "not registered",
    }
    assert slurmstate.not_idle(["w0"], nodes) == {}


@pytest.mark.parametrize("text", ["", "not json", "[]", '{"nodes": 3}'], ids=repr)
def test_parse_rejects(text: str) -> None:
    with pytest.raises(TransientError):
        slurmstate.parse_nodes(text)
