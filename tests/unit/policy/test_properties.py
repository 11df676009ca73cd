"""Properties: any JobRequest gets a valid Decision from any of our policies, and decide never raises."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from policykit import BLOCK, TREE, default_policy, policy

from slurmpod.errors import BadInput
from slurmpod.policy import decide, loader, request
from slurmpod.policy.decision import REJECT_PREFIX, Decision, Verdict
from slurmpod.policy.model import Policy
from slurmpod.policy.request import TIME_INFINITE, JobRequest, Sharing

WHOLE = "topology: {plugin: block, groupSize: 4, wholeNodeGpus: 8, oversize: reject}\n" \
        "tiers: [{name: p, partitions: [preempt], requeue: true, maxTimeMinutes: 60, overTime: clamp,\n" \
        "         graceSignal: {signal: TERM, seconds: 30, target: batch}}]\ncpuOnlyPartitions: [cpu]\n"
POLICIES: list[Policy] = [default_policy(), policy(BLOCK), policy(TREE), policy(WHOLE), policy("{}")]

names = st.sampled_from(["main", "preempt", "high", "cpu", "gpu", "main,high", "preempt,cpu", "x"])
tres = st.one_of(st.none(), st.sampled_from(["gres/gpu:8", "gres/gpu:h100:2", "gres/gpu", "cpu=2,gres/gpu:3"]),
                 st.text(max_size=20))
small = st.one_of(st.none(), st.integers(min_value=0, max_value=70000))
jobs = st.builds(
    JobRequest, uid=st.integers(0, 2**32 - 1), user=st.text(max_size=8),
    groups=st.lists(st.sampled_from(["ml", "oncall", "slurmpod-admins"]), max_size=2).map(tuple),
    account=st.one_of(st.none(), st.sampled_from(["inference", "research"])), partition=st.one_of(st.none(), names),
    qos=st.one_of(st.none(), st.sampled_from(["high", "preemptible", "normal"])), min_nodes=small, max_nodes=small,
    tres_per_node=tres, tres_per_job=tres, time_limit=st.one_of(small, st.just(TIME_INFINITE)), req_switch=small,
    wait4switch=small, segment_size=small, sharing=st.sampled_from(list(Sharing)),
    requeue=st.one_of(st.none(), st.booleans()), comment=st.one_of(st.none(), st.text(max_size=30),
                                                                    st.just("slurmpod:no-topology")),
    warn_signal=st.one_of(st.none(), st.integers(1, 64)), warn_flags=st.integers(0, 0xFFFF))


def _valid(d: Decision) -> None:
    assert isinstance(d, Decision) and isinstance(d.verdict, Verdict)
    if d.verdict is Verdict.REJECT:
        assert d.message and not d.changes
    if d.verdict is Verdict.MODIFY:
        assert d.changes
    if d.verdict is Verdict.ACCEPT:
        assert not d.changes
    assert not d.message.startswith(REJECT_PREFIX), "a built-in rule raised"
    for key, value in d.changes.as_dict().items():
        if key in {"segment_size", "warn_signal", "warn_time", "warn_flags"}:
            assert 0 <= value <= 0xFFFF, (key, value)


@settings(max_examples=300, deadline=None)
@given(job=jobs, which=st.integers(0, len(POLICIES) - 1))
def test_any_job_gets_a_valid_decision(job: JobRequest, which: int) -> None:
    _valid(decide.decide(POLICIES[which], job))


@settings(max_examples=200, deadline=None)
@given(job=jobs)
def test_decide_is_idempotent_on_its_own_changes(job: JobRequest) -> None:
    """A modified job, submitted again with the changes applied, is accepted as is (job_modify stays quiet)."""
    p = POLICIES[3]
    first = decide.decide(p, job)
    if first.verdict is not Verdict.MODIFY:
        return
    doc = request.to_mapping(job)
    doc.update(first.changes.as_dict())
    again = decide.decide(p, request.from_mapping(doc))
    assert again.verdict is Verdict.ACCEPT, (first, again)


def test_json_round_trips_unicode() -> None:
    job = JobRequest(uid=1, user="x", comment="é")
    assert request.from_mapping(request.to_mapping(job)) == job


KEYS = ["failMode", "topology", "tiers", "defaultTier", "cpuOnlyPartitions", "rules", "plugin", "groupSize",
        "oversize", "wholeNodeGpus", "optOut", "name", "partitions", "qos", "requeue", "graceSignal", "signal",
        "seconds", "target", "maxTimeMinutes", "overTime", "access", "users", "groups", "accounts", "x"]
leaves = st.one_of(st.none(), st.booleans(), st.integers(-5, 70000), st.sampled_from(
    ["open", "closed", "block", "tree", "none", "segment", "reject", "USR1", "main", "a b", ""]), st.floats())
documents = st.recursive(leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)), max_leaves=25)


@settings(max_examples=400, deadline=None)
@given(doc=documents)
def test_the_loader_answers_any_document_with_a_policy_or_bad_input(doc: object) -> None:
    """The plugin relies on it: anything else would escape as an unnamed error."""
    try:
        loaded = loader.parse(doc, Path("/nonexistent"))
    except BadInput as exc:
        assert exc.problems and all(p.field for p in exc.problems)
    else:
        assert isinstance(loaded, Policy)
