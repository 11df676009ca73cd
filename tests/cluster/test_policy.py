"""The job_submit/slurmpod plugin in the cluster's real slurmctld: accept, modify, reject, a policy that
raises, and a policy edited live.

It relies on this wiring: the controller image carries job_submit_slurmpod.so,
slurm.conf has JobSubmitPlugins=slurmpod, and controller.yaml mounts the `policy` ConfigMap
(the chart's `policy` ConfigMap) as a volume named `policy` at /etc/slurmpod-policy. Each test writes its
own policy the way kubelet updates a mounted ConfigMap: a new `..<stamp>` directory, then `..data`
swapped atomically; the plugin re-reads the file on the next submission. The shipped policy comes back
at the end.
"""

from __future__ import annotations

import shlex
import time

import pytest
from clusterkit import WORKERS, Session, all_idle, job, lift_requeue_hold, wait_for
from policyvolume import PolicyVolume

from slurmpod import well_known as wk
from slurmpod_host.cluster import runtime

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

# The cluster's default partition is `main`: the tests make it the preemptible tier.
TIERED = """
tiers:
  - name: preemptible
    partitions: [main]
    requeue: true
    graceSignal: {signal: USR1, seconds: 120}
    maxTimeMinutes: 60
    overTime: reject
defaultTier: preemptible  # sbatch without -p leaves job_desc.partition unset at job_submit time
"""
RAISING = "rules: [{file: rules.py, function: rule}]\n"
RAISING_RULE = "def rule(job, decision):\n    raise RuntimeError('quota service unreachable')\n"


def _sbatch(session: Session, *args: str) -> tuple[int, str, str]:
    r = session.as_researcher("sbatch", "--parsable", "-o", "/dev/null", "--hold", *args, "--wrap", "true")
    return r.code, r.stdout.strip().split(";")[0], r.stderr


def _cancel(session: Session, job_id: str) -> None:
    session.root_in(session.cluster.controller, "scancel", job_id, timeout=30)


def _slurmctld_pid(session: Session) -> str:
    out = session.root_in(session.cluster.controller, "pgrep", "-x", "slurmctld", timeout=30)
    assert out.code == 0, "slurmctld is not running"
    return out.stdout.strip()


@pytest.mark.smoke  # the plugin ABI differs per Slurm version
def test_accepted_job_is_unchanged(session: Session, policy: PolicyVolume) -> None:
    policy.publish({"policy.yaml": TIERED})
    code, job_id, err = _sbatch(session, "-t", "30", "--requeue", "--signal=USR1@300")
    assert code == 0, err
    try:
        record = job(session, job_id)
        assert (record.time_limit_min, record.requeue) == (30, True), record
    finally:
        _cancel(session, job_id)


@pytest.mark.smoke  # the plugin ABI differs per Slurm version
def test_modified_job_shows_in_scontrol(session: Session, policy: PolicyVolume) -> None:
    policy.publish({"policy.yaml": TIERED})
    code, job_id, err = _sbatch(session, "--no-requeue")
    assert code == 0, err
    try:
        record = job(session, job_id)
        assert record.time_limit_min == 60, record  # set to the tier's cap
        assert record.requeue, record  # preemptible: requeue forced on
        assert "requeue enabled" in err  # the plugin's message reaches the user (sbatch prints it at info)
    finally:
        _cancel(session, job_id)


DECISION_LOGGED_WORST_S = 10.0


@pytest.mark.smoke  # the plugin ABI differs per Slurm version
def test_rejected_job_tells_the_user_why(session: Session, policy: PolicyVolume) -> None:
    policy.publish({"policy.yaml": TIERED})
    code, _, err = _sbatch(session, "-t", "120")
    assert code != 0
    assert "time limit 120 min exceeds the preemptible tier's cap of 60 min" in err

    def logged() -> str | None:
        lines = runtime.logs_tail(session.client, session.cluster.controller, 400).splitlines()
        return next((x for x in reversed(lines) if "job_submit/slurmpod: submit job=new" in x
                     and "verdict=reject" in x and "cap of 60 min" in x), None)
    # The plugin's writer thread logs a decision within 50 ms; Docker's log driver adds its own delay.
    line, _ = wait_for("the rejection in slurmctld's log", logged, DECISION_LOGGED_WORST_S)
    assert f"user={wk.DEMO_USER}" in line, line


@pytest.mark.smoke  # the plugin ABI differs per Slurm version
def test_a_policy_that_raises_rejects_and_slurmctld_stays_up(session: Session, policy: PolicyVolume) -> None:
    pid = _slurmctld_pid(session)
    policy.publish({"policy.yaml": RAISING, "rules.py": RAISING_RULE})
    code, _, err = _sbatch(session, "-t", "5")
    assert code != 0
    assert "rejected by cluster policy: rule rules.py:rule failed: RuntimeError: quota service unreachable" in err
    assert _slurmctld_pid(session) == pid
    assert session.root_in(session.cluster.controller, "scontrol", "ping", timeout=30).code == 0


@pytest.mark.smoke  # the plugin ABI differs per Slurm version
def test_policy_edited_live_takes_effect_on_the_next_submission(session: Session, policy: PolicyVolume) -> None:
    pid = _slurmctld_pid(session)
    policy.publish({"policy.yaml": TIERED})
    code, job_id, err = _sbatch(session, "-t", "30")
    assert code == 0, err
    _cancel(session, job_id)
    policy.publish({"policy.yaml": TIERED.replace("maxTimeMinutes: 60", "maxTimeMinutes: 10")})
    time.sleep(0.01)  # a new mtime even on a coarse-timestamp filesystem (the inode changes anyway)
    code, _, err = _sbatch(session, "-t", "30")
    assert code != 0 and "cap of 10 min" in err
    assert _slurmctld_pid(session) == pid  # no restart, no reconfigure


# The shipped cluster spec's partitions over the same two workers: preempt (PriorityTier 1,
# PreemptMode=REQUEUE, GraceTime 30), main (2), high (3). Ref: https://slurm.schedmd.com/preempt.html
PREEMPTION = """
tiers:
  - name: preemptible
    partitions: [preempt]
    requeue: true
  - name: normal
    partitions: [main]
  - name: high
    partitions: [high]
defaultTier: normal
"""
# Worst cases, bounded and printed rather than asserted as timings: a start waits at most one scheduling
# pass (the main loop runs it at least every 60 s, backfill every 30 s by default); a preempted batch job
# is killed at once by SIGTERM (`sleep`), inside GraceTime (30 s); a requeued job may be held back up to
# the credential lifetime (120 s by default) before it is eligible again, then runs 20 s.
# Ref: https://slurm.schedmd.com/sched_config.html, https://slurm.schedmd.com/slurm.conf.html#OPT_GraceTime
START_WAIT_S = 90.0
PREEMPT_WAIT_S = 120.0
REQUEUE_COMPLETE_WAIT_S = 300.0


def _state(session: Session, job_id: str) -> tuple[str, int]:
    record = job(session, job_id)
    return record.state, record.restarts


def test_high_tier_preempts_a_preemptible_job_which_is_requeued_and_completes(
        session: Session, policy: PolicyVolume) -> None:
    policy.publish({"policy.yaml": PREEMPTION})
    all_idle(session)
    both = ("-N", str(WORKERS), "--exclusive", "-o", "/dev/null")
    low = session.as_researcher("sbatch", "--parsable", "-p", "preempt", *both, "-t", "10", "--wrap", "sleep 20")
    assert low.code == 0, low.stderr
    low_id = low.stdout.strip().split(";")[0]
    high_id = ""
    try:
        _, took = wait_for(f"job {low_id} running", lambda: _state(session, low_id)[0] == "RUNNING" or None,
                           START_WAIT_S, poll=1.0)
        print(f"preemptible job {low_id} running after {took:.1f} s (bound {START_WAIT_S:.0f} s)")
        assert job(session, low_id).requeue  # forced on by the preemptible tier
        high = session.as_researcher("sbatch", "--parsable", "-p", "high", *both, "-t", "5", "--wrap", "sleep 5")
        assert high.code == 0, high.stderr
        high_id = high.stdout.strip().split(";")[0]

        def preempted() -> bool | None:
            restarts, high_state = _state(session, low_id)[1], _state(session, high_id)[0]
            return (restarts >= 1 and high_state in ("RUNNING", "COMPLETED")) or None

        _, took = wait_for(f"job {low_id} preempted by {high_id}", preempted, PREEMPT_WAIT_S, poll=1.0)
        print(f"high-tier job {high_id} running, {low_id} requeued, after {took:.1f} s (bound {PREEMPT_WAIT_S:.0f} s)")
        requeued = job(session, low_id)
        assert requeued.state not in ("CANCELLED", "FAILED", "PREEMPTED")
        lift_requeue_hold(session, low_id, requeued)

        _, took = wait_for(f"job {low_id} completed after its requeue",
                           lambda: _state(session, low_id)[0] == "COMPLETED" or None, REQUEUE_COMPLETE_WAIT_S, poll=1.0)
        print(f"requeued job {low_id} completed {took:.1f} s later (bound {REQUEUE_COMPLETE_WAIT_S:.0f} s)")
        assert _state(session, high_id)[0] == "COMPLETED"
        assert _state(session, low_id)[1] >= 1
    finally:
        for job_id in (low_id, high_id):
            if job_id:
                _cancel(session, job_id)


SUBMITTERS, JOBS_EACH = 8, 500
REJECT_EVERY = 10  # every 10th submission asks for more than the tier's cap: a rejection the policy intends
# Held jobs never start, so this measures admission only. Measured here (2 cores): 71 s for the
# 4000 submissions; the bound is a hang guard, not a timing assertion.
SUBMIT_BOUND_S = 600
# One submitter ($1 = its number): a line per submission, "ok LIMIT JOBID" or "FAIL LIMIT <sbatch stderr>".
# stderr is kept apart from stdout: an accepted job may carry the policy's notes on stderr.
SUBMIT_LOOP = r"""
k=$1; n=$2; every=$3; err=/tmp/ptest-$k.err
for i in $(seq "$n"); do
  t=5; [ $((i % every)) -eq 0 ] && t=120
  if id=$(sbatch --parsable --hold -o /dev/null -t "$t" --job-name="ptest-$k" --wrap true 2>"$err"); then
    echo "ok $t ${id%%;*}"
  else
    echo "FAIL $t $(tr '\n' ' ' < "$err")"
  fi
done
rm -f "$err"
"""


def test_parallel_submitters_every_job_accounted_for(session: Session, policy: PolicyVolume) -> None:
    policy.publish({"policy.yaml": TIERED})
    pid = _slurmctld_pid(session)
    loops = " & ".join(f"bash -c {shlex.quote(SUBMIT_LOOP)} _ {k} {JOBS_EACH} {REJECT_EVERY} > /tmp/ptest-{k}.out"
                       for k in range(SUBMITTERS))
    names = ",".join(f"ptest-{k}" for k in range(SUBMITTERS))
    try:
        started = time.monotonic()
        run = session.as_researcher("bash", "-c", f"{loops}; wait; cat /tmp/ptest-*.out; rm -f /tmp/ptest-*.out",
                                    timeout=SUBMIT_BOUND_S)
        print(f"{SUBMITTERS} x {JOBS_EACH} submissions in {time.monotonic() - started:.1f} s")
        assert run.code == 0, run.stderr
        lines = [(line + "  ").split(" ", 2) for line in run.stdout.splitlines()]  # ok|FAIL, limit, rest
        assert len(lines) == SUBMITTERS * JOBS_EACH, run.stdout[-2000:]
        accepted = [f[2].strip() for f in lines if f[0] == "ok"]
        rejected = [f for f in lines if f[0] == "FAIL"]
        # Only the intended rejections, each with the policy's message; every short job accepted.
        assert all(f[1] == "120" and "exceeds the preemptible tier's cap of 60 min" in f[2] for f in rejected), \
            [f for f in rejected if f[1] != "120" or "cap of 60 min" not in f[2]][:5]
        assert len(rejected) == SUBMITTERS * (JOBS_EACH // REJECT_EVERY)
        assert all(f[1] == "5" for f in lines if f[0] == "ok")
        assert len(set(accepted)) == len(accepted) == SUBMITTERS * (JOBS_EACH - JOBS_EACH // REJECT_EVERY)
        queued = session.root_in(session.cluster.controller, "squeue", "-h", "-u", wk.DEMO_USER, "-o", "%i",
                                 "--name", names, timeout=120)
        assert queued.code == 0, queued.stderr
        assert sorted(queued.stdout.split()) == sorted(accepted)  # each id known to slurmctld, and no other
        assert _slurmctld_pid(session) == pid  # never restarted (supervisord would give it a new pid)
    finally:
        session.root_in(session.cluster.controller, "scancel", "-u", wk.DEMO_USER, timeout=120)

