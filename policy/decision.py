"""`Decision`: what the policy answers for one JobRequest — accept, modify (these fields), or reject."""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields
from typing import Any

from slurmpod.policy.request import Sharing

# Every message a failing or invalid policy gives the user starts with this (fail-closed).
# Ref: https://slurm.schedmd.com/job_submit_plugins.html (err_msg is returned to the submitting user)
REJECT_PREFIX = "rejected by cluster policy: "


class Refusal(enum.IntEnum):
    """What kind of refusal a rejection is: the plugin returns the Slurm error code for it, so sbatch's
    second line says what was refused. Values are SP_REFUSE_* in slurmpod_job.h.
    Ref: https://github.com/SchedMD/slurm/blob/master/slurm/slurm_errno.h"""

    POLICY = 0  # SLURM_ERROR: the policy could not decide (fail-closed), or a site rule refused
    ACCESS = 1  # ESLURM_ACCESS_DENIED
    TIME = 2  # ESLURM_INVALID_TIME_LIMIT
    GRES = 3  # ESLURM_INVALID_GRES
    TOPOLOGY = 4  # ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE
    TOO_LONG = 5  # ESLURM_PATHNAME_TOO_LONG


class Verdict(enum.Enum):
    ACCEPT = "accept"
    MODIFY = "modify"
    REJECT = "reject"


@dataclass(frozen=True, slots=True)
class Changes:
    """The job_desc fields to set; None leaves a field as the user gave it."""

    partition: str | None = None
    qos: str | None = None
    time_limit: int | None = None  # minutes
    requeue: bool | None = None
    warn_signal: int | None = None  # --signal: job_desc.warn_signal / warn_time / warn_flags
    warn_time: int | None = None  # seconds before the end
    warn_flags: int | None = None
    req_switch: int | None = None  # --switches=<count>@<wait4switch>
    wait4switch: int | None = None  # seconds
    segment_size: int | None = None  # --segment
    tres_per_node: str | None = None
    sharing: Sharing | None = None

    def merge(self, other: Changes) -> Changes:
        """These changes with ``other``'s set fields on top."""
        theirs = other.set_fields()
        if not theirs:
            return self
        return Changes(**{**self.set_fields(), **theirs})

    def set_fields(self) -> dict[str, Any]:
        """The fields that are set, by name (the per-call path: no dataclasses.fields())."""
        return {name: value for name in _CHANGE_FIELDS if (value := getattr(self, name)) is not None}

    def as_dict(self) -> dict[str, Any]:
        """The set fields in JSON form (enums by value)."""
        return {k: v.value if isinstance(v, Sharing) else v for k, v in self.set_fields().items()}

    def __bool__(self) -> bool:
        return any(getattr(self, name) is not None for name in _CHANGE_FIELDS)


_CHANGE_FIELDS = tuple(f.name for f in fields(Changes))


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer for one job: a verdict, the fields to set, the message the user sees, the rules that spoke."""

    verdict: Verdict
    changes: Changes = Changes()
    message: str = ""
    rules: tuple[str, ...] = ()
    refusal: Refusal = Refusal.POLICY  # a rejection's kind: the Slurm error code the plugin returns

    @classmethod
    def accept(cls, message: str = "", rules: tuple[str, ...] = ()) -> Decision:
        return cls(Verdict.ACCEPT, Changes(), message, rules)

    @classmethod
    def reject(cls, message: str, rules: tuple[str, ...] = (), refusal: Refusal = Refusal.POLICY) -> Decision:
        return cls(Verdict.REJECT, Changes(), message, rules, refusal)

    @classmethod
    def of(cls, changes: Changes, messages: tuple[str, ...], rules: tuple[str, ...]) -> Decision:
        """Modify when any field is set, else accept."""
        return cls(Verdict.MODIFY if changes else Verdict.ACCEPT, changes, "; ".join(messages), rules)

    @property
    def allowed(self) -> bool:
        return self.verdict is not Verdict.REJECT

    def as_dict(self) -> dict[str, Any]:
        out = {"verdict": self.verdict.value, "set": self.changes.as_dict(), "message": self.message,
               "rules": list(self.rules)}
        if self.verdict is Verdict.REJECT:
            out["refusal"] = self.refusal.name.lower()
        return out
