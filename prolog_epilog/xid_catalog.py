"""XID codes and what they mean for a node. GENERATED from NVIDIA's XID catalog — edit the table, keep it sorted.

Source: https://docs.nvidia.com/deploy/xid-errors/index.html (XID catalog, "Xid Error Listing" and the
recommended actions per code). Codes not listed are treated as warnings: logged and counted, no drain.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from slurmpod.prolog_epilog.result import Remediation


class Severity(enum.Enum):
    WARN = "warn"
    FATAL = "fatal"


@dataclass(frozen=True, slots=True)
class Xid:
    code: int
    severity: Severity
    remediation: Remediation
    meaning: str


_F, _W = Severity.FATAL, Severity.WARN
_RESET, _RMA, _NONE = Remediation.RESTART_POD, Remediation.REPLACE_NODE, Remediation.NONE

# (code, severity, remediation, meaning) — generated, sorted by code.
CATALOG: dict[int, Xid] = {x.code: x for x in (
    Xid(13, _W, _NONE, "graphics engine exception (usually the application)"),
    Xid(31, _W, _NONE, "GPU memory page fault (usually the application)"),
    Xid(43, _W, _NONE, "GPU stopped processing (usually the application)"),
    Xid(45, _W, _NONE, "preemptive cleanup after a previous error"),
    Xid(48, _F, _RESET, "double-bit ECC error (DBE)"),
    Xid(61, _W, _NONE, "internal micro-controller breakpoint/warning"),
    Xid(62, _F, _RESET, "internal micro-controller halt"),
    Xid(63, _F, _RESET, "ECC page retirement or row remapping recording event"),
    Xid(64, _F, _RMA, "ECC page retirement or row remapper recording failure"),
    Xid(68, _W, _NONE, "video processor exception"),
    Xid(69, _W, _NONE, "graphics engine class error"),
    Xid(74, _F, _RESET, "NVLink error"),
    Xid(79, _F, _RMA, "GPU has fallen off the bus"),
    Xid(92, _W, _NONE, "high single-bit ECC error rate"),
    Xid(94, _W, _NONE, "contained ECC error (application affected, GPU usable)"),
    Xid(95, _F, _RESET, "uncontained ECC error"),
    Xid(109, _W, _NONE, "context switch timeout"),
    Xid(119, _F, _RESET, "GSP RPC timeout"),
    Xid(120, _F, _RESET, "GSP error"),
    Xid(121, _W, _NONE, "C2C link corrected error"),
    Xid(140, _F, _RESET, "unrecovered ECC error"),
)}


def classify(code: int) -> Xid:
    return CATALOG.get(code, Xid(code, Severity.WARN, Remediation.NONE, "not in the catalog"))
