"""slurmpod's own hooks in the real cluster: the default Prolog/Epilog/HealthCheckProgram, a fault the
prolog catches (libnvidia-ml missing on a node that should have GPUs), drain with our reason, requeue to
the healthy worker, return to service by the periodic check, and an admin drain left alone.

The fault is injected through the health config the worker wrote at start (/etc/slurmpod/health.json):
`expected_gpus: 8` on a pod without libnvidia-ml.so.1 is exactly what a node whose driver library went
missing looks like to the checks. Fake-GPU workers (the other eleven faults) are not in this file yet.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import healthkit
import pytest
from clusterkit import Session, all_idle, node, scontrol, wait_for, wait_idle
from healthkit import (
    CLEAN_RUNS,
    DRAIN_WORST_S,
    INTERVAL_S,
    JOB_WORST_S,
    METRICS,
    UNDRAIN_WORST_S,
    drained_with,
    health_config,
    write_health_config,
)

from slurmpod import well_known as wk

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

FAULT_REASON = "slurmpod: gpu-count: restart pod: no NVML library, 8 GPUs expected"


@pytest.fixture(scope="module")
def short_interval(session: Session) -> Iterator[None]:
    # cred_expire 30 s: slurmctld holds the requeued job that long instead of 120 s (as the fault suite does).
    with healthkit.short_interval(session, cred_expire_s=30):
        yield


def test_default_hooks_run_and_keep_healthy_nodes_in_service(session: Session, short_interval: None) -> None:
    config = session.root_in(session.cluster.controller, "scontrol", "show", "config").stdout
    for text in (wk.PROLOG_BIN, wk.EPILOG_BIN, wk.HEALTHCHECK_BIN, "Alloc,NoHold,ForceRequeueOnFail",
                 "nohold_on_prolog_fail"):
        assert text in config, config
    assert re.search(r"^PrologEpilogTimeout\s*=\s*60\b", config, re.M), config
    worker = session.cluster.workers[0]
    doc = health_config(session, worker)
    assert (doc["expected_gpus"], doc["auth"]) == (0, "munge"), doc
    job = session.as_researcher("sbatch", "--parsable", "--wait", "-w", worker, "-o", "/dev/null", "--wrap", "true",
                                timeout=JOB_WORST_S)
    assert job.code == 0, job.stderr
    for context, path in METRICS.items():  # each hook ran to its end: it writes its metrics last
        _, waited = wait_for(f"{context} metrics on {worker}",
                             lambda p=path: True if session.root_in(worker, "test", "-s", p).code == 0 else None,
                             INTERVAL_S + 15)
        print(f"{context} metrics seen after {waited:.1f}s (bound {INTERVAL_S + 15}s)")
        text = session.root_in(worker, "cat", path).stdout
        assert "slurmpod_health" in text, text
    wait_idle(session, worker)  # no drain from a healthy node's checks


def test_missing_nvml_drains_requeues_and_the_periodic_check_returns_the_node(
        session: Session, short_interval: None) -> None:
    faulty, healthy = session.cluster.workers[0], session.cluster.workers[1]
    admin_reason = "test: jobs kept off until the fault is in"
    scontrol(session, "update", f"nodename={healthy}", "state=drain", f"reason={admin_reason}")
    good = health_config(session, faulty)
    try:
        held = session.as_researcher("sbatch", "--parsable", "-H", "-o", "/dev/null", "--wrap", "hostname",
                                     timeout=60)
        assert held.code == 0, held.stderr
        job = int(held.stdout.strip().split(";")[0])
        # The fault and the release back to back, just after a periodic run: the prolog meets the fault
        # first, since the next periodic run is INTERVAL_S away and the release starts the job at once.
        waited = healthkit.just_after_a_periodic_run(session, faulty)
        print(f"periodic run seen after {waited:.1f}s (bound {INTERVAL_S + 15}s)")
        write_health_config(session, faulty, {**good, "expected_gpus": 8, "clean_runs_to_undrain": CLEAN_RUNS})
        scontrol(session, "release", str(job))
        _, waited = wait_for(f"{faulty} drained by slurmpod",
                             lambda: drained_with(session, faulty, FAULT_REASON), DRAIN_WORST_S)
        print(f"drained {waited:.1f}s after release (bound {DRAIN_WORST_S:.0f}s)")
        # The failed prolog sends the job through COMPLETING back to PENDING: requeued, and not held.
        state, waited = healthkit.wait_job_state(session, job, "PENDING")
        print(f"job requeued {waited:.1f}s after the drain (bound {JOB_WORST_S:.0f}s)")
        assert state.restarts >= 1 and "Held" not in state.reason, (
            f"the job was not requeued by its prolog (a periodic run may have drained {faulty} first): {state}")

        # An admin's drain is never lifted, however many clean periodic runs pass.
        assert drained_with(session, healthy, admin_reason) is not None
        scontrol(session, "update", f"nodename={healthy}", "state=resume")

        done, waited = healthkit.wait_job_done(session, job, healthkit.REQUEUED_JOB_WORST_S)
        print(f"requeued job done {waited:.1f}s after the healthy node came back "
              f"(bound {healthkit.REQUEUED_JOB_WORST_S:.0f}s)")
        assert (done.state, done.batch_host) == ("COMPLETED", healthy), done

        assert drained_with(session, faulty, FAULT_REASON) is not None  # periodic runs kept it drained
        write_health_config(session, faulty, {**good, "clean_runs_to_undrain": CLEAN_RUNS})
        waited = wait_idle(session, faulty, UNDRAIN_WORST_S)
        print(f"returned to service {waited:.1f}s after the fault was cleared (bound {UNDRAIN_WORST_S}s)")
    finally:
        write_health_config(session, faulty, good)
        healthkit.resume(session, healthy)
        all_idle(session)


def test_admin_drain_survives_periodic_runs(session: Session, short_interval: None) -> None:
    worker = session.cluster.workers[1]
    reason = "admin: memory test"
    scontrol(session, "update", f"nodename={worker}", "state=drain", f"reason={reason}")
    try:
        runs = CLEAN_RUNS + 1
        path = METRICS["periodic"]

        def stamp() -> str:
            return session.root_in(worker, "stat", "-c", "%Y", path).stdout.strip()

        seen = {stamp()}

        def more_runs() -> bool | None:
            seen.add(stamp())
            return True if len(seen) > runs else None

        _, waited = wait_for(f"{runs} periodic runs on {worker}", more_runs, INTERVAL_S * (runs + 1) + 15)
        print(f"{runs} periodic runs took {waited:.1f}s (bound {INTERVAL_S * (runs + 1) + 15}s)")
        n = node(session, worker)
        assert n is not None and n.drained and n.reason == reason, n
    finally:
        healthkit.resume(session, worker)
        wait_idle(session, worker)
