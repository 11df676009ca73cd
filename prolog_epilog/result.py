"""What a check reports: a closed status, a reason, a remediation class, the GPUs it concerns."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Status(enum.Enum):
    """Ordered from good to bad; ``worst`` picks the last."""

    OK = "ok"
    SKIPPED = "skipped"  # nothing to check here (no GPUs, not supported, opted out): never a failure
    WARN = "warn"
    FAIL = "fail"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Status.OK: 0, Status.SKIPPED: 0, Status.WARN: 1, Status.FAIL: 2}


class Remediation(enum.Enum):
    """What an operator (or automation) should do about a failure, mildest first."""

    NONE = "none"
    DRAIN = "drain"  # keep jobs off the node until the fault clears
    RESTART_POD = "restart_pod"  # a reset of the node's software (driver state, stray processes)
    REPLACE_NODE = "replace_node"  # hardware: RMA / swap the machine


class Context(enum.Enum):
    """When the checks run. Ref: https://slurm.schedmd.com/prolog_epilog.html"""

    PROLOG = "prolog"  # slurmd Prolog, before a job starts on the node
    EPILOG = "epilog"  # slurmd Epilog, after a job ends
    PERIODIC = "periodic"  # HealthCheckProgram, Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_HealthCheckProgram
    STARTUP = "startup"  # pod start, before slurmd registers


@dataclass(frozen=True, slots=True)
class Gpu:
    """A GPU a result concerns."""

    index: int
    uuid: str = ""


@dataclass(frozen=True, slots=True)
class CheckResult:
    check: str
    status: Status
    reason: str = ""
    remediation: Remediation = Remediation.NONE
    duration: float = 0.0  # seconds
    gpus: tuple[Gpu, ...] = ()
    # numbers worth exporting as metrics, e.g. {"xid_79": 1.0}
    values: tuple[tuple[str, float], ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "check": self.check,
            "status": self.status.value,
            "reason": self.reason,
            "remediation": self.remediation.value,
            "duration_s": round(self.duration, 6),
            "gpus": [{"index": g.index, "uuid": g.uuid} for g in self.gpus],
            "values": dict(self.values),
        }


@dataclass(frozen=True, slots=True)
class Unknown:
    """No verdict: the check did not return within its timeout (a call stuck in a driver, say).

    The health agent reports this as such; the hook turns it into the runner's "timed out" failure,
    the verdict a check past its time gets in-process (``runner.resolve``)."""

    check: str
    timeout: float  # seconds the check was given
    duration: float = 0.0  # seconds waited for it


Verdict = CheckResult | Unknown


def ok(check: str, reason: str = "", **kw: object) -> CheckResult:
    return CheckResult(check, Status.OK, reason, **kw)  # type: ignore[arg-type]


def skipped(check: str, reason: str) -> CheckResult:
    return CheckResult(check, Status.SKIPPED, reason)


def fail(check: str, reason: str, remediation: Remediation = Remediation.DRAIN, **kw: object) -> CheckResult:
    return CheckResult(check, Status.FAIL, reason, remediation, **kw)  # type: ignore[arg-type]


def warn(check: str, reason: str, **kw: object) -> CheckResult:
    return CheckResult(check, Status.WARN, reason, **kw)  # type: ignore[arg-type]


def worst(results: Iterable[CheckResult]) -> Status:
    status = Status.OK
    for r in results:
        if r.status.rank > status.rank:
            status = r.status
    return status
