"""The fatal-XID latch (prolog_epilog/checks/gpu/xid.py): what lifts it and what does not."""

from __future__ import annotations

from pathlib import Path

from slurmpod.prolog_epilog.checks.gpu import xid
from slurmpod.prolog_epilog.result import CheckResult, Remediation, Status

OK = CheckResult("xid", Status.OK, "no XID")
WARN = CheckResult("xid", Status.WARN, "XID 94 (contained ECC error) on GPU 2")


def test_a_fatal_xid_latches_and_later_clean_runs_still_fail() -> None:
    fresh = CheckResult("xid", Status.FAIL, "XID 48 (double-bit ECC error (DBE)) on GPU 0", Remediation.RESTART_POD)
    result, kept = xid.latch(fresh, [(0, 48)], {}, "boot-a")
    assert result is fresh
    for _ in range(5):
        result, kept = xid.latch(OK, [], kept, "boot-a")
        assert (result.status, result.remediation) == (Status.FAIL, Remediation.RESTART_POD)
        assert result.reason.startswith("XID 48 (double-bit ECC error (DBE)) on GPU 0; latched")
        assert [g.index for g in result.gpus] == [0]


def test_a_warning_xid_is_not_latched() -> None:
    result, kept = xid.latch(WARN, [], {}, "boot-a")
    assert (result, kept) == (WARN, {})


def test_a_new_boot_lifts_the_latch() -> None:
    _, kept = xid.latch(OK, [(1, 79)], {}, "boot-a")
    result, kept = xid.latch(OK, [], kept, "boot-b")
    assert (result, kept) == (OK, {})


def test_the_worst_remediation_of_several_latches_wins() -> None:
    _, kept = xid.latch(OK, [(0, 48), (3, 79)], {}, "boot-a")
    result, _ = xid.latch(WARN, [], kept, "boot-a")
    assert (result.status, result.remediation) == (Status.FAIL, Remediation.REPLACE_NODE)
    assert "(+1 more)" in result.reason
    assert [g.index for g in result.gpus] == [0, 3]


def test_an_unreadable_boot_id_is_empty_and_a_latch_stays(tmp_path: Path) -> None:
    assert xid.boot_id(tmp_path / "absent") == ""
    (tmp_path / "boot_id").write_text("abc\n", encoding="ascii")
    assert xid.boot_id(tmp_path / "boot_id") == "abc"
    _, kept = xid.latch(OK, [(0, 119)], {}, "")
    assert xid.latch(OK, [], kept, "")[0].status is Status.FAIL


def test_a_damaged_latch_entry_is_dropped() -> None:
    assert xid.latch(OK, [], {"0:48": "junk"}, "boot-a") == (OK, {})
