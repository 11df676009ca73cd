"""`decide(policy, request) -> Decision`: the one decision function the plugin and `policy check` share.

It never raises: a Python error inside the policy becomes a rejection ("rejected by cluster policy: ...")
or, with `failMode: open`, an acceptance of the job unchanged.
"""

from __future__ import annotations

import logging

from slurmpod.policy import tier_rules, topology_rules
from slurmpod.policy.decision import REJECT_PREFIX, Changes, Decision
from slurmpod.policy.model import FailMode, Policy
from slurmpod.policy.outcome import Outcome, Rule
from slurmpod.policy.request import JobRequest

log = logging.getLogger(__name__)


def decide(policy: Policy, req: JobRequest) -> Decision:
    where = "built-in rules"
    try:
        decision = _builtin(policy, req)
        for rule in policy.custom:
            if not decision.allowed:
                break
            where = f"rule {rule.name}"
            out = rule.func(req, decision)
            if out is not None and not isinstance(out, Decision):
                raise TypeError(f"returned {type(out).__name__}, not a Decision or None")
            decision = out or decision
        return decision
    except Exception as exc:  # a policy bug must never reach Slurm as an exception
        return failed(policy.fail_mode, f"{where} failed: {type(exc).__name__}: {exc}")


def failed(mode: FailMode, detail: str) -> Decision:
    """The decision when the policy cannot decide: reject (fail-closed) or accept unchanged (fail-open)."""
    if mode is FailMode.OPEN:
        log.error("policy error, job accepted unchanged (failMode: open): %s", detail)
        return Decision.accept(f"policy error ignored (failMode: open): {detail}", (Rule.FAIL_OPEN.value,))
    return Decision.reject(REJECT_PREFIX + detail, (Rule.FAIL_CLOSED.value,))


def _builtin(policy: Policy, req: JobRequest) -> Decision:
    tier = tier_rules.check(policy, req)
    out = tier if tier.reject is not None else tier.then(topology_rules.check(policy, req))
    rules = tuple(r.value for r in out.rules)
    if out.reject is not None:
        return Decision.reject(out.reject, rules, out.refusal)
    if req.is_modify:
        return _modification(tier)
    return Decision.of(out.changes, out.notes, rules)


def _modification(tier: Outcome) -> Decision:
    """A job_modify on the job it produces (the plugin merges the job's record with the change): the
    tier's time cap and requeue are set in the update, as at submit. slurmctld's update_job does not
    change --signal, so a change that would need the tier's grace signal is refused; topology fields
    are placement, decided at submit. Ref: https://slurm.schedmd.com/scontrol.html#SECTION_JOBS"""
    changes = tier.changes
    rules = tuple(r.value for r in tier.rules)  # names tier-grace-signal when the signal is wanted
    if changes.warn_signal is not None:
        return Decision.reject("a job moved into this tier cannot be given its grace signal (Slurm does not "
                               "change --signal of an existing job): submit it to the tier instead",
                               rules)
    return Decision.of(Changes(time_limit=changes.time_limit, requeue=changes.requeue), tier.notes, rules)
