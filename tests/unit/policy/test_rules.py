"""The built-in rules: preemption tiers, CPU-only partitions, and topology placement."""

from __future__ import annotations

from typing import Any

import pytest
from policykit import BLOCK, TREE, default_policy, job, policy

from slurmpod import well_known as wk
from slurmpod.policy import decide
from slurmpod.policy.decision import Refusal, Verdict
from slurmpod.policy.request import TIME_INFINITE, Sharing

TIERS = """
tiers:
  - {name: preemptible, partitions: [preempt], qos: [scavenger], requeue: true, maxTimeMinutes: 600,
     graceSignal: {signal: USR1, seconds: 90, target: batch}}
  - {name: normal, partitions: [main], maxTimeMinutes: 1440, overTime: clamp}
  - {name: high, partitions: [high], maxTimeMinutes: 120,
     access: {users: [boss], groups: [oncall], accounts: [inference]}}
defaultTier: normal
cpuOnlyPartitions: [cpu]
"""


@pytest.mark.parametrize(("kw", "verdict", "changes", "words"), [
    ({"partition": "preempt", "time_limit": 60}, Verdict.MODIFY,
     {"requeue": True, "warn_signal": 10, "warn_time": 90, "warn_flags": 1}, "requeue enabled"),
    ({"qos": "scavenger", "time_limit": 60, "requeue": True, "warn_signal": 12, "warn_time": 30}, Verdict.ACCEPT,
     {}, ""),
    ({"partition": "preempt", "time_limit": 601}, Verdict.REJECT, {}, "exceeds the preemptible tier's cap of 600"),
    ({"partition": "preempt", "time_limit": TIME_INFINITE}, Verdict.REJECT, {}, "UNLIMITED exceeds"),
    ({"partition": "main", "time_limit": 3000}, Verdict.MODIFY, {"time_limit": 1440}, "lowered from 3000 min"),
    ({"time_limit": 30}, Verdict.ACCEPT, {}, ""),
    ({}, Verdict.MODIFY, {"time_limit": 1440}, "set to the normal cap"),
    ({"partition": "high", "time_limit": 60}, Verdict.REJECT, {}, "may not use the high tier"),
    ({"partition": "high", "time_limit": 60, "user": "boss"}, Verdict.ACCEPT, {}, ""),
    ({"partition": "high", "time_limit": 60, "groups": ("oncall",)}, Verdict.ACCEPT, {}, ""),
    ({"partition": "high", "time_limit": 60, "account": "inference"}, Verdict.ACCEPT, {}, ""),
    ({"partition": "main,high", "time_limit": 60}, Verdict.REJECT, {}, "may not use the high tier"),
    ({"partition": "cpu", "tres_per_node": "gres/gpu:1"}, Verdict.REJECT, {}, "partition cpu has no GPUs"),
    ({"partition": "cpu", "time_limit": 10}, Verdict.ACCEPT, {}, ""),
    ({"partition": "other", "time_limit": 10}, Verdict.ACCEPT, {}, ""),
], ids=["preemptible-gets-requeue-and-signal", "user-signal-kept", "over-cap", "unlimited-over-cap", "clamped",
        "default-tier", "unset-time-gets-cap", "high-refused", "high-user", "high-group", "high-account",
        "any-listed-partition", "gpu-in-cpu-only", "cpu-job-in-cpu", "unknown-partition-default-tier"])
def test_tier_rules(kw: dict[str, Any], verdict: Verdict, changes: dict[str, Any], words: str) -> None:
    d = decide.decide(policy(TIERS), job(**kw))
    assert d.verdict is verdict, d
    assert d.changes.as_dict() == changes
    assert words in d.message


@pytest.mark.parametrize(("text", "kw", "verdict", "changes", "words"), [
    (BLOCK, {"min_nodes": 2, "tres_per_node": "gres/gpu:8"}, Verdict.MODIFY, {"segment_size": 2}, "--segment=2"),
    (BLOCK, {"min_nodes": 4, "tres_per_node": "gres/gpu:8"}, Verdict.MODIFY, {"segment_size": 4}, "one block"),
    (BLOCK, {"min_nodes": 12, "tres_per_node": "gres/gpu:8"}, Verdict.MODIFY, {"segment_size": 4}, "3 whole blocks"),
    (BLOCK, {"min_nodes": 6, "tres_per_node": "gres/gpu:8"}, Verdict.REJECT, {}, "a multiple of 4"),
    (BLOCK, {"min_nodes": 1, "tres_per_node": "gres/gpu:8"}, Verdict.ACCEPT, {}, ""),
    (BLOCK, {"min_nodes": 3}, Verdict.ACCEPT, {}, ""),
    (BLOCK, {"min_nodes": 2, "tres_per_node": "gres/gpu:8", "segment_size": 1}, Verdict.ACCEPT, {}, ""),
    (BLOCK, {"min_nodes": 2, "max_nodes": 3, "tres_per_node": "gres/gpu:8"}, Verdict.ACCEPT, {}, "node range (2-3)"),
    (BLOCK, {"min_nodes": 2, "max_nodes": 2, "tres_per_node": "gres/gpu:8"}, Verdict.MODIFY, {"segment_size": 2},
     ""),
    (TREE, {"min_nodes": 4, "tres_per_job": "gres/gpu:32"}, Verdict.MODIFY, {"req_switch": 1, "wait4switch": 300},
     "--switches=1@300s"),
    (TREE, {"min_nodes": 5, "tres_per_node": "gres/gpu:8"}, Verdict.REJECT, {},
     "a 5-node GPU job does not fit one leaf switch of 4"),
    (TREE, {"min_nodes": 2, "tres_per_node": "gres/gpu:8", "req_switch": 2}, Verdict.ACCEPT, {}, ""),
    ("topology: {plugin: block, groupSize: 4, oversize: allow}", {"min_nodes": 6, "tres_per_node": "gres/gpu:1"},
     Verdict.ACCEPT, {}, ""),
    ("topology: {plugin: block, groupSize: 4, gpuJobsOnly: false}", {"min_nodes": 3}, Verdict.MODIFY,
     {"segment_size": 3}, ""),
    ("topology: {plugin: tree, groupSize: 2, gpuJobsOnly: false, oversize: reject}", {"min_nodes": 3},
     Verdict.REJECT, {}, "a 3-node job does not fit one leaf switch of 2 nodes: ask for at most 2 nodes"),
], ids=["block-fits", "block-exact", "block-whole-segments", "block-oversize-rejected", "single-node",
        "cpu-job", "user-segment-kept", "node-range", "max-equals-min",
        "tree-fits", "tree-oversize-rejected", "user-switches-kept", "oversize-allowed",
        "cpu-jobs-too", "cpu-job-oversize-names-no-gpus"])
def test_topology_rules(text: str, kw: dict[str, Any], verdict: Verdict, changes: dict[str, Any], words: str) -> None:
    d = decide.decide(policy(text), job(**kw))
    assert d.verdict is verdict, d
    assert d.changes.as_dict() == changes
    assert words in d.message


WHOLE = "topology: {plugin: block, groupSize: 4, wholeNodeGpus: 8, optOut: {users: [ops]}}"


@pytest.mark.parametrize(("kw", "verdict", "changes", "words"), [
    ({"min_nodes": 2, "tres_per_node": "gres/gpu:h100:2"}, Verdict.MODIFY,
     {"tres_per_node": "gres/gpu:h100:8", "sharing": "exclusive", "segment_size": 2}, "whole nodes"),
    ({"min_nodes": 2, "tres_per_node": "gres/gpu:8", "sharing": Sharing.EXCLUSIVE}, Verdict.MODIFY,
     {"segment_size": 2}, ""),
    ({"min_nodes": 2, "tres_per_job": "gres/gpu:16"}, Verdict.MODIFY, {"segment_size": 2}, ""),
    ({"min_nodes": 2, "tres_per_job": "gres/gpu:10"}, Verdict.REJECT, {}, "--gpus-per-node=8"),
    ({"min_nodes": 2, "tres_per_node": "gres/gpu:9"}, Verdict.REJECT, {}, "a node has 8 GPUs"),
    ({"min_nodes": 2, "tres_per_node": "gres/gpu:2", "user": "ops", "comment": wk.POLICY_OPT_OUT_TOKEN},
     Verdict.ACCEPT, {}, "opt-out"),
    ({"min_nodes": 2, "tres_per_node": "gres/gpu:2", "comment": f"x {wk.POLICY_OPT_OUT_TOKEN}"}, Verdict.REJECT, {},
     "may not opt out"),
], ids=["raised-to-whole-node", "already-whole", "per-job-whole", "per-job-partial", "too-many", "opt-out-allowed",
        "opt-out-refused"])
def test_whole_node_gpus_and_opt_out(kw: dict[str, Any], verdict: Verdict, changes: dict[str, Any],
                                     words: str) -> None:
    d = decide.decide(policy(WHOLE), job(**kw))
    assert d.verdict is verdict, d
    assert d.changes.as_dict() == changes
    assert words in d.message


def test_default_policy_answers_the_three_demo_jobs() -> None:
    p = default_policy()
    assert decide.decide(p, job(partition="main", time_limit=10)).verdict is Verdict.ACCEPT
    assert decide.decide(p, job(partition="preempt", time_limit=10)).verdict is Verdict.MODIFY
    rejected = decide.decide(p, job(partition="cpu", tres_per_job="gres/gpu:1"))
    assert rejected.verdict is Verdict.REJECT and "no GPUs" in rejected.message


# job_modify requests are the job's record merged with the change (the plugin merges them); moves_tier says
# the change names a partition, QoS or account other than the job's.
@pytest.mark.parametrize(("kw", "verdict", "changes", "words"), [
    ({"partition": "main", "time_limit": 30}, Verdict.ACCEPT, {}, ""),
    ({"partition": "high", "time_limit": 10080, "moves_tier": True, "user": "boss"}, Verdict.REJECT, {},
     "exceeds the high tier's cap of 120"),
    ({"partition": "high", "time_limit": 60, "moves_tier": True}, Verdict.REJECT, {}, "may not use the high tier"),
    ({"partition": "high", "time_limit": 60, "moves_tier": True, "user": "boss"}, Verdict.ACCEPT, {}, ""),
    ({"partition": "high", "time_limit": 60, "user": "root"}, Verdict.ACCEPT, {}, ""),
    ({"partition": "main", "time_limit": 3000}, Verdict.MODIFY, {"time_limit": 1440}, "lowered from 3000"),
    ({"partition": "preempt", "time_limit": 60, "moves_tier": True, "warn_signal": 10, "warn_time": 90},
     Verdict.MODIFY, {"requeue": True}, "requeue enabled"),
    ({"partition": "preempt", "time_limit": 60, "moves_tier": True}, Verdict.REJECT, {},
     "cannot be given its grace signal"),
    ({"partition": "preempt", "time_limit": 601, "requeue": True, "warn_signal": 10}, Verdict.REJECT, {},
     "exceeds the preemptible tier's cap of 600"),
    ({"partition": "main", "min_nodes": 2, "tres_per_node": "gres/gpu:2", "time_limit": 30}, Verdict.ACCEPT, {},
     ""),
], ids=["unchanged-tier", "into-high-past-cap", "into-high-refused", "into-high-allowed",
        "operator-in-high-not-a-move", "over-cap-clamped", "into-preempt-requeued", "into-preempt-without-grace",
        "preempt-over-cap", "topology-left-alone"])
def test_job_modify_is_judged_on_the_job_it_produces(kw: dict[str, Any], verdict: Verdict,
                                                     changes: dict[str, Any], words: str) -> None:
    d = decide.decide(policy(TIERS + BLOCK), job(is_modify=True, job_id=42, **kw))
    assert d.verdict is verdict, d
    assert d.changes.as_dict() == changes
    assert words in d.message
    assert len(set(d.rules)) == len(d.rules), d.rules


@pytest.mark.parametrize("kw", [
    {"tres_per_task": "gres/gpu:1", "min_nodes": 2},
    {"tres_per_socket": "gres/gpu:1"},
    {"tres_per_job": "gres/gpu:1"},
    {"tres_per_node": "gres/gpu:1"},
], ids=["gpus-per-task", "gpus-per-socket", "gpus", "gpus-per-node"])
def test_every_gpu_form_is_refused_in_a_cpu_only_partition(kw: dict[str, Any]) -> None:
    d = decide.decide(policy(TIERS), job(partition="cpu", **kw))
    assert d.verdict is Verdict.REJECT and "has no GPUs" in d.message
    assert d.refusal is Refusal.GRES


@pytest.mark.parametrize("kw", [{"tres_per_task": "gres/gpu:1"}, {"tres_per_socket": "gres/gpu:2"}],
                         ids=["gpus-per-task", "gpus-per-socket"])
def test_gpus_per_task_or_socket_on_two_nodes_do_not_escape_whole_node_gpus(kw: dict[str, Any]) -> None:
    """-N2 --gpus-per-task=1 once counted as a CPU job: no whole nodes, no placement."""
    d = decide.decide(policy("topology: {plugin: block, groupSize: 4, wholeNodeGpus: 8}\n"), job(min_nodes=2, **kw))
    assert d.verdict is Verdict.REJECT and "--gpus-per-node=8" in d.message
    assert d.refusal is Refusal.GRES


def test_gpus_per_task_on_two_nodes_are_placed_by_the_topology_rule() -> None:
    d = decide.decide(policy(BLOCK), job(min_nodes=2, tres_per_task="gres/gpu:1"))
    assert d.verdict is Verdict.MODIFY and d.changes.segment_size == 2


@pytest.mark.parametrize(("kw", "refusal"), [
    ({"partition": "high", "user": "eve"}, Refusal.ACCESS),
    ({"partition": "preempt", "time_limit": 601}, Refusal.TIME),
], ids=["tier-access", "time-cap"])
def test_a_rejection_says_what_kind_it_is(kw: dict[str, Any], refusal: Refusal) -> None:
    assert decide.decide(policy(TIERS), job(**kw)).refusal is refusal
