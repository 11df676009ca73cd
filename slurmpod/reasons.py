"""The one owner of the drain reasons slurmpod may set, and of which reasons it may lift.

slurmpod sets only reasons that start with ``slurmpod: `` and lifts only those, each only by the part of
slurmpod that set it:
- lifecycle: ``slurmpod: pod terminating`` (preStop); a new pod of the same name lifts it;
- health:    ``slurmpod: <check>: <detail>`` (the health checks); the periodic check lifts it after
             enough clean runs. A failure whose remediation is more than a drain says so first:
             ``slurmpod: <check>: restart pod: <detail>``, ``slurmpod: <check>: replace node: <detail>``;
- k8s:       ``slurmpod: k8s: <why>`` (k8s-sync: the pod's Kubernetes node is cordoned or NotReady);
             k8s-sync alone lifts it, once the cause is gone;
- autoscale: ``slurmpod: autoscale: scale-in`` (the autoscaler: the node is to be removed once idle);
             the autoscaler alone lifts it, when demand returns. It is the weakest of slurmpod's drains:
             a health check's or k8s-sync's drain replaces it (so a lifted scale-in never returns a
             faulty node to service), and so does preStop's when the pod goes.
Every other reason is someone else's (an admin's, or slurmctld's own such as "Not responding") and is
never changed, shortened or lost: when slurmpod must delete and re-create a node record, it re-applies
that reason byte for byte.
Ref: https://slurm.schedmd.com/scontrol.html#OPT_Reason
(Pattern as in SchedMD's slurm-operator, whose drains carry a `slurm-operator: ` prefix it alone clears.)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from slurmpod import well_known as wk
from slurmpod.nodestate import NodeState

PREFIX = wk.REASON_PREFIX
# The longest reason slurmpod writes itself: short enough for `sinfo -R` and every Slurm version's
# state file; a detail past it is cut with an ellipsis.
MAX_OWN_REASON = 255
POD_TERMINATING = wk.REASON_POD_TERMINATING
# Reasons slurmctld sets by itself when a node stops answering; nobody chose them, so a node whose pod
# is gone may be deleted with them. Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_SlurmdTimeout
SLURMCTLD_REASONS = frozenset({"Not responding", "Node unexpectedly rebooted"})


class Owner(enum.Enum):
    """Who set a node's reason."""

    NONE = "none"  # no reason at all
    LIFECYCLE = "lifecycle"  # slurmpod's pod lifecycle (preStop)
    HEALTH = "health"  # slurmpod's health checks
    K8S = "k8s"  # slurmpod's k8s-sync: the Kubernetes node is cordoned or NotReady
    AUTOSCALE = "autoscale"  # slurmpod's autoscaler: to be removed by a scale-in once idle
    SLURMCTLD = "slurmctld"  # slurmctld itself (node stopped answering)
    OTHER = "other"  # an admin, another tool: never touched


# The health checks' reasons: "slurmpod: <check>: <detail>". A check name is a lowercase token.
_LIFECYCLE = frozenset({POD_TERMINATING})
K8S_PREFIX = f"{PREFIX}k8s: "
AUTOSCALE_SCALE_IN = wk.REASON_AUTOSCALE_SCALE_IN
# Tokens after the prefix that name no health check: the reasons of k8s-sync and of the autoscaler.
_NOT_CHECKS = frozenset({"k8s", "autoscale"})
# How a health reason names a remediation beyond the drain (prolog_epilog.result.Remediation values).
REMEDIATION_LABELS = {"restart_pod": "restart pod", "replace_node": "replace node"}


def owner(reason: str) -> Owner:
    if not reason:
        return Owner.NONE
    if reason in _LIFECYCLE:
        return Owner.LIFECYCLE
    if reason == AUTOSCALE_SCALE_IN:
        return Owner.AUTOSCALE
    if reason.startswith(K8S_PREFIX) and len(reason) > len(K8S_PREFIX):
        return Owner.K8S
    if reason.startswith(PREFIX):
        check, sep, _detail = reason[len(PREFIX):].partition(": ")
        if sep and check and check not in _NOT_CHECKS and all(c.isalnum() or c in "-_." for c in check):
            return Owner.HEALTH
        return Owner.OTHER  # looks like ours but is not a reason slurmpod writes: hands off
    if reason in SLURMCTLD_REASONS:
        return Owner.SLURMCTLD
    return Owner.OTHER


def _one_line(text: str) -> str:
    """One line of printable text: every control character (NUL, ESC, CR, LF ...) becomes a space."""
    printable = "".join(c if c.isprintable() else " " for c in text)
    return " ".join(printable.split())  # Slurm reasons are single-line


def _fit(reason: str) -> str:
    return reason if len(reason) <= MAX_OWN_REASON else reason[: MAX_OWN_REASON - 3] + "..."


def health(check: str, detail: str, remediation: str = "drain") -> str:
    """The reason a failed health check drains with, cut to fit MAX_OWN_REASON. ``remediation`` (a
    prolog_epilog.result.Remediation value) is named first when it asks for more than the drain."""
    if not check or not all(c.isalnum() or c in "-_." for c in check) or check in _NOT_CHECKS:
        raise ValueError(f"check name {check!r} is not a token")
    text = _one_line(detail)
    label = REMEDIATION_LABELS.get(remediation)
    if label is not None:
        text = f"{label}: {text}"
    elif any(text.startswith(f"{known}: ") for known in REMEDIATION_LABELS.values()):
        text = f"({text})"  # a detail that reads like a remediation must never be taken for one
    return _fit(f"{PREFIX}{check}: {text}")


def remediation_of(reason: str) -> str:
    """The remediation a health reason names ("restart_pod", "replace_node"), else "drain"; "" when the
    reason is not a health check's."""
    check = health_check_of(reason)
    if check is None:
        return ""
    detail = reason[len(PREFIX) + len(check) + 2:]
    return next((value for value, label in REMEDIATION_LABELS.items() if detail.startswith(f"{label}: ")), "drain")


def k8s(why: str) -> str:
    """The reason k8s-sync drains with: ``slurmpod: k8s: <why>``, one line, cut to fit."""
    text = _one_line(why)
    if not text:
        raise ValueError("a k8s reason needs a cause")
    return _fit(K8S_PREFIX + text)


def health_check_of(reason: str) -> str | None:
    """The check that set a health reason, else None."""
    if owner(reason) is not Owner.HEALTH:
        return None
    return reason[len(PREFIX):].partition(": ")[0]


@dataclass(frozen=True, slots=True)
class Hold:
    """Whether a node is held out of service, and by whom."""

    held: bool
    owner: Owner
    reason: str

    @property
    def foreign(self) -> bool:
        """Held for a reason slurmpod's lifecycle code must keep (an admin's, a health check's). The
        autoscaler's scale-in is not: a pod that goes leaves Slurm as any idle pod does."""
        return self.held and self.owner in {Owner.OTHER, Owner.HEALTH, Owner.K8S}


def hold(state: NodeState) -> Hold:
    return Hold(state.held, owner(state.reason), state.reason)


def lifecycle_may_lift(state: NodeState) -> bool:
    """A new pod may lift its predecessor's preStop drain, and nothing else.

    Also when the DRAIN flag is already gone: slurmctld has been seen (24.11.5) to drop the flag of a
    dynamic node that re-registers while keeping the reason text, which would then hang in `sinfo -R`.
    """
    return owner(state.reason) is Owner.LIFECYCLE


def health_may_lift(state: NodeState) -> bool:
    """The periodic health check may lift a drain one of the health checks set, and nothing else."""
    return state.drained and owner(state.reason) is Owner.HEALTH


# slurmctld 26.05.5 drains a dynamic node that registers `Topology=` for a unit its topology.yaml lacks
# (seen in the emulator: "create_dynamic_reg_node Invalid node topology specified default:b2 ignored").
TOPOLOGY_FAILED = "Failed to set topology '{}'"


def topology_may_lift(state: NodeState, value: str) -> bool:
    """topology-sync may lift slurmctld's drain for a failed `Topology=` once it has set that value."""
    return state.drained and state.reason == TOPOLOGY_FAILED.format(value)


def k8s_may_lift(state: NodeState) -> bool:
    """k8s-sync may lift the drains it set, and nothing else."""
    return owner(state.reason) is Owner.K8S


def autoscale_may_lift(state: NodeState) -> bool:
    """The autoscaler may lift the scale-in drain it set, and nothing else."""
    return state.drained and owner(state.reason) is Owner.AUTOSCALE


def reaper_may_delete(state: NodeState) -> bool:
    """A dynamic node whose pod is gone: not responding, and no reason anyone chose to keep. k8s-sync's
    reason was about the pod's Kubernetes node, which a gone pod no longer has; the autoscaler's asked
    for the pod to go."""
    return (
        state.dynamic
        and state.not_responding
        and owner(state.reason) in {Owner.NONE, Owner.LIFECYCLE, Owner.SLURMCTLD, Owner.K8S, Owner.AUTOSCALE}
    )
