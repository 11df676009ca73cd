"""`decide(policy, request) -> Decision`: the one decision function the plugin and `policy check` share.

It never raises: a Python error inside the policy becomes a rejection ("rejected by cluster policy: ...")
or, with `failMode: open`, an acceptance of the job unchanged.
"""

from __future__ import annotations

import logging

from slurmpod.policy import tier_rules, topology_rules
from slurmpod.policy.decision import REJECT_PREFIX, Decision
from slurmpod.policy.model import FailMode, Policy
from slurmpod.policy.outcome import Rule
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
    out = tier_rules.check(policy, req)
    if out.reject is None:
        out = out.then(topology_rules.check(policy, req))
    rules = tuple(r.value for r in out.rules)
    if out.reject is not None:
        return Decision.reject(out.reject, rules, out.refusal)
    if req.is_modify:
        # job_modify's job_desc holds only the fields being changed (the rest NO_VAL), and the job's
        # record is opaque to the plugin: refuse what the change names, never fill in the unnamed rest.
        # Ref: https://slurm.schedmd.com/job_submit_plugins.html (job_modify)
        return Decision.accept()
    return Decision.of(out.changes, out.notes, rules)
