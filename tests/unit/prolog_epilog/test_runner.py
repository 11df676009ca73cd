"""The runner: per-check timeouts, the overall deadline, the plan (contexts, config, a job's opt-outs)."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest

from slurmpod.commands import LocalRunner
from slurmpod.prolog_epilog import runner
from slurmpod.prolog_epilog.check import Check, CheckEnv, GpuSource
from slurmpod.prolog_epilog.config import CheckSettings, Config
from slurmpod.prolog_epilog.job import JobInfo
from slurmpod.prolog_epilog.result import CheckResult, Context, Status, ok
from slurmpod.prolog_epilog.state import StateDir
from slurmpod.timing import Deadline, SystemClock

NEVER = threading.Event()  # never set: a check that waits on it hangs like a wedged driver


def _hangs(env: CheckEnv) -> CheckResult:
    NEVER.wait()
    return ok("hang")


def _quick(name: str) -> Check:
    return Check(name, frozenset(Context), lambda env: ok(name), timeout=1.0)


def _env(tmp_path: Path, context: Context = Context.PROLOG) -> CheckEnv:
    def no_library() -> object:
        raise AssertionError("these checks never touch NVML")

    return CheckEnv(context, Config(), JobInfo(), StateDir(tmp_path), GpuSource(no_library, 1.0, 1.0),  # type: ignore[arg-type]
                    LocalRunner())


def test_a_hanging_check_fails_with_timed_out_and_the_next_one_runs(tmp_path: Path) -> None:
    checks = (Check("stuck", frozenset(Context), _hangs, timeout=0.2), _quick("after"))
    planned = runner.plan(checks, Context.PROLOG, Config(), JobInfo())
    results = runner.run(planned, _env(tmp_path), Deadline(SystemClock(), 10.0), SystemClock())
    assert [(r.check, r.status) for r in results] == [("stuck", Status.FAIL), ("after", Status.OK)]
    assert results[0].reason == "timed out after 0.2 s"


def test_the_overall_deadline_bounds_every_check_and_skips_the_rest(tmp_path: Path) -> None:
    checks = (Check("stuck", frozenset(Context), _hangs, timeout=30.0), _quick("never-started"))
    planned = runner.plan(checks, Context.PROLOG, Config(), JobInfo())
    results = runner.run(planned, _env(tmp_path), Deadline(SystemClock(), 0.3, floor=0.0), SystemClock())
    assert results[0].status is Status.FAIL
    assert results[0].reason.startswith("timed out after 0.")  # the deadline's rest, not the check's 30 s
    assert (results[1].status, results[1].reason) == (Status.SKIPPED, "overall deadline reached before it started")


def test_a_short_timeout_after_a_long_one_is_kept_and_the_rest_run_on_a_new_thread(tmp_path: Path) -> None:
    """The checks share one thread; the waiter keeps each one's own timeout, even one shorter than the
    check before it had, and the checks after a stuck one run on a thread of their own, in order."""
    threads: list[tuple[str, int]] = []

    def noted(name: str) -> Check:
        def run(env: CheckEnv) -> CheckResult:
            threads.append((name, threading.get_ident()))
            return ok(name)
        return Check(name, frozenset(Context), run, timeout=30.0)

    def stuck(env: CheckEnv) -> CheckResult:
        threads.append(("stuck", threading.get_ident()))
        return _hangs(env)

    checks = (noted("first"), noted("second"), Check("stuck", frozenset(Context), stuck, timeout=0.2),
              noted("after"), noted("last"))
    planned = runner.plan(checks, Context.PROLOG, Config(), JobInfo())
    clock = SystemClock()
    start = clock.monotonic()
    verdicts = runner.run_verdicts(planned, _env(tmp_path), Deadline(clock, 10.0), clock,
                                   known={"second": ok("second", "from the agent's periodic run")})
    took = clock.monotonic() - start
    assert [v.check for v in verdicts] == ["first", "second", "stuck", "after", "last"]
    assert isinstance(verdicts[2], runner.Unknown) and verdicts[2].timeout == 0.2
    assert took < 5.0, f"the stuck check held the run {took:.1f}s (its timeout: 0.2 s, the one before: 30 s)"
    assert isinstance(verdicts[1], CheckResult) and verdicts[1].reason == "from the agent's periodic run"
    ran = dict(threads)
    assert [n for n, _ in threads] == ["first", "stuck", "after", "last"]  # the known one is not run
    assert ran["first"] == ran["stuck"] != ran["after"] == ran["last"] != threading.get_ident()


def test_a_crashing_check_is_reported_and_does_not_drain(tmp_path: Path) -> None:
    def boom(env: CheckEnv) -> CheckResult:
        raise KeyError("bug")

    results = runner.run(runner.plan((Check("buggy", frozenset(Context), boom),), Context.PROLOG, Config(), JobInfo()),
                         _env(tmp_path), Deadline(SystemClock(), 5.0), SystemClock())
    assert results[0].status is Status.FAIL
    assert "check crashed: KeyError" in results[0].reason
    assert runner.first_failure(results) is None


@pytest.mark.parametrize(("settings", "context", "expected"), [
    ({}, Context.PROLOG, ["a", "b"]),
    ({"a": CheckSettings(enabled=False)}, Context.PROLOG, ["b"]),
    ({"b": CheckSettings(contexts=frozenset({Context.PERIODIC}))}, Context.PROLOG, ["a"]),
    ({"b": CheckSettings(contexts=frozenset({Context.PERIODIC}))}, Context.PERIODIC, ["a", "b"]),
], ids=["defaults", "disabled", "moved-out-of-prolog", "moved-into-periodic"])
def test_plan_applies_the_config(settings: dict[str, CheckSettings], context: Context, expected: list[str]) -> None:
    planned = runner.plan((_quick("a"), _quick("b")), context, Config(checks=settings), JobInfo())
    assert [p.check.name for p in planned] == expected


@pytest.mark.parametrize(("skippable", "config_says", "skipped"), [
    (True, None, True), (False, None, False), (False, True, True), (True, False, False),
], ids=["skippable", "not-skippable", "config-allows", "config-forbids"])
def test_a_job_skips_only_skippable_checks(skippable: bool, config_says: bool | None, skipped: bool) -> None:
    check = Check("nvlink", frozenset(Context), lambda env: ok("nvlink"), skippable=skippable)
    cfg = Config(checks={"nvlink": CheckSettings(skippable=config_says)})
    planned = runner.plan((check,), Context.PROLOG, cfg, JobInfo(7, (), frozenset({"nvlink"})))
    assert bool(planned[0].skip_reason) is skipped


def test_plan_rechecks_the_check_that_drained_the_node() -> None:
    prolog_only = dataclasses.replace(_quick("gpu-memory"), contexts=frozenset({Context.PROLOG, Context.EPILOG}))
    checks = (_quick("a"), prolog_only)
    assert [p.check.name for p in runner.plan(checks, Context.PERIODIC, Config(), JobInfo())] == ["a"]
    planned = runner.plan(checks, Context.PERIODIC, Config(), JobInfo(), recheck="gpu-memory")
    assert [p.check.name for p in planned] == ["a", "gpu-memory"]
    off = Config(checks={"gpu-memory": CheckSettings(enabled=False)})
    assert [p.check.name for p in runner.plan(checks, Context.PERIODIC, off, JobInfo(), recheck="gpu-memory")] == ["a"]
