"""What one built-in rule says about a job: fields to set and notes, or a rejection."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from slurmpod.policy.decision import Changes, Refusal


class Rule(enum.Enum):
    """The built-in rules, named in every Decision (and in the plugin's log line)."""

    TIER_ACCESS = "tier-access"
    CPU_ONLY = "cpu-only-partition"
    TIME_CAP = "tier-time-cap"
    REQUEUE = "tier-requeue"
    GRACE_SIGNAL = "tier-grace-signal"
    TOPOLOGY = "topology"
    WHOLE_NODE = "whole-node-gpus"
    OPT_OUT = "topology-opt-out"
    FAIL_CLOSED = "fail-closed"
    FAIL_OPEN = "fail-open"
    IDENTITY = "identity"  # the caller's name or groups could not be looked up in time


REFUSAL_OF = {Rule.TIER_ACCESS: Refusal.ACCESS, Rule.OPT_OUT: Refusal.ACCESS, Rule.IDENTITY: Refusal.ACCESS,
              Rule.TIME_CAP: Refusal.TIME, Rule.CPU_ONLY: Refusal.GRES, Rule.WHOLE_NODE: Refusal.GRES,
              Rule.TOPOLOGY: Refusal.TOPOLOGY}


@dataclass(frozen=True, slots=True)
class Outcome:
    changes: Changes = field(default_factory=Changes)
    notes: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    reject: str | None = None  # the user-facing reason, when the rule refuses the job
    refusal: Refusal = Refusal.POLICY  # what kind of refusal (set with reject)

    def then(self, other: Outcome) -> Outcome:
        if other is NOTHING:
            return self
        if self is NOTHING:
            return other
        first = self if self.reject is not None else other
        return Outcome(self.changes.merge(other.changes), self.notes + other.notes, self.rules + other.rules,
                       first.reject, first.refusal)


NOTHING = Outcome()


def refuse(rule: Rule, message: str) -> Outcome:
    return Outcome(rules=(rule,), reject=message, refusal=REFUSAL_OF.get(rule, Refusal.POLICY))


def change(rule: Rule, changes: Changes, note: str) -> Outcome:
    return Outcome(changes, (note,), (rule,))
