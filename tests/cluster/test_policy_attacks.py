"""The policy against the cluster's own users: what a user with a shell on the login pod can type.

Each test is one way around the policy, tried for real through sbatch and the plugin in slurmctld.
"""

from __future__ import annotations

import pytest
from clusterkit import Session, job
from policyvolume import BY_ACCOUNT, PolicyVolume
from waiting import wait_for

from slurmpod_host.cluster import runtime

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

CPU_ONLY_MAIN = """
tiers:
  - name: normal
    partitions: [main]
defaultTier: normal
cpuOnlyPartitions: [main]
"""
# Tiers as a site would write them, open to the researcher: what a modification may do is then limited by
# the caps, requeue and grace alone.
TIERS = """
tiers:
  - {name: preemptible, partitions: [preempt], requeue: true, maxTimeMinutes: 1440,
     graceSignal: {signal: USR1, seconds: 120, target: batch}}
  - {name: normal, partitions: [main], maxTimeMinutes: 10080}
  - {name: high, partitions: [high], maxTimeMinutes: 240, access: {users: [researcher]}}
defaultTier: normal
"""
FORGED = "FORGED-LOG-LINE"
DECISION_LOGGED_WORST_S = 10.0  # the shim's writer thread (50 ms) and Docker's log driver
# A refused submission must cost slurmctld nothing that stays: 500 of them, each with a large unique
# comment and a non-ASCII account (which the C fast path hands to Python), may grow its RSS this much.
ATTEMPTS = 500
RSS_GROWTH_MAX_KIB = 64 * 1024


def _sbatch(session: Session, *args: str) -> tuple[int, str]:
    r = session.as_researcher("sbatch", "--parsable", "-o", "/dev/null", "--hold", *args, "--wrap", "true")
    if r.code == 0:
        session.root_in(session.cluster.controller, "scancel", r.stdout.strip().split(";")[0], timeout=30)
    return r.code, r.stderr


def _rss_kib(session: Session) -> int:
    out = session.root_in(session.cluster.controller, "sh", "-c",
                          "grep VmRSS /proc/$(pgrep -x slurmctld)/status", timeout=30)
    assert out.code == 0, out.stderr
    return int(out.stdout.split()[1])


@pytest.mark.smoke  # the plugin ABI differs per Slurm version
def test_typed_account_opens_no_tier_on_the_shipped_policy(session: Session, policy: PolicyVolume) -> None:
    code, err = _sbatch(session, "-p", "high", "--account=inference", "-t", "30")
    assert code != 0
    assert "may not use the high tier" in err
    assert "Access/permission denied" in err  # the refusal's kind, not "Unspecified error"


def test_a_policy_trusting_typed_accounts_is_refused_naming_the_rule(session: Session,
                                                                     policy: PolicyVolume) -> None:
    policy.publish({"policy.yaml": BY_ACCOUNT})
    code, err = _sbatch(session, "-p", "high", "--account=inference", "-t", "30")
    assert code != 0
    assert "tiers[0].access.accounts" in err and "does not enforce" in err


def test_gpus_per_task_count_on_a_cpu_only_partition(session: Session, policy: PolicyVolume) -> None:
    policy.publish({"policy.yaml": CPU_ONLY_MAIN})
    code, err = _sbatch(session, "-p", "main", "-N2", "--gpus-per-task=1", "-t", "5")
    assert code != 0
    assert "Invalid generic resource" in err, err


def test_a_partition_holding_a_newline_writes_no_line_into_slurmctlds_log(session: Session,
                                                                          policy: PolicyVolume) -> None:
    """slurmctld logs an invalid partition by name after job_submit: the plugin refuses the name first."""
    code, err = _sbatch(session, "-p", f"main\n{FORGED}", "-t", "5")
    assert code != 0
    assert "partition holds a control character" in err, err

    def refused() -> str | None:
        lines = runtime.logs_tail(session.client, session.cluster.controller, 400).splitlines()
        return next((x for x in reversed(lines) if "rules=control-character field=partition" in x), None)
    wait_for("the refusal in slurmctld's log", refused, DECISION_LOGGED_WORST_S)
    lines = runtime.logs_tail(session.client, session.cluster.controller, 2000).splitlines()
    assert not [x for x in lines if FORGED in x]


def test_refused_submissions_keep_slurmctlds_memory_bounded(session: Session, policy: PolicyVolume) -> None:
    before = _rss_kib(session)
    script = (f'big=$(head -c 2000 /dev/zero | tr "\\0" x); n=0; for i in $(seq {ATTEMPTS}); do '
              'sbatch --hold -o /dev/null --account="é$i" --comment="$big$i" --wrap true '
              '>/dev/null 2>&1 || n=$((n+1)); done; echo $n')
    r = session.as_researcher("bash", "-c", script, timeout=600)
    assert r.code == 0, r.stderr
    assert int(r.stdout.strip()) == ATTEMPTS  # every one refused: a comment past Slurm's limit
    assert _rss_kib(session) - before < RSS_GROWTH_MAX_KIB


def _held(session: Session, *args: str) -> int:
    r = session.as_researcher("sbatch", "--parsable", "-o", "/dev/null", "--hold", *args, "--wrap", "true")
    assert r.code == 0, r.stderr
    return int(r.stdout.strip().split(";")[0])


def _update(session: Session, job_id: int, *fields: str) -> tuple[int, str]:
    r = session.as_researcher("scontrol", "update", f"jobid={job_id}", *fields)
    return r.code, r.stdout + r.stderr


@pytest.mark.smoke  # the plugin reads the job record through slurmctld, which differs per version
def test_a_held_week_long_job_moved_into_high_meets_the_cap(session: Session, policy: PolicyVolume) -> None:
    policy.publish({"policy.yaml": TIERS})
    week = _held(session, "-p", "main", "-t", "7-0")
    try:
        code, out = _update(session, week, "partition=high")
        assert code != 0, out
        assert "time limit" in out.lower(), out  # ESLURM_INVALID_TIME_LIMIT: "Requested time limit is invalid"
        record = job(session, week)
        assert record is not None and (record.partition, record.time_limit_min) == ("main", 10080), record
        # the same move with a time limit under the cap is the job the tier allows
        code, out = _update(session, week, "partition=high", "timelimit=200")
        assert code == 0, out
        record = job(session, week)
        assert record is not None and (record.partition, record.time_limit_min) == ("high", 200), record
    finally:
        session.root_in(session.cluster.controller, "scancel", str(week), timeout=30)


def test_a_job_moved_into_the_preemptible_tier_gets_requeue_or_is_refused(session: Session,
                                                                           policy: PolicyVolume) -> None:
    policy.publish({"policy.yaml": TIERS})
    plain = _held(session, "-p", "main", "-t", "60", "--no-requeue")
    graced = _held(session, "-p", "main", "-t", "60", "--no-requeue", "--signal=B:USR1@120")
    try:
        # without a grace signal, which slurmctld cannot add to an existing job: refused
        code, out = _update(session, plain, "partition=preempt")
        assert code != 0, out
        record = job(session, plain)
        assert record is not None and (record.partition, record.requeue) == ("main", False), record
        # with one: moved, and given the tier's requeue in the same update
        code, out = _update(session, graced, "partition=preempt")
        assert code == 0, out
        record = job(session, graced)
        assert record is not None and (record.partition, record.requeue) == ("preempt", True), record
        # and it cannot be taken back out of requeue while it is in the tier
        code, out = _update(session, graced, "requeue=0")
        record = job(session, graced)
        assert record is not None and record.requeue is True, (code, out, record)
    finally:
        session.root_in(session.cluster.controller, "scancel", str(plain), str(graced), timeout=30)
