"""The demo's policy step: the shipped policy answers its three submissions as the demo announces."""

from __future__ import annotations

import policykit
import pytest

from slurmpod.policy import decide
from slurmpod.policy.request import JobRequest
from slurmpod_host.cluster import demo, jobs

# The JobRequest slurmctld's plugin builds from each case's sbatch options (time in minutes).
REQUESTS = {
    "-p main -t 30": policykit.job(partition="main", time_limit=30),
    "-p preempt -t 30 --no-requeue": policykit.job(partition="preempt", time_limit=30, requeue=False),
    "-p high -t 30": policykit.job(partition="high", time_limit=30),
}


@pytest.mark.parametrize("case", demo.POLICY_CASES, ids=[c.verdict.value for c in demo.POLICY_CASES])
def test_shipped_policy_answers_the_demo_cases(case: demo.PolicyCase) -> None:
    req: JobRequest = REQUESTS[" ".join(case.argv)]
    decision = decide.decide(policykit.default_policy(), req)
    assert decision.verdict is case.verdict, decision
    if case.verdict.value == "modify":
        assert decision.changes.requeue is True
    if case.verdict.value == "reject":
        assert decision.message


def test_one_case_of_each_verdict() -> None:
    assert sorted(c.verdict.value for c in demo.POLICY_CASES) == ["accept", "modify", "reject"]


@pytest.mark.parametrize(
    ("job", "shown"),
    [(jobs.JobRecord(7, "PENDING", "JobHeldUser", partition="preempt", requeue=True, time_limit_min=30),
      "Partition=preempt TimeLimit=00:30:00 Requeue=1"),
     (jobs.JobRecord(7, "PENDING", "JobHeldUser", partition="main"), "Partition=main TimeLimit=UNLIMITED Requeue=0")],
    ids=["modified", "no-limit"],
)
def test_job_summary(job: jobs.JobRecord, shown: str) -> None:
    assert demo.job_summary(job) == shown
