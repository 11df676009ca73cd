"""slurmpod's own hooks in the real cluster: the default Prolog/Epilog/HealthCheckProgram, a fault the
prolog catches (libnvidia-ml missing on a node that should have GPUs), drain with our reason, requeue to
the healthy worker, return to service by the periodic check, and an admin drain left alone.

The fault is injected through the health config the worker wrote at start (/etc/slurmpod/health.yaml):
`expected_gpus: 8` on a pod without libnvidia-ml.so.1 is exactly what a node whose driver library went
missing looks like to the checks. Fake-GPU workers (the other eleven faults) are not in this file yet.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator

import pytest
from clusterkit import Session, all_idle, node, restore_pod, scontrol, wait_for, wait_idle, wait_ready

from slurmpod import well_known as wk
from slurmpod.nodestate import NodeState
from slurmpod_host.cluster import lifecycle

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

INTERVAL_S = 10  # HealthCheckInterval for these tests (the default is 300)
CLEAN_RUNS = 2  # clean periodic runs before slurmpod lifts its own drain
# Worst cases, from the settings above: slurmd runs the check every INTERVAL_S, each run ends within its
# 50 s deadline but takes well under a second here; a job needs one scheduling pass (bf_interval 30 s).
UNDRAIN_WORST_S = INTERVAL_S * (CLEAN_RUNS + 1) + 15
DRAIN_WORST_S = 30.0  # prolog deadline 20 s + its drain RPC
JOB_WORST_S = 120.0
METRICS = {c: f"{wk.HEALTH_METRICS_DIR}/slurmpod_health_{c}.prom" for c in ("prolog", "epilog", "periodic")}
FAULT_REASON = "slurmpod: gpu-count: no NVML library, 8 GPUs expected"


def _health_config(s: Session, pod: str) -> dict[str, object]:
    result = s.root_in(pod, "cat", wk.HEALTH_CONFIG)
    assert result.code == 0, result.stderr
    text = "\n".join(line for line in result.stdout.splitlines() if not line.startswith("#"))
    doc: dict[str, object] = json.loads(text)
    return doc


def _write_health_config(s: Session, pod: str, doc: dict[str, object]) -> None:
    body = json.dumps(doc, sort_keys=True)
    new = f"{wk.HEALTH_CONFIG}.new"
    script = f"printf '%s\\n' {shlex.quote(body)} > {new} && mv {new} {wk.HEALTH_CONFIG}"
    result = s.root_in(pod, "sh", "-c", script)
    assert result.code == 0, result.stderr


def _job(s: Session, job: int) -> dict[str, str]:
    result = s.root_in(s.cluster.controller, "scontrol", "show", "job", "-o", str(job), timeout=30)
    assert result.code == 0, result.stderr
    return dict(item.split("=", 1) for item in result.stdout.split() if "=" in item)


def _drained_with(s: Session, name: str, reason: str) -> NodeState | None:
    n = node(s, name)
    return n if n is not None and n.drained and n.reason == reason else None


@pytest.fixture(scope="module")
def short_interval(session: Session) -> Iterator[None]:
    """The session's cluster with HealthCheckInterval=INTERVAL_S (slurmpod's hooks otherwise default)."""
    name, controller = session.cluster.name, session.cluster.controller
    old = lifecycle.set_config_map(name, "cluster", {})
    spec = old["cluster.yaml"].rstrip("\n")
    assert "healthCheckInterval: 300" in spec, spec  # the shipped ConfigMap's value
    lifecycle.set_config_map(name, "cluster", {**old, "cluster.yaml": spec.replace(
        "healthCheckInterval: 300", f"healthCheckInterval: {INTERVAL_S}") + "\n"})
    try:
        lifecycle.replace_pod(session.client, name, controller)
        wait_ready(session, controller)
        scontrol(session, "reconfigure")
        all_idle(session)
        yield
    finally:
        lifecycle.set_config_map(name, "cluster", old)
        restore_pod(session, controller)
        scontrol(session, "reconfigure")
        for worker in session.cluster.workers:
            restore_pod(session, worker)  # a fresh health.yaml and health state
        all_idle(session)


def test_default_hooks_run_and_keep_healthy_nodes_in_service(session: Session, short_interval: None) -> None:
    config = session.root_in(session.cluster.controller, "scontrol", "show", "config").stdout
    for text in (wk.PROLOG_BIN, wk.EPILOG_BIN, wk.HEALTHCHECK_BIN, "Alloc,ForceRequeueOnFail",
                 "PrologEpilogTimeout      = 60", "nohold_on_prolog_fail"):
        assert text in config, config
    worker = session.cluster.workers[0]
    doc = _health_config(session, worker)
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
    good = _health_config(session, faulty)
    try:
        held = session.as_researcher("sbatch", "--parsable", "-H", "-o", "/dev/null", "--wrap", "hostname",
                                     timeout=60)
        assert held.code == 0, held.stderr
        job = int(held.stdout.strip().split(";")[0])
        # The fault and the release back to back: the prolog (not a periodic run) meets the fault, unless
        # a periodic run falls in the gap between the two calls (well under a second of INTERVAL_S).
        _write_health_config(session, faulty, {**good, "expected_gpus": 8, "clean_runs_to_undrain": CLEAN_RUNS})
        scontrol(session, "release", str(job))
        _, waited = wait_for(f"{faulty} drained by slurmpod",
                             lambda: _drained_with(session, faulty, FAULT_REASON), DRAIN_WORST_S)
        print(f"drained {waited:.1f}s after release (bound {DRAIN_WORST_S:.0f}s)")
        state = _job(session, job)
        assert state["JobState"] == "PENDING" and int(state["Restarts"]) >= 1, state  # requeued, not held

        # An admin's drain is never lifted, however many clean periodic runs pass.
        assert _drained_with(session, healthy, admin_reason) is not None
        scontrol(session, "update", f"nodename={healthy}", "state=resume")

        final = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"}
        done, waited = wait_for(f"job {job} done", lambda: st if (st := _job(session, job))["JobState"] in final
                                else None, JOB_WORST_S)
        print(f"requeued job done {waited:.1f}s after the healthy node came back (bound {JOB_WORST_S:.0f}s)")
        assert (done["JobState"], done["BatchHost"]) == ("COMPLETED", healthy), done

        assert _drained_with(session, faulty, FAULT_REASON) is not None  # periodic runs kept it drained
        _write_health_config(session, faulty, {**good, "clean_runs_to_undrain": CLEAN_RUNS})
        waited = wait_idle(session, faulty, UNDRAIN_WORST_S)
        print(f"returned to service {waited:.1f}s after the fault was cleared (bound {UNDRAIN_WORST_S}s)")
    finally:
        _write_health_config(session, faulty, good)
        scontrol(session, "update", f"nodename={healthy}", "state=resume")
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
        scontrol(session, "update", f"nodename={worker}", "state=resume")
        wait_idle(session, worker)
