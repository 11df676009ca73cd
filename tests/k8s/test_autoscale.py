"""A nodeset that follows the queue on a real API server: `burst` (tests/k8s/burst-values.yaml) starts at
zero replicas with its placeholders, grows when jobs wait for it, runs them, and goes back to zero once
idle, without killing a job on the way; a real Prometheus scrapes the exporter and runs the query the
chart's KEDA ScaledObject would send.

Every wait is bounded by the worst case it waits out: the autoscaler's pass (AUTOSCALE_INTERVAL_S), the
exporter's poll (METRICS_POLL_S) plus two scrapes, a pod's start to IDLE on this 2-core node
(POD_START_S), the nodeset's idleSeconds, and a worker's preStop and grace period.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubekit import BURST_VALUES, KUBELET_REMOVAL_S, METRICS_POLL_S, NAMESPACE, RELEASE, Kube, note, session_values
from promkit import SCRAPE_INTERVAL_S, Prometheus, running, wait_targets_up
from waiting import wait_for

from slurmpod import reasons
from slurmpod import well_known as wk
from slurmpod.entrypoints.exporter import poll as exporter_poll
from slurmpod_host.kube import release

BURST = "burst"
STS = f"{RELEASE}-worker-{BURST}"
SETTINGS = yaml.safe_load(BURST_VALUES.read_text(encoding="utf-8"))["nodesets"][BURST]["autoscaling"]
MAX, IDLE_S = SETTINGS["maxReplicas"], SETTINGS["idleSeconds"]
GRACE_S = yaml.safe_load(BURST_VALUES.read_text(encoding="utf-8"))["nodesets"][BURST]["terminationGracePeriodSeconds"]
AUTOSCALE_INTERVAL_S = 15  # `slurmpod daemon autoscale --interval`'s default
POD_START_S = 90  # pod scheduled, image present, slurmd registered and IDLE on a loaded 2-core node
# A change reaches Prometheus within two exporter polls (the one under way may miss it; one starts at
# most an interval, plus MIN_GAP_S after one that overran, later and ends within its interval) and a scrape.
METRIC_S = 2 * METRICS_POLL_S + exporter_poll.MIN_GAP_S + SCRAPE_INTERVAL_S + 5
EXPORTER_UP = f'max(slurmpod_exporter_up{{namespace="{NAMESPACE}"}})'
# Each job's own run time: longer than the exporter's poll with a scrape, so the two running jobs and the
# third one waiting (Resources) keep the query at 3 for at least a poll, whenever the scale-out happens.
JOB_S = 20


def _replicas(kube: Kube) -> int:
    return int(kube.get("statefulset", STS)["spec"].get("replicas") or 0)


def _burst_nodes(kube: Kube) -> list[dict[str, Any]]:
    """The burst nodeset's Slurm node records, placeholders included."""
    done = kube.exec(kube.controller, "scontrol", "--future", "show", "nodes", "--json", timeout=30)
    assert done.returncode == 0, done.stderr
    return [n for n in json.loads(done.stdout)["nodes"] if n["name"].startswith(f"{STS}-")]


def _future(kube: Kube) -> set[str]:
    return {n["name"] for n in _burst_nodes(kube) if "FUTURE" in n.get("state", [])}


def _demand_inputs(kube: Kube, ids: list[int]) -> str:
    """What the exporter judges demand from: the burst node records (placeholders included) and the jobs."""
    nodes = [(n["name"], n.get("state"), n.get("cpus"), n.get("features"), n.get("active_features"))
             for n in _burst_nodes(kube)]
    jobs = [(i, j.get("job_state"), j.get("state_reason"), j.get("partition"), j.get("features"),
             j.get("cpus"), j.get("node_count")) for i, j in _jobs(kube, ids).items()]
    return f"burst node records: {nodes}\njobs: {jobs}"


def _jobs(kube: Kube, ids: list[int]) -> dict[int, dict[str, Any]]:
    return {i: kube.job(i) for i in ids}


# A worker's first log lines, the same in every start: left out of failure messages.
_START_UP = ("starting supervisord", "NVML not open", "no CUDA runtime")


def _json_lines(text: str) -> list[dict[str, Any]]:
    """The pod's JSON log lines (SLURMPOD_LOG_FORMAT=json), whatever prefixes a line."""
    out = []
    for line in text.splitlines():
        start = line.find("{")
        if start < 0:
            continue
        try:
            doc = json.loads(line[start:])
        except ValueError:
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return out


def _ended(job: dict[str, Any]) -> bool:
    """Ended, its epilog done (no COMPLETING flag left). Ref: https://slurm.schedmd.com/squeue.html#SECTION_JOB-STATE-CODES"""
    states = set(job["job_state"])
    return bool(states & {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"}) and "COMPLETING" not in states


def _keda_query(kube: Kube) -> str:
    """The query the chart's ScaledObject sends for `burst` in keda mode, rendered from the session's values."""
    done = release.helm(kube.layout, kube.chart, "template", RELEASE, str(kube.chart.path), "-n", NAMESPACE,
                        *session_values(kube.flavor), f"--set=nodesets.{BURST}.autoscaling.mode=keda",
                        "--set=metrics.prometheusAddress=http://prometheus.monitoring:9090")
    assert done.returncode == 0, done.stderr
    (scaled,) = [d for d in yaml.safe_load_all(done.stdout) if d and d["kind"] == "ScaledObject"]
    return str(scaled["spec"]["triggers"][0]["metadata"]["query"])


@pytest.fixture(scope="module")
def prometheus(kube: Kube) -> Iterator[Prometheus]:
    """Prometheus scraping the controller pod's exporter, its series labelled as a ServiceMonitor labels them."""
    ip = kube.get("pod", kube.controller)["status"]["podIP"]
    labels = {"namespace": NAMESPACE, "service": f"{RELEASE}-metrics"}
    with running([f"{ip}:{wk.EXPORTER_PORT}"], labels=labels) as prom:
        wait_targets_up(prom, METRIC_S)
        yield prom


def _at_rest(kube: Kube) -> None:
    """Zero replicas and a placeholder per ordinal; bounded by a scale-in's worst case (a pass may have
    started pods for a job an earlier step cancelled)."""
    wait_for(f"{STS} at rest", lambda: True if _replicas(kube) == 0 and
             _future(kube) == {f"{STS}-{i}" for i in range(MAX)} else None,
             IDLE_S + 4 * AUTOSCALE_INTERVAL_S + GRACE_S + POD_START_S)


def test_a_submission_for_an_empty_nodeset_is_accepted_and_waits(kube: Kube) -> None:
    """With burst at zero, Slurm refuses a job wider than maxReplicas ("Requested node configuration is not
    available") and accepts one that fits: the placeholders make it know the nodeset's size. The jobs wait
    on a held one (reason Dependency), so they ask the autoscaler for nothing. (A held job itself is not
    checked against the nodes at submission.)"""
    _at_rest(kube)
    blocker = kube.submit("true", "-p", BURST, "--hold", "-t", "5", "-o", "/dev/null")
    after = f"--dependency=afterok:{blocker}"
    refused = kube.as_researcher(f"sbatch --parsable {after} -p {BURST} -N{MAX + 1} -t 5 -o /dev/null --wrap true")
    accepted = kube.as_researcher(f"sbatch --parsable {after} -p {BURST} -N{MAX} -t 5 -o /dev/null --wrap true")
    try:
        assert refused.returncode != 0, refused.stdout
        assert "Requested node configuration is not available" in refused.stderr, refused.stderr
        assert accepted.returncode == 0, accepted.stderr
        job = int(accepted.stdout.strip().split(";")[0])
        assert kube.job(job)["job_state"] == ["PENDING"]
    finally:
        kube.exec(kube.controller, "scancel", "-u", wk.DEMO_USER)


def test_a_nodeset_at_zero_grows_with_the_queue_runs_its_jobs_and_shrinks_back_without_killing_one(
        kube: Kube, prometheus: Prometheus) -> None:
    query = _keda_query(kube)
    # At rest: no pod, a placeholder per ordinal, and the query (demand + busy nodes) says zero.
    _at_rest(kube)
    prometheus.wait_value("nothing wanted", query, 0, METRIC_S)

    # Three jobs for burst: accepted though it has no pod (the placeholders), and they wait. The query reads 3
    # from here until the first job ends: demand 3 while they wait, during the take-over too (a pod deleting
    # its placeholder leaves the partition short, and slurmctld may say PartitionConfig, which counts then);
    # then 2 running and 1 waiting. Only between the last pod's registration and its reconcile-node's request
    # to schedule (a few seconds, less than a poll) do idle nodes and PartitionConfig jobs read 0.
    jobs = [kube.submit(f"sleep {JOB_S}", "-p", BURST, "-N1", "-t", "5", "-o", "/dev/null") for _ in range(3)]
    try:
        seen = prometheus.wait_values("the jobs' demand through the ScaledObject's query, the exporter up",
                                      {query: 3, EXPORTER_UP: 1}, METRIC_S)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_demand_inputs(kube, jobs)}") from None
    note(f"demand of 3 in Prometheus after {seen:.1f}s")

    # Scale-out to maxReplicas; the pods register (taking their ordinals over from the placeholders).
    _, out_s = wait_for(f"{STS} at {MAX} replicas", lambda: True if _replicas(kube) == MAX else None,
                        AUTOSCALE_INTERVAL_S * 2 + 5)
    note(f"scaled out to {MAX} in {out_s:.1f}s")
    # While the pods start, the placeholders keep the partition at its size: a job that needs the whole
    # nodeset is accepted. (A pod deletes its placeholder just before its slurmd starts, after the pod is
    # scheduled, its container started and its config rendered; this is submitted within a poll and an
    # exec of the scale-out.) It waits on a dependency, so it asks for nothing, and goes at once.
    scaled_at = time.monotonic()
    whole = kube.as_researcher(f"sbatch --parsable --dependency=afterok:{jobs[0]} -p {BURST} -N{MAX} -t 5 "
                               "-o /dev/null --wrap true")
    took = time.monotonic() - scaled_at
    assert whole.returncode == 0, (f"{took:.1f}s after the scale-out was seen; placeholders now "
                                   f"{sorted(_future(kube))}: {whole.stderr}")
    kube.exec(kube.controller, "scancel", whole.stdout.strip().split(";")[0])

    def finished() -> dict[int, dict[str, Any]] | None:
        states = _jobs(kube, jobs)
        return states if all(_ended(s) for s in states.values()) else None
    states, run_s = wait_for("the three jobs ended", finished, POD_START_S + 2 * (JOB_S + AUTOSCALE_INTERVAL_S))
    note(f"three jobs done {run_s:.1f}s after the scale-out")
    # Each pod took its placeholder over itself, just before its slurmd started: never refused against it.
    for i in range(MAX):
        lines = _json_lines(kube.kubectl("-n", NAMESPACE, "logs", f"{STS}-{i}", "-c", "slurmd", timeout=60).stdout)
        msgs = [d.get("msg") for d in lines]
        # The whole entries past the start-up lines, so a failure says what claim-placeholder saw.
        seen = [d for d in lines if not str(d.get("msg")).startswith(_START_UP)]
        assert "claimed the placeholder" in msgs, (i, seen)
        assert "re-registering: slurmctld kept an old definition" not in msgs, (i, seen)
    for job_id, s in states.items():
        assert s["job_state"] == ["COMPLETED"] and s["restart_cnt"] == 0, (job_id, s["job_state"], s["restart_cnt"])
        assert s["nodes"].startswith(f"{STS}-"), s["nodes"]

    # Idle past idleSeconds: the highest ordinal is drained with the autoscaler's reason.
    top = f"{STS}-{MAX - 1}"
    _, drain_s = wait_for(f"{top} drained for scale-in",
                          lambda: True if kube.slurm_node(top)[1] == reasons.AUTOSCALE_SCALE_IN else None,
                          IDLE_S + 3 * AUTOSCALE_INTERVAL_S)
    note(f"{top} drained for scale-in {drain_s:.1f}s after the jobs")
    # A job submitted once the scale-in has begun: it must run, whatever the autoscaler is doing.
    late = kube.submit(f"sleep {JOB_S}", "-p", BURST, "-N1", "-t", "5", "-o", "/dev/null")
    def late_ended() -> dict[str, Any] | None:
        s = kube.job(late)
        return s if _ended(s) else None
    late_state, _ = wait_for("the late job ended", late_ended, 3 * AUTOSCALE_INTERVAL_S + POD_START_S + JOB_S)
    assert late_state["job_state"] == ["COMPLETED"] and late_state["restart_cnt"] == 0, late_state["job_state"]
    for job_id, s in _jobs(kube, jobs).items():  # nothing that ran was requeued meanwhile
        assert s["restart_cnt"] == 0, (job_id, s["restart_cnt"])

    # Back to zero, and the placeholders back once the pods' records are gone.
    _, zero_s = wait_for(f"{STS} back at 0", lambda: True if _replicas(kube) == 0 else None,
                         IDLE_S + 4 * AUTOSCALE_INTERVAL_S + JOB_S)
    note(f"back to 0 replicas {zero_s:.1f}s after the late job")
    wait_for(f"{STS}'s pods gone", lambda: True if not kube.get(
        "pods", "-l", f"{wk.LABEL_NODESET}={BURST}")["items"] else None, GRACE_S + KUBELET_REMOVAL_S)
    wait_for("the placeholders back", lambda: True if _future(kube) == {f"{STS}-{i}" for i in range(MAX)}
             else None, 2 * AUTOSCALE_INTERVAL_S + 10)

    # Every decision was counted, and Prometheus has the counts.
    for action in ("scale_out", "drain", "scale_in"):
        expr = f'sum(slurmpod_autoscale_decisions_total{{nodeset="{BURST}",action="{action}"}})'
        got, _ = wait_for(f"{action} counted", lambda e=expr: v if (v := prometheus.value(e)) else None, METRIC_S)
        assert got >= 1, (action, got)
    prometheus.wait_value("nothing wanted again", query, 0, METRIC_S)
    # ... and logged, one line each with the nodeset, the action and why.
    logs = kube.kubectl("-n", NAMESPACE, "logs", kube.controller, "-c", "slurmctld", timeout=60).stdout
    decided = {(d.get("nodeset"), d.get("action")) for d in _json_lines(logs) if d.get("msg") == "autoscale"}
    for action in ("scale_out", "drain", "scale_in"):
        assert (BURST, action) in decided, (action, sorted(decided))
