"""The one owner of drain reasons: who set a reason, and who may lift or delete past it."""

from __future__ import annotations

import pytest
from fakes.slurm_client import ADMIN_REASON_300

from slurmpod import reasons
from slurmpod.nodestate import NodeState
from slurmpod.reasons import Owner

HEALTH = "slurmpod: gpu-ecc: GPU 3 uncorrectable ECC errors: 2"


@pytest.mark.parametrize(
    ("reason", "owner"),
    [
        ("", Owner.NONE),
        ("slurmpod: pod terminating", Owner.LIFECYCLE),
        (HEALTH, Owner.HEALTH),
        ("slurmpod: nvlink.state: link 3 down", Owner.HEALTH),
        ("slurmpod: pod terminating now", Owner.OTHER),
        ("slurmpod: no check here", Owner.OTHER),
        ("slurmpod: bad check!: detail", Owner.OTHER),
        ("slurmpod: : detail", Owner.OTHER),
        ("slurmpod:gpu-ecc: detail", Owner.OTHER),
        ("Not responding", Owner.SLURMCTLD),
        ("Node unexpectedly rebooted", Owner.SLURMCTLD),
        ("not responding", Owner.OTHER),
        ("admin: PSU swap", Owner.OTHER),
        (ADMIN_REASON_300, Owner.OTHER),
        (" slurmpod: pod terminating", Owner.OTHER),
        ("slurmpod: k8s: cordoned", Owner.K8S),
        ("slurmpod: k8s: node not ready", Owner.K8S),
        ("slurmpod: k8s: ", Owner.OTHER),
        ("slurmpod: autoscale: scale-in", Owner.AUTOSCALE),
        ("slurmpod: autoscale: scale-in now", Owner.OTHER),
        ("slurmpod: autoscale: ", Owner.OTHER),
    ],
    ids=["none", "lifecycle", "health", "health-dotted-check", "lifecycle-lookalike", "prefix-no-check",
         "prefix-bad-check", "prefix-empty-check", "prefix-no-space", "slurmctld-not-responding",
         "slurmctld-rebooted", "lowercase-not-slurmctld", "admin", "admin-300-quoted", "leading-space",
         "k8s-cordon", "k8s-not-ready", "k8s-no-cause", "autoscale", "autoscale-lookalike", "autoscale-no-cause"],
)
def test_owner(reason: str, owner: Owner) -> None:
    assert reasons.owner(reason) is owner


@pytest.mark.parametrize(
    ("check", "detail", "want"),
    [
        ("gpu-ecc", "2 errors", "slurmpod: gpu-ecc: 2 errors"),
        ("gpu-ecc", "line one\nline two\r\n  three", "slurmpod: gpu-ecc: line one line two three"),
        ("nvlink.state", "", "slurmpod: nvlink.state: "),
    ],
    ids=["plain", "multiline-folded", "empty-detail"],
)
def test_health_reason_text(check: str, detail: str, want: str) -> None:
    reason = reasons.health(check, detail)
    assert reason == want
    assert reasons.owner(reason) is Owner.HEALTH
    assert reasons.health_check_of(reason) == check


def test_health_reason_is_cut_to_the_limit() -> None:
    reason = reasons.health("gpu-ecc", "x" * 1000)
    assert len(reason) == reasons.MAX_OWN_REASON
    assert reason.endswith("...")
    assert reasons.health_check_of(reason) == "gpu-ecc"


@pytest.mark.parametrize("check", ["", "gpu ecc", "gpu:ecc", "gpu\necc", "k8s", "autoscale"],
                         ids=["empty", "space", "colon", "newline", "k8s-sync-s-own", "autoscaler-s-own"])
def test_health_refuses_a_check_that_is_not_a_token(check: str) -> None:
    with pytest.raises(ValueError, match="not a token"):
        reasons.health(check, "detail")


@pytest.mark.parametrize("reason", ["", "slurmpod: pod terminating", "admin: x", "Not responding"],
                         ids=["none", "lifecycle", "admin", "slurmctld"])
def test_health_check_of_other_reasons_is_none(reason: str) -> None:
    assert reasons.health_check_of(reason) is None


def _node(base: str, flags: set[str], reason: str) -> NodeState:
    return NodeState("w-0", base, frozenset(flags), reason)


@pytest.mark.parametrize(("remediation", "want", "parsed"), [
    ("drain", "slurmpod: gpu.xid: XID 13", "drain"),
    ("none", "slurmpod: gpu.xid: XID 13", "drain"),
    ("restart_pod", "slurmpod: gpu.xid: restart pod: XID 13", "restart_pod"),
    ("replace_node", "slurmpod: gpu.xid: replace node: XID 13", "replace_node"),
], ids=["drain", "none", "restart-pod", "replace-node"])
def test_a_health_reason_names_its_remediation(remediation: str, want: str, parsed: str) -> None:
    reason = reasons.health("gpu.xid", "XID 13", remediation)
    assert reason == want and reasons.remediation_of(reason) == parsed
    assert reasons.health_check_of(reason) == "gpu.xid"


@pytest.mark.parametrize("detail", ["replace node: spoofed", "restart pod: spoofed"])
def test_a_detail_that_reads_like_a_remediation_is_never_one(detail: str) -> None:
    reason = reasons.health("mounts", detail)
    assert reasons.remediation_of(reason) == "drain"
    assert detail in reason


@pytest.mark.parametrize("reason", ["replace node: an admin", "slurmpod: k8s: cordoned", "slurmpod: pod terminating",
                                    "slurmpod: autoscale: scale-in"])
def test_only_health_reasons_carry_a_remediation(reason: str) -> None:
    assert reasons.remediation_of(reason) == ""


def test_k8s_reason_is_one_printable_line_cut_to_fit() -> None:
    reason = reasons.k8s("cordoned: a\nb\x00c\x1b[31m" + "x" * 1000)
    assert reason.startswith("slurmpod: k8s: cordoned: a b c [31m")
    assert reason.isprintable() and len(reason) == reasons.MAX_OWN_REASON
    with pytest.raises(ValueError, match="cause"):
        reasons.k8s(" \n ")


DRAIN = {"DYNAMIC_NORM", "DRAIN"}
GONE = {"DYNAMIC_NORM", "NOT_RESPONDING"}

SCALE_IN = "slurmpod: autoscale: scale-in"
# (node, foreign hold, lifecycle may lift, health may lift, reaper may delete)
TABLE = [
    (_node("IDLE", {"DYNAMIC_NORM"}, ""), False, False, False, False),
    (_node("IDLE", DRAIN, reasons.POD_TERMINATING), False, True, False, False),
    (_node("IDLE", DRAIN, HEALTH), True, False, True, False),
    (_node("IDLE", DRAIN, ADMIN_REASON_300), True, False, False, False),
    (_node("DOWN", {"DYNAMIC_NORM"}, ADMIN_REASON_300), True, False, False, False),
    (_node("DOWN", {"DYNAMIC_NORM"}, HEALTH), True, False, False, False),
    (_node("DOWN", GONE, "Not responding"), False, False, False, True),
    (_node("DOWN", GONE, ""), False, False, False, True),
    (_node("IDLE", GONE | {"DRAIN"}, reasons.POD_TERMINATING), False, True, False, True),
    (_node("IDLE", GONE | {"DRAIN"}, HEALTH), True, False, True, False),
    (_node("DOWN", GONE, ADMIN_REASON_300), True, False, False, False),
    (_node("DOWN", {"NOT_RESPONDING"}, ""), False, False, False, False),
    (_node("IDLE", {"DYNAMIC_NORM"}, ADMIN_REASON_300), False, False, False, False),
    (_node("IDLE", DRAIN, "slurmpod: k8s: cordoned"), True, False, False, False),
    (_node("DOWN", GONE | {"DRAIN"}, "slurmpod: k8s: cordoned"), True, False, False, True),
    (_node("IDLE", DRAIN, SCALE_IN), False, False, False, False),
    (_node("IDLE", GONE | {"DRAIN"}, SCALE_IN), False, False, False, True),
    (_node("MIXED", DRAIN, SCALE_IN), False, False, False, False),
]


@pytest.mark.parametrize(
    ("node", "foreign", "lifecycle", "health", "reap"),
    TABLE,
    ids=["free", "our-drain", "health-drain", "admin-drain", "down-admin", "down-health", "gone-slurmctld",
         "gone-no-reason", "gone-our-drain", "gone-health", "gone-admin", "static-gone", "reason-not-held",
         "k8s-drain", "gone-k8s-drain", "scale-in-drain", "gone-scale-in-drain", "scale-in-draining"],
)
def test_decisions(node: NodeState, foreign: bool, lifecycle: bool, health: bool, reap: bool) -> None:
    hold = reasons.hold(node)
    assert hold.reason == node.reason
    assert hold.foreign is foreign
    assert reasons.lifecycle_may_lift(node) is lifecycle
    assert reasons.health_may_lift(node) is health
    assert reasons.reaper_may_delete(node) is reap
    # No decision ever lets two parts of slurmpod act on the same reason.
    assert not (lifecycle and health)
    assert not (reap and foreign) or reasons.owner(node.reason) is Owner.K8S
    assert not (reasons.k8s_may_lift(node) and (lifecycle or health))
    # The autoscaler lifts its own drain and nothing else; a pod that goes (preStop) may replace it.
    assert reasons.autoscale_may_lift(node) is (node.reason == SCALE_IN and node.drained)
    assert not (reasons.autoscale_may_lift(node) and (lifecycle or health or reasons.k8s_may_lift(node)))
