"""node-reaper's decisions over the recording Slurm fake: which ghosts it deletes, and when."""

from __future__ import annotations

import pytest
from fakes.slurm_client import ADMIN_REASON_300, FakeSlurm

from slurmpod import reasons
from slurmpod.entrypoints.daemons import node_reaper, reap_once
from slurmpod.errors import TransientError
from slurmpod.slurm import SlurmRefused

TIMEOUT = 300.0
GONE = ("DYNAMIC_NORM", "NOT_RESPONDING")


@pytest.mark.parametrize(
    ("base", "flags", "reason", "deleted"),
    [
        ("DOWN", GONE, "", True),
        ("DOWN", GONE, "Not responding", True),
        ("DOWN", GONE, "Node unexpectedly rebooted", True),
        ("IDLE", (*GONE, "DRAIN"), reasons.POD_TERMINATING, True),
        ("DOWN", GONE, ADMIN_REASON_300, False),
        ("IDLE", (*GONE, "DRAIN"), reasons.health("gpu-ecc", "2 uncorrectable"), False),
        ("IDLE", (*GONE, "DRAIN"), "slurmpod: not a reason slurmpod writes", False),
        ("DOWN", ("NOT_RESPONDING",), "Not responding", False),
        ("IDLE", ("DYNAMIC_NORM",), "", False),
        ("DOWN", ("DYNAMIC_NORM",), ADMIN_REASON_300, False),
    ],
    ids=["no-reason", "slurmctld-not-responding", "slurmctld-rebooted", "our-lifecycle-drain", "admin-reason",
         "health-reason", "fake-prefix", "static-node", "responding", "down-by-admin-responding"],
)
def test_which_nodes_are_deleted(base: str, flags: tuple[str, ...], reason: str, deleted: bool) -> None:
    slurm = FakeSlurm()
    slurm.add_node("w-0", base, flags, reason)
    seen: dict[str, float] = {}
    assert reap_once(slurm, seen, TIMEOUT, now=0.0) == []  # never on first sight
    assert reap_once(slurm, seen, TIMEOUT, now=TIMEOUT) == (["w-0"] if deleted else [])
    assert ("w-0" in slurm.nodes_by_name) is not deleted
    if not deleted:
        assert not slurm.called("delete_node")
        assert slurm.nodes_by_name["w-0"].reason == reason


def test_deleted_only_after_the_whole_timeout() -> None:
    slurm = FakeSlurm()
    slurm.add_node("w-0", "DOWN", GONE)
    seen: dict[str, float] = {}
    for now in (0.0, 100.0, 299.9):
        assert reap_once(slurm, seen, TIMEOUT, now) == []
    assert reap_once(slurm, seen, TIMEOUT, 300.0) == ["w-0"]
    assert seen == {}


def test_timer_resets_when_the_node_comes_back() -> None:
    slurm = FakeSlurm()
    slurm.add_node("w-0", "DOWN", GONE)
    seen: dict[str, float] = {}
    reap_once(slurm, seen, TIMEOUT, 0.0)
    slurm.add_node("w-0", "IDLE", ("DYNAMIC_NORM",))  # slurmd answered again
    reap_once(slurm, seen, TIMEOUT, 200.0)
    assert seen == {}
    slurm.add_node("w-0", "DOWN", GONE)
    assert reap_once(slurm, seen, TIMEOUT, 250.0) == []
    assert reap_once(slurm, seen, TIMEOUT, 400.0) == []  # only 150 s since it went away again
    assert reap_once(slurm, seen, TIMEOUT, 550.0) == ["w-0"]


def test_timer_resets_when_an_admin_takes_the_node() -> None:
    slurm = FakeSlurm()
    slurm.add_node("w-0", "DOWN", GONE)
    seen: dict[str, float] = {}
    reap_once(slurm, seen, TIMEOUT, 0.0)
    slurm.add_node("w-0", "DOWN", GONE, ADMIN_REASON_300)
    assert reap_once(slurm, seen, TIMEOUT, 400.0) == []
    assert seen == {} and "w-0" in slurm.nodes_by_name


def test_refused_delete_is_retried_next_pass() -> None:
    slurm = FakeSlurm()
    slurm.add_node("w-0", "DOWN", GONE)
    slurm.fail["delete_node"] = SlurmRefused("scontrol delete exited 1: Node has jobs")
    seen: dict[str, float] = {}
    reap_once(slurm, seen, TIMEOUT, 0.0)
    assert reap_once(slurm, seen, TIMEOUT, 300.0) == []
    assert seen == {"w-0": 0.0}  # the timer is kept
    del slurm.fail["delete_node"]
    assert reap_once(slurm, seen, TIMEOUT, 330.0) == ["w-0"]


def test_only_the_ghosts_among_many() -> None:
    slurm = FakeSlurm()
    slurm.add_node("w-0", "DOWN", GONE)
    slurm.add_node("w-1", "IDLE", ("DYNAMIC_NORM",))
    slurm.add_node("w-2", "DOWN", GONE, ADMIN_REASON_300)
    slurm.add_node("w-3", "DOWN", GONE, "Not responding")
    seen: dict[str, float] = {}
    reap_once(slurm, seen, TIMEOUT, 0.0)
    assert sorted(reap_once(slurm, seen, TIMEOUT, 300.0)) == ["w-0", "w-3"]
    assert sorted(slurm.nodes_by_name) == ["w-1", "w-2"]


@pytest.mark.parametrize(
    "fault",
    [TransientError("scontrol show nodes --json printed no JSON (Expecting value): ''"), None],
    ids=["non-json", "down"],
)
def test_reaper_loop_survives_an_unanswering_controller(fault: TransientError | None) -> None:
    slurm = FakeSlurm()
    slurm.add_node("w-0", "DOWN", GONE)
    if fault is None:
        slurm.down_calls = 3
    else:
        slurm.fail["nodes"] = fault
    assert node_reaper(slurm, TIMEOUT, 30.0, slurm.clock, passes=5) == 0
    assert slurm.methods.count("nodes") == 5
    assert "w-0" in slurm.nodes_by_name  # never deleted without an answer
    if fault is not None:
        del slurm.fail["nodes"]
    node_reaper(slurm, TIMEOUT, 30.0, slurm.clock, passes=12)
    assert "w-0" not in slurm.nodes_by_name  # after 300 s of answers saying it is gone


def test_reaper_loop_deletes_after_timeout_on_the_clock() -> None:
    slurm = FakeSlurm()
    slurm.add_node("w-0", "DOWN", GONE)
    node_reaper(slurm, TIMEOUT, 30.0, slurm.clock, passes=10)  # 0..270 s
    assert "w-0" in slurm.nodes_by_name
    node_reaper(slurm, TIMEOUT, 30.0, slurm.clock, passes=1)  # a fresh reaper starts its timer again
    assert "w-0" in slurm.nodes_by_name
    node_reaper(slurm, TIMEOUT, 30.0, slurm.clock, passes=11)  # 0..300 s within one reaper
    assert "w-0" not in slurm.nodes_by_name
