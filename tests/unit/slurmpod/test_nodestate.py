"""One node state model (slurmpod.nodestate) for the pods, the checks and the emulator."""

from __future__ import annotations

import json

import pytest

from slurmpod import nodestate
from slurmpod.errors import TransientError
from slurmpod_host.cluster import slurmstate


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
    (node,) = nodestate.parse_nodes(_doc(("w0", state, "")))
    assert node.usable_idle is usable


def test_not_idle_reports_each_waiting_node() -> None:
    nodes = nodestate.parse_nodes(_doc(("w0", ["IDLE"], ""), ("w1", ["IDLE", "DRAIN"], "slurmpod: test")))
    assert slurmstate.not_idle(["w0", "w1", "w2"], nodes) == {
        "w1": "IDLE+DRAIN (slurmpod: test)",
        "w2": "not registered",
    }
    assert slurmstate.not_idle(["w0"], nodes) == {}


@pytest.mark.parametrize("text", ["", "not json", "[]", '{"nodes": 3}'], ids=repr)
def test_parse_rejects(text: str) -> None:
    with pytest.raises(TransientError):
        nodestate.parse_nodes(text)


def _n(base: str, *flags: str, reason: str = "") -> nodestate.NodeState:
    return nodestate.NodeState("w0", base, frozenset(flags), reason)


@pytest.mark.parametrize(
    ("node", "usable", "drained", "down", "not_responding", "held", "registered", "dynamic"),
    [
        (_n("IDLE", "DYNAMIC_NORM"), True, False, False, False, False, True, True),
        (_n("MIXED"), True, False, False, False, False, True, False),
        (_n("ALLOCATED", "COMPLETING"), True, False, False, False, False, True, False),
        (_n("IDLE", "DRAIN", reason="x"), False, True, False, False, True, True, False),
        (_n("ALLOCATED", "DRAINING", reason="x"), False, True, False, False, True, True, False),
        (_n("DOWN", "NOT_RESPONDING", "DYNAMIC_NORM"), False, False, True, True, True, False, True),
        (_n("IDLE", "FAIL", reason="x"), False, False, True, False, True, True, False),
        (_n("IDLE", "INVALID_REG"), False, False, False, False, False, True, False),
        (_n("UNKNOWN"), False, False, False, False, False, False, False),
        (_n("FUTURE", "DYNAMIC_FUTURE"), False, False, False, False, False, False, True),
    ],
    ids=["idle", "mixed", "completing", "drain", "draining", "down-not-responding", "fail", "invalid-reg",
         "unknown", "future"],
)
def test_predicates(  # noqa: PLR0917 - one column per predicate
    node: nodestate.NodeState, usable: bool, drained: bool, down: bool, not_responding: bool,
    held: bool, registered: bool, dynamic: bool,
) -> None:
    assert (node.usable, node.drained, node.down, node.not_responding, node.held, node.registered,
            node.dynamic) == (usable, drained, down, not_responding, held, registered, dynamic)


@pytest.mark.parametrize("base", sorted(nodestate.BASE_STATES))
def test_only_a_future_record_is_a_placeholder(base: str) -> None:
    assert _n(base, "DYNAMIC_NORM").placeholder is (base == "FUTURE")
    assert _n(base, "DYNAMIC_NORM", "DRAIN", "INVALID_REG", reason="CoreSpec differ").placeholder is (base == "FUTURE")


def test_split_state_text_and_list_agree() -> None:
    assert nodestate.split_state("IDLE+DRAIN+DYNAMIC_NORM") == nodestate.split_state(["IDLE", "DRAIN", "DYNAMIC_NORM"])
    assert nodestate.split_state("") == ("UNKNOWN", frozenset())
