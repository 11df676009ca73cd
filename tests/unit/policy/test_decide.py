"""decide.decide never raises: a failing custom rule rejects the job (fail-closed) or accepts it (fail-open)."""

from __future__ import annotations

from pathlib import Path

import pytest
from policykit import job, policy

from slurmpod.policy import decide
from slurmpod.policy.decision import REJECT_PREFIX, Changes, Verdict

RULES = """
def explode(job, decision):
    raise ValueError("no budget table for " + job.user)

def tag(job, decision):
    if job.partition == "debug":
        return decision.reject("debug is closed today")
    return None

def wrong_type(job, decision):
    return "accept"
"""


@pytest.fixture
def rules_dir(tmp_path: Path) -> Path:
    (tmp_path / "site_rules.py").write_text(RULES, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(("mode", "verdict", "message"), [
    ("closed", Verdict.REJECT,
     REJECT_PREFIX + "rule site_rules.py:explode failed: ValueError: no budget table for ann"),
    ("open", Verdict.ACCEPT, "policy error ignored (failMode: open): rule site_rules.py:explode failed"),
], ids=["fail-closed", "fail-open"])
def test_a_rule_that_raises(mode: str, verdict: Verdict, message: str, rules_dir: Path) -> None:
    p = policy(f"failMode: {mode}\nrules: [{{file: site_rules.py, function: explode}}]", rules_dir)
    d = decide.decide(p, job(user="ann"))
    assert d.verdict is verdict
    assert d.message.startswith(message)
    assert d.changes == Changes()


def test_a_rule_may_reject_and_sees_the_built_in_decision(rules_dir: Path) -> None:
    p = policy("rules: [{file: site_rules.py, function: tag}]", rules_dir)
    assert decide.decide(p, job(partition="debug")).message == "debug is closed today"
    assert decide.decide(p, job(partition="main")).verdict is Verdict.ACCEPT


def test_a_rule_returning_something_else_is_a_policy_error(rules_dir: Path) -> None:
    p = policy("rules: [{file: site_rules.py, function: wrong_type}]", rules_dir)
    d = decide.decide(p, job())
    assert d.verdict is Verdict.REJECT and "returned str, not a Decision" in d.message
