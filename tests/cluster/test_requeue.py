"""Fast requeue, for real: a job requeued because its node failed starts again on the other worker within
the shortest hold the flavor allows, not after Slurm's default 120 s (docs/requeue.md).

Two causes slurmpod produces: preStop (a pod deleted under a running job: `scontrol requeue`, then
`StartTime=now`), and a health check that fails the prolog (the node is drained and slurmctld requeues the
job). Both run on the session cluster's shipped spec (`requeue.fast: true`), with no hold lifted by hand;
a job of two nodes requeued by preStop runs with slurmctld's own scheduling passes made rare.

Worst cases, each a bound below: a job preStop released is eligible when the hook returns, and the update
has slurmctld schedule within UPDATE_PASS_S. A job slurmctld requeued is eligible HOLD_S after its requeue
completes (cred_expire 15 s + 1 on 24.11; requeue_delay 0 + 1 on 26.05), then waits at most for the next
backfill pass (bf_interval, 30 s by default). Then its launch. Slurm's default hold alone is 121 s, beyond
every bound.
Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_cred_expire
Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_requeue_delay
Ref: https://slurm.schedmd.com/sched_config.html (bf_interval)
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable

import healthkit
import pytest
from clusterkit import (
    Session,
    all_idle,
    job,
    out_dir,
    restore_pod,
    sbatch,
    scontrol,
    spec_edited,
    wait_for,
    wait_idle,
)
from healthkit import DRAIN_WORST_S, JOB_WORST_S, drained_with, health_config, write_health_config

from slurmpod import well_known as wk
from slurmpod_host.cluster import lifecycle, runtime
from slurmpod_host.cluster.jobs import JobRecord

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

HOLD_S = {"24.11": wk.FAST_CRED_EXPIRE_S + 1, "26.05": wk.FAST_REQUEUE_DELAY_S + 1}
BACKFILL_PASS_S = 30  # bf_interval, Slurm's default: how long an eligible pending job may wait for a pass
# A job update queues a scheduling pass; slurmctld's background loop (every second) runs it at most
# batch_sched_delay (3 s) after the previous one. Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_batch_sched_delay
UPDATE_PASS_S = 4
LAUNCH_S = 10  # allocation, prolog (healthy: under 1 s) and the job's first line on the shared /home
SLURM_DEFAULT_HOLD_S = 121  # cred_expire 120 s + 1
FAULT_REASON = "slurmpod: gpu-count: restart pod: no NVML library, 8 GPUs expected"

# Each run appends a line with its host to the job's output, then sleeps until the test cancels it.
# Ref: https://slurm.schedmd.com/sbatch.html#OPT_SLURM_RESTART_COUNT
SCRIPT = """#!/bin/bash
echo "start run=${SLURM_RESTART_COUNT:-0} host=$(hostname)"
sleep 300
"""


def _hold_s(flavor: str) -> int:
    return HOLD_S[flavor]


def _out_dir(s: Session, name: str) -> str:
    return out_dir(s, "sptest-requeue", name)


def _running_on(s: Session, job_id: int, host: str, bound: float) -> tuple[JobRecord, float]:
    def there() -> JobRecord | None:
        st = job(s, job_id)
        return st if st.state == "RUNNING" and st.batch_host == host else None
    return wait_for(f"job {job_id} running again on {host}", there, bound)


def test_the_flavors_hold_is_rendered(session: Session) -> None:
    config = session.root_in(session.cluster.controller, "scontrol", "show", "config").stdout
    if session.flavor == "24.11":
        assert re.search(rf"^AuthInfo\s*=\s*.*\bcred_expire={wk.FAST_CRED_EXPIRE_S}\b", config, re.M), config
    else:
        assert re.search(rf"^SchedulerParameters\s*=.*\brequeue_delay={wk.FAST_REQUEUE_DELAY_S}\b", config,
                         re.M), config


def test_prestop_requeue_runs_again_on_the_other_worker_at_once(session: Session) -> None:
    victim, other = session.cluster.workers[0], session.cluster.workers[1]
    out = _out_dir(session, "prestop")
    script = f"{out}/job.sh"
    write = session.as_researcher("sh", "-c", f"printf %s {shlex.quote(SCRIPT)} > {script}")
    assert write.code == 0, write.stderr
    # Pinned to the victim by draining the other worker while it starts (`-w` would survive the requeue).
    scontrol(session, "update", f"NodeName={other}", "State=DRAIN", "Reason=sptest pin job")
    try:
        job_id = sbatch(session, "--requeue", "--open-mode=append", "-o", f"{out}/%j.out", script)
        wait_for(f"job {job_id} running on {victim}",
                 lambda: True if (st := job(session, job_id)).state == "RUNNING" and st.batch_host == victim else None,
                 60)
    finally:
        scontrol(session, "update", f"NodeName={other}", "State=RESUME")
    wait_idle(session, other)
    try:
        started = time.monotonic()
        hook_s = lifecycle.delete_pod(session.client, session.cluster.name, victim)
        # preStop lifts the hold itself (StartTime=now once slurmctld has requeued the job): eligible when
        # the hook returns, and the update has slurmctld schedule. The bound: the hook, that pass, one launch.
        after = job(session, job_id)
        print(f"after preStop: {after}")
        assert after.state == "RUNNING" or after.start_time is None or after.start_time <= time.time() + 1, after
        bound = hook_s + UPDATE_PASS_S + LAUNCH_S
        st, _ = _running_on(session, job_id, other, bound)
        took = time.monotonic() - started
        print(f"preStop took {hook_s:.2f}s; job {job_id} running on {other} {took:.1f}s after the delete began "
              f"(bound {bound:.0f}s; Slurm's own hold {SLURM_DEFAULT_HOLD_S}s)")
        assert st.restarts == 1, st
        assert bound < SLURM_DEFAULT_HOLD_S
        wait_for("the rerun's first line", lambda: True if session.as_researcher(
            "grep", "-qx", f"start run=1 host={other}", f"{out}/{job_id}.out").code == 0 else None, LAUNCH_S)
    finally:
        session.root_in(session.cluster.controller, "scancel", str(job_id))
        if victim not in {c.name for c in runtime.find(session.client, session.cluster.name).containers}:
            restore_pod(session, victim)
    all_idle(session)


# slurmctld's own scheduling passes, made rare: the main loop's (sched_interval, 60 s by default) and
# backfill's (bf_interval, 30 s). Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_sched_interval
RARE_PASS_S = 300
# From the replacement pod's node IDLE to the job running on both workers: reconcile-node's request to
# schedule (it runs right after the registration, `slurmpod probe ready` waits for it) and one launch.
REGISTERED_TO_RUNNING_S = 30


def _passes_apart(seconds: int) -> Callable[[str], str]:
    """A ClusterSpec edit: slurmctld's periodic passes ``seconds`` apart (an extraLines
    SchedulerParameters, merged into slurmpod's), so only an event can start a pending job sooner."""
    def edit(spec: str) -> str:
        spec = spec.rstrip("\n")
        assert "extraLines" not in spec, spec
        return spec + f"\nextraLines:\n  - SchedulerParameters=bf_interval={seconds},sched_interval={seconds}\n"
    return edit


def test_a_two_node_job_requeued_by_prestop_runs_again_once_the_new_pod_registers(session: Session) -> None:
    """A job on both workers whose batch script ignores SIGTERM; the other worker's pod is replaced.
    slurmctld finishes the requeue only once the batch host is done with the job too (SIGKILL after
    KillWait), and gives it a begin time then: preStop must release it after that, not before. The new
    pod's node then registers, on which slurmctld schedules nothing by itself: reconcile-node asks it to.
    With slurmctld's own passes RARE_PASS_S apart, the job runs again within REGISTERED_TO_RUNNING_S
    only if both happened (or, about one run in ten, one of those passes falls inside that window)."""
    out = _out_dir(session, "two-nodes")
    script = f"{out}/job.sh"
    text = SCRIPT.replace("#!/bin/bash\n", "#!/bin/bash\ntrap '' TERM\n", 1)
    write = session.as_researcher("sh", "-c", f"printf %s {shlex.quote(text)} > {script}")
    assert write.code == 0, write.stderr
    with spec_edited(session, _passes_apart(RARE_PASS_S)):
        config = session.root_in(session.cluster.controller, "scontrol", "show", "config").stdout
        assert re.search(rf"^SchedulerParameters\s*=.*\bsched_interval={RARE_PASS_S}\b", config, re.M), config
        job_id = sbatch(session, "-N2", "--requeue", "--open-mode=append", "-o", f"{out}/%j.out", script)
        victim = ""
        try:
            first, _ = wait_for(f"job {job_id} running on both workers", lambda: (
                st if (st := job(session, job_id)).state == "RUNNING" else None), 60)
            wait_for("the batch script's first line", lambda: True if session.as_researcher(
                "grep", "-q", "start run=0", f"{out}/{job_id}.out").code == 0 else None, LAUNCH_S)
            victim = next(w for w in session.cluster.workers if w != first.batch_host)
            hook_s = lifecycle.delete_pod(session.client, session.cluster.name, victim)
            after = job(session, job_id)
            print(f"preStop on {victim} took {hook_s:.2f}s (the batch host held the job for KillWait, "
                  f"{KILL_WAIT_S}s); job {job_id} after it: {after}")
            assert hook_s >= KILL_WAIT_S / 2, hook_s  # it waited for the requeue
            # requeued by slurmctld (no longer completing on the batch host), and eligible now
            assert after.state == "PENDING" and after.restarts == 1, after
            assert after.start_time is None or after.start_time <= time.time() + 1, after
            lifecycle.replace_pod(session.client, session.cluster.name, victim)
            wait_idle(session, victim)
            registered = time.monotonic()
            again, _ = wait_for(f"job {job_id} running again", lambda: (
                st if (st := job(session, job_id)).state == "RUNNING" else None), REGISTERED_TO_RUNNING_S)
            print(f"job {job_id} running again {time.monotonic() - registered:.1f}s after {victim} was IDLE "
                  f"(slurmctld's own passes {RARE_PASS_S}s apart): {again}")
            assert again.restarts == 1, again
        finally:
            session.root_in(session.cluster.controller, "scancel", str(job_id))
            if victim and victim not in {c.name for c in runtime.find(session.client, session.cluster.name).containers}:
                restore_pod(session, victim)


# A job that ignores SIGTERM stays COMPLETING after scancel until KillWait (30 s) ends it with SIGKILL.
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_KillWait
IGNORES_TERM = "trap '' TERM; touch {marker}; sleep 170"
KILL_WAIT_S = 30


@pytest.mark.smoke
def test_a_job_cancelled_but_still_completing_stays_cancelled_when_its_pod_is_deleted(session: Session) -> None:
    """slurmctld accepts `scontrol requeue` of a cancelled job whose node still cleans up, and runs it again.
    preStop lists the COMPLETING jobs too (they hold the node) but must leave them ended."""
    victim = session.cluster.workers[0]
    marker = f"{_out_dir(session, 'cancelled')}/started"
    job_id = sbatch(session, "-w", victim, "-o", "/dev/null", "--wrap", IGNORES_TERM.format(marker=marker))
    try:
        wait_for(f"job {job_id}'s script to start", lambda: True if session.as_researcher(
            "test", "-e", marker).code == 0 else None, JOB_WORST_S)
        assert session.root_in(session.cluster.controller, "scancel", str(job_id), timeout=30).code == 0
        # Seen COMPLETING with half of KillWait left, so preStop's listing still finds it so.
        wait_for(f"job {job_id} COMPLETING", lambda: True if job(session, job_id).state == "COMPLETING" else None,
                 KILL_WAIT_S / 2)
        hook_s = lifecycle.delete_pod(session.client, session.cluster.name, victim)
        after = job(session, job_id)
        print(f"preStop took {hook_s:.2f}s; job {job_id} after it: {after}")
        assert after.restarts == 0 and after.state in {"CANCELLED", "COMPLETING"}, after
    finally:
        session.root_in(session.cluster.controller, "scancel", str(job_id), timeout=30)
        if victim not in {c.name for c in runtime.find(session.client, session.cluster.name).containers}:
            restore_pod(session, victim)
    all_idle(session)
    final = job(session, job_id)
    assert (final.state, final.restarts) == ("CANCELLED", 0), final


@pytest.mark.smoke
def test_health_prolog_requeue_runs_again_on_the_other_worker_within_the_flavors_hold(session: Session) -> None:
    """No hand on the hold: the job waits exactly what slurm.conf says, then one scheduling pass."""
    faulty, healthy = session.cluster.workers[0], session.cluster.workers[1]
    admin_reason = "sptest: jobs kept off until the fault is in"
    good = health_config(session, faulty)
    hold = _hold_s(session.flavor)
    scontrol(session, "update", f"nodename={healthy}", "state=drain", f"reason={admin_reason}")
    job_id = 0
    try:
        held = session.as_researcher("sbatch", "--parsable", "-H", "-o", "/dev/null", "--wrap", "sleep 300",
                                     timeout=60)
        assert held.code == 0, held.stderr
        job_id = int(held.stdout.strip().split(";")[0])
        # The fault (the node's GPUs' library gone) and the release back to back: the job's prolog meets it.
        write_health_config(session, faulty, {**good, "expected_gpus": 8})
        fault_at = time.monotonic()
        scontrol(session, "release", str(job_id))
        _, waited = wait_for(f"{faulty} drained by slurmpod",
                             lambda: drained_with(session, faulty, FAULT_REASON), DRAIN_WORST_S)
        print(f"drained {waited:.1f}s after the fault")

        def requeued() -> JobRecord | None:
            st = job(session, job_id)
            return st if st.state == "PENDING" and st.restarts >= 1 else None
        pending, waited = wait_for(f"job {job_id} requeued", requeued, JOB_WORST_S)
        requeued_at = time.time()
        print(f"requeued {waited:.1f}s after the drain: {pending}")
        assert "Held" not in pending.reason, pending
        # The hold as slurmctld set it: eligible at most HOLD_S after the requeue (plus the poll's second).
        if pending.reason == "BeginTime":
            assert pending.start_time is not None and pending.start_time <= requeued_at + hold + 1, (
                f"begin time {pending.start_time} is more than {hold}s after the requeue at {requeued_at:.0f}")
        scontrol(session, "update", f"nodename={healthy}", "state=resume")

        bound = hold + BACKFILL_PASS_S + LAUNCH_S
        st, waited = _running_on(session, job_id, healthy, bound)
        print(f"job {job_id} running on {healthy} {waited:.1f}s after its requeue, "
              f"{time.monotonic() - fault_at:.1f}s after the fault (bound {bound}s after the requeue; "
              f"Slurm's own hold {SLURM_DEFAULT_HOLD_S}s)")
        assert st.restarts >= 1, st
        assert bound < SLURM_DEFAULT_HOLD_S
    finally:
        if job_id:
            session.root_in(session.cluster.controller, "scancel", str(job_id))
        write_health_config(session, faulty, good)
        healthkit.resume(session, healthy)
        healthkit.resume(session, faulty)
        all_idle(session)
