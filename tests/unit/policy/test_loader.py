"""The policy YAML loader: the shipped policy is valid; every error names its key path."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from policykit import default_policy

from slurmpod.errors import BadInput
from slurmpod.policy import loader
from slurmpod.policy.model import FailMode, Oversize, SignalTarget, TopologyKind


def test_the_shipped_default_policy_loads() -> None:
    p = default_policy()
    assert p.fail_mode is FailMode.CLOSED
    assert [t.name for t in p.tiers] == ["preemptible", "normal", "high"]
    pre = p.tiers[0]
    assert pre.requeue and pre.grace is not None and pre.grace.signal == 10 and pre.grace.seconds == 120
    assert pre.grace.target is SignalTarget.STEPS
    assert p.default_tier == "normal" and "cpu" in p.cpu_only_partitions
    assert p.topology.kind is TopologyKind.NONE and p.topology.oversize is Oversize.REJECT


@pytest.mark.parametrize(("text", "field", "reason"), [
    ("failMode: maybe", "failMode", "must be one of"),
    ("failmode: open", "failmode", "unknown key"),
    ("topology: {plugin: block}", "topology.groupSize", "required"),
    ("topology: {plugin: mesh, groupSize: 2}", "topology.plugin", "must be one of"),
    ("topology: {plugin: tree, groupSize: 2, oversize: segment}", "topology.oversize", "need topology/block"),
    ("topology: {plugin: block, groupSize: 2, optOut: {people: [a]}}", "topology.optOut.people", "unknown key"),
    ("tiers: [{name: a, partitions: [p], maxTimeMinute: 3}]", "tiers[0].maxTimeMinute", "unknown key"),
    ("tiers: [{name: a, partitions: p}]", "tiers[0].partitions", "list of names"),
    ("tiers: [{name: a}]", "tiers[0]", "partitions or qos"),
    ("tiers: [{name: a, partitions: [p], graceSignal: {signal: USR9, seconds: 5}}]",
     "tiers[0].graceSignal.signal", "signal name"),
    ("tiers: [{name: a, partitions: [p], graceSignal: {signal: USR1, seconds: 70000}}]",
     "tiers[0].graceSignal.seconds", "[1, 65535]"),
    ("tiers: [{name: a, partitions: [p], access: {users: [x], teams: [y]}}]", "tiers[0].access.teams", "unknown key"),
    ("tiers: [{name: a, partitions: [p]}, {name: a, qos: [q]}]", "tiers", "more than once"),
    ("tiers: [{name: a, partitions: [p]}, {name: b, partitions: [p]}]", "tiers[1]", "already mapped"),
    ("tiers: [{name: a, partitions: [p]}]\ndefaultTier: b", "defaultTier", "one of the tiers"),
    ("rules: [{file: /nonexistent/rules.py}]", "rules[0].file", "no such Python file"),
    ("- a list", "(document)", "mapping"),
], ids=["fail-mode", "top-typo", "group-size", "plugin", "tree-segment", "opt-out-key", "tier-typo",
        "partitions-string", "tier-unmatched", "signal", "warn-time", "access-key", "duplicate-tier",
        "partition-twice", "default-tier", "rule-file", "not-a-mapping"])
def test_errors_name_the_key_path(text: str, field: str, reason: str, tmp_path: Path) -> None:
    with pytest.raises(BadInput) as exc:
        loader.parse(yaml.safe_load(text), tmp_path)
    assert any(p.field == field and reason in p.reason for p in exc.value.problems), exc.value


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    with pytest.raises(BadInput) as exc:
        loader.parse(yaml.safe_load("failMode: x\ntopology: {plugin: y}\ncpuOnlyPartitions: z"), tmp_path)
    assert {p.field for p in exc.value.problems} == {"failMode", "topology.plugin", "cpuOnlyPartitions"}


def test_broken_yaml_and_custom_rule_errors(tmp_path: Path) -> None:
    bad = tmp_path / "policy.yaml"
    bad.write_text("tiers: [\n", encoding="utf-8")
    with pytest.raises(BadInput, match="not valid YAML"):
        loader.load(bad)
    (tmp_path / "boom.py").write_text("raise RuntimeError('at import')\n", encoding="utf-8")
    (tmp_path / "ok.py").write_text("def rule(job, decision):\n    return None\n", encoding="utf-8")
    with pytest.raises(BadInput) as exc:
        loader.parse(yaml.safe_load("rules: [{file: boom.py}, {file: ok.py, function: nope}]"), tmp_path)
    assert [(p.field, p.reason.split(":")[0]) for p in exc.value.problems] == [
        ("rules[0].file", "failed to load"), ("rules[1].function", "no such function in ok.py")]


@pytest.mark.parametrize(("raw", "mode"), [
    ({"failMode": "open", "tiers": "broken"}, FailMode.OPEN),
    ({"failMode": "closed"}, FailMode.CLOSED),
    ("garbage", FailMode.CLOSED),
], ids=["open", "closed", "not-a-mapping"])
def test_an_invalid_policy_keeps_the_fail_mode_it_asks_for(raw: object, mode: FailMode) -> None:
    assert loader.fail_mode_of(raw) is mode
