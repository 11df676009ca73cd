"""The controller's exporter against real Slurm, scraped by a real Prometheus (docs/metrics.md).

This module runs its own cluster (`spmetrics`, two workers) from the chart rendered with
metrics.pollSeconds 5, the least the spec allows, so that a change in Slurm reaches the series quickly;
its last test also stops slurmctld, which the shared cluster must not see. A Prometheus (tests/promkit.py)
scrapes the exporter through the metrics Service the emulator publishes on the host's loopback, each
series labelled with the namespace and Service the chart's KEDA query selects, as a ServiceMonitor would
label them. Every expected value comes from Slurm itself (sinfo, scontrol and squeue in the controller) or
from what a test did to it; each test leaves the cluster as it found it: no job, no drain, no placeholder.

Bounds, not timings (each test prints what it took): a change slurmctld shows is read by the exporter's
next poll, which starts within POLL_S and ends within POLL_S (its deadline), and Prometheus has it at its
next scrape: METRICS_WAIT_S plus the two scrape intervals promkit adds, 14 s. What Slurm does itself (a
job started or ended, a node idle again) is bounded by SLURM_WAIT_S, 60 s. A passing run is bounded by
cluster up (UP_TIMEOUT_S) plus 21 metrics waits, 5 Slurm waits and the idle wait after each test (two
workers at SLURM_WAIT_S each), about 25 minutes; on the 2-core development host it takes about 2 min 15 s,
cluster up (15 s) included.
Ref: https://slurm.schedmd.com/sinfo.html#SECTION_NODE-STATE-CODES
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import promkit
import pytest
import yaml
from clusterkit import Session, all_idle, job, own_cluster, sbatch, scontrol, wait_for
from metricnames import DASHBOARD_METRICS
from prometheus_client.parser import text_string_to_metric_families

from slurmpod import reasons
from slurmpod import well_known as wk
from slurmpod.slurm import Placeholder
from slurmpod_host.cluster import cli
from slurmpod_host.cluster import well_known as host_wk
from slurmpod_host.cluster.services import LOOPBACK

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

NAME = "spmetrics"
WORKERS = 2
ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "slurmpod"
HELM = ROOT / ".tools" / "bin" / "helm"
RELEASE = NAMESPACE = "slurmpod"  # as deploy/kubernetes renders the chart, and as the emulator reads it
NODESET = "workers"  # the chart's default nodeset: both workers, feature `workers`
PARTITIONS = ("main", "preempt", "high")  # the chart's default partitions, all over that nodeset
POLL_S = wk.MIN_EXPORTER_POLL_S
METRICS_WAIT_S = 2 * POLL_S  # the next poll starts within POLL_S and ends within POLL_S
# slurmctld starts a job at submit or release time (with PrologFlags=Alloc, once the prolog ran), and ends a
# cancelled one once the epilog ran; both take seconds, 60 s bounds a loaded host.
SLURM_WAIT_S = 60.0
SCRAPE_GET_S = 3.0  # a scrape only renders the last poll: it never waits for slurmctld
JOB = "slurmpod"  # promkit's scrape job
# What the autoscaler would have written (wk.AUTOSCALE_COUNTERS_FILE): the exporter serves these counts.
COUNTERS = {"decisions": {NODESET: {"scale_out": 3, "drain": 2, "undrain": 1, "scale_in": 1}}}
SLEEP = ("-o", "/dev/null", "--wrap", "sleep 600")


@dataclass(frozen=True, slots=True)
class Scraped:
    """The cluster, its exporter's URL on the host, and the Prometheus that scrapes it."""

    s: Session
    prom: promkit.Prometheus
    url: str
    keda_query: str  # the chart's ScaledObject query for NODESET


def _helm_template(*sets: str) -> str:
    assert HELM.is_file(), f"{HELM} missing: run scripts/bootstrap-host.sh"
    done = subprocess.run([str(HELM), "template", RELEASE, str(CHART), "--namespace", NAMESPACE,
                           *(f"--set={s}" for s in sets)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _keda(docs: list[dict[str, Any]]) -> tuple[str, dict[str, str]]:
    """The ScaledObject's query for NODESET, and the labels Prometheus gives the metrics Service's series
    (its namespace and name, as a ServiceMonitor's target labels do)."""
    (scaled,) = [d for d in docs if d["kind"] == "ScaledObject"
                 and d["metadata"]["labels"]["slurmpod.io/nodeset"] == NODESET]
    (trigger,) = scaled["spec"]["triggers"]
    (service,) = [d for d in docs if d["kind"] == "Service"
                  and any(p.get("name") == "metrics" for p in d["spec"].get("ports", []))]
    labels = {"namespace": service["metadata"]["namespace"], "service": service["metadata"]["name"]}
    return str(trigger["metadata"]["query"]), labels


def _controller(s: Session, *argv: str) -> str:
    r = s.root_in(s.cluster.controller, *argv, timeout=30)
    assert r.code == 0, f"{' '.join(argv)}: {r.stderr}"
    return r.stdout


@pytest.fixture(scope="module")
def scraped(docker_client: Any, flavor: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scraped]:
    manifests = tmp_path_factory.mktemp("spmetrics-manifests")
    (manifests / "slurmpod.yaml").write_text(_helm_template(f"metrics.pollSeconds={POLL_S}"), encoding="utf-8")
    (manifests / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": ["slurmpod.yaml"]}),
        encoding="utf-8")
    keda = [d for d in yaml.safe_load_all(_helm_template(
        f"nodesets.{NODESET}.autoscaling.enabled=true", f"nodesets.{NODESET}.autoscaling.mode=keda",
        "metrics.prometheusAddress=http://prometheus.monitoring.svc:9090")) if d]
    query, labels = _keda(keda)
    with own_cluster(docker_client, NAME, flavor, WORKERS, tmp_path_factory.mktemp("spmetrics-state"),
                     "--manifests", str(manifests)) as s:
        (published,) = [p for p in cli.published(NAME) if p.key == host_wk.METRICS_HTTP]
        counters = f"{wk.AUTOSCALE_COUNTERS_FILE}.tmp"
        _controller(s, "sh", "-c", f"mkdir -p {shlex.quote(str(Path(counters).parent))} && printf %s "
                    f"{shlex.quote(json.dumps(COUNTERS))} > {counters} && mv {counters} {wk.AUTOSCALE_COUNTERS_FILE}")
        # One call of the job_submit plugin, so that its stats file (the policy series) exists.
        _controller(s, "scancel", str(sbatch(s, "--hold", "-o", "/dev/null", "--wrap", "true")))
        target = f"{LOOPBACK}:{published.host_port}"
        with promkit.running([target], job=JOB, labels=labels) as prom:
            promkit.wait_targets_up(prom, METRICS_WAIT_S)
            yield Scraped(s, prom, f"http://{target}/metrics", query)


@pytest.fixture(autouse=True)
def leaves_the_cluster_idle(scraped: Scraped) -> Iterator[None]:
    """After each test: its jobs cancelled, its drains lifted, every worker IDLE again."""
    yield
    s = scraped.s
    s.root_in(s.cluster.controller, "scancel", "-u", wk.DEMO_USER, timeout=30)
    for worker in s.cluster.workers:  # a node that is not drained refuses RESUME: nothing to lift
        s.root_in(s.cluster.controller, "scontrol", "update", f"NodeName={worker}", "State=RESUME", timeout=30)
    all_idle(s, SLURM_WAIT_S)


# --- helpers -------------------------------------------------------------------------------------------------
def _series(prom: promkit.Prometheus) -> set[frozenset[tuple[str, str]]]:
    """The label sets of every series of the exporter's target that has a current sample."""
    return {frozenset(r["metric"].items()) for r in prom.query(f'{{job="{JOB}"}}')}


def _sinfo_states(s: Session) -> Counter[str]:
    """Each node's state as sinfo words it (idle, allocated, drained, draining, future ...), FUTURE nodes
    too, the flag characters (`*` not responding, `~` powered down ...) left off."""
    listing = _controller(s, "sinfo", "--future", "--noheader", "--Node", "--format=%N|%T")
    by_node = dict(line.split("|", 1) for line in listing.split())  # a node is listed once per partition
    return Counter(state.rstrip("*~#!%$@^-") for state in by_node.values())


def _scontrol_nodes(s: Session) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = json.loads(_controller(s, "scontrol", "--future", "show", "nodes", "--json"))["nodes"]
    return nodes


def _squeue_count(s: Session, partition: str, state: str) -> int:
    return len(_controller(s, "squeue", "--noheader", f"--partition={partition}", f"--states={state}",
                           "--format=%i").split())


def _wait_running(s: Session, *job_ids: int) -> None:
    def running() -> bool | None:
        return True if all(job(s, j).state == "RUNNING" for j in job_ids) else None
    wait_for(f"jobs {job_ids} RUNNING", running, SLURM_WAIT_S)


def _drain(s: Session, node: str, reason: str) -> None:
    scontrol(s, "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}")


# --- tests ---------------------------------------------------------------------------------------------------
@pytest.mark.smoke
def test_every_series_the_dashboard_reads_is_served_and_ingested(scraped: Scraped) -> None:
    s, prom = scraped.s, scraped.prom
    stats = json.loads(_controller(s, "cat", wk.PLUGIN_STATS_FILE))
    _drain(s, s.cluster.workers[1], reasons.health("gpu-ecc", "2 uncorrectable ECC errors"))
    want = {'slurmpod_health_drained_nodes{check="gpu-ecc"}': 1, 'slurmpod_drained_nodes{owner="health"}': 1,
            "slurmpod_policy_calls_total": stats["calls"], "slurmpod_exporter_up": 1,
            **{f'slurmpod_autoscale_decisions_total{{nodeset="{NODESET}",action="{a}"}}': n
               for a, n in COUNTERS["decisions"][NODESET].items()}}
    took = prom.wait_values("the health drain, the policy's and the autoscaler's files", want, METRICS_WAIT_S)
    with urllib.request.urlopen(scraped.url, timeout=SCRAPE_GET_S) as response:
        text = response.read().decode("utf-8")
    served = {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}
    assert served >= DASHBOARD_METRICS, sorted(DASHBOARD_METRICS - served)
    ingested = {r["metric"]["__name__"] for r in prom.query(f'group by (__name__) ({{job="{JOB}"}})')}
    assert ingested >= DASHBOARD_METRICS, sorted(DASHBOARD_METRICS - ingested)
    (target,) = prom.targets()
    assert (target["health"], target["lastError"]) == ("up", ""), target
    print(f"every dashboard series served and ingested; the drain reached Prometheus in {took:.1f}s")


@pytest.mark.smoke
def test_node_series_agree_with_sinfo_and_scontrol(scraped: Scraped) -> None:
    """One node runs a job, the other is drained by an admin, and a FUTURE placeholder stands for a third
    pod: slurmpod_nodeset_nodes counts what sinfo says of each, slurm_nodes_* what scontrol's records say."""
    s, prom = scraped.s, scraped.prom
    nodes = {n["name"]: n for n in _scontrol_nodes(s)}
    busy, drained = s.cluster.workers
    template = nodes[busy]
    placeholder = Placeholder(f"{NAME}-worker-{WORKERS}", (NODESET,), int(template["cpus"]),
                              int(template["real_memory"]))
    scontrol(s, "create", *placeholder.conf())
    try:
        _wait_running(s, sbatch(s, "--exclusive", f"--nodelist={busy}", *SLEEP))
        _drain(s, drained, "cable check")
        states = _sinfo_states(s)
        assert states == Counter({"allocated": 1, "drained": 1, "future": 1}), states
        records = _scontrol_nodes(s)
        bases = Counter({"ALLOCATED": "alloc"}.get(n["state"][0], n["state"][0].lower()) for n in records)
        want = {f'slurmpod_nodeset_nodes{{nodeset="{NODESET}",state="{st}"}}': states[st]
                for st in ("idle", "allocated", "mixed", "completing", "drained", "draining", "down", "future")}
        want |= {f"slurm_nodes_{b}": bases[b] for b in ("idle", "alloc", "mixed", "future", "down")}
        want |= {"slurm_nodes": len(records), "slurm_nodes_drained": states["drained"],
                 "slurm_nodes_draining": states["draining"], "slurm_nodes_completing": 0}
        for n in records:
            label = f'{{node="{n["name"]}"}}'
            want |= {f"slurm_node_cpus{label}": n["cpus"], f"slurm_node_cpus_alloc{label}": n["alloc_cpus"],
                     f"slurm_node_memory_bytes{label}": n["real_memory"],
                     f"slurm_node_memory_alloc_bytes{label}": n["alloc_memory"]}
        for p in PARTITIONS:
            want |= {f'slurm_partition_nodes{{partition="{p}"}}': len(records),
                     f'slurm_partition_nodes_future{{partition="{p}"}}': 1}
        took = prom.wait_values("node series as sinfo and scontrol say", want, METRICS_WAIT_S)
        print(f"node series agreed with sinfo {dict(states)} and scontrol {dict(bases)} after {took:.1f}s")
    finally:
        scontrol(s, "delete", f"NodeName={placeholder.name}")
    prom.wait_values("the placeholder gone", {"slurm_nodes": WORKERS, "slurm_nodes_future": 0}, METRICS_WAIT_S)


@pytest.mark.smoke
def test_partition_job_counts_follow_held_released_and_cancelled_jobs(scraped: Scraped) -> None:
    s, prom = scraped.s, scraped.prom

    def counts(pending: int, running: int, hold: int) -> dict[str, float]:
        """The series, checked against squeue's own listing first."""
        assert (_squeue_count(s, "main", "PENDING"), _squeue_count(s, "main", "RUNNING")) == (pending, running)
        out = {}
        for p in PARTITIONS:
            mine = p == "main"
            out |= {f'slurm_partition_jobs_pending{{partition="{p}"}}': pending if mine else 0,
                    f'slurm_partition_jobs_running{{partition="{p}"}}': running if mine else 0,
                    f'slurm_partition_jobs_hold{{partition="{p}"}}': hold if mine else 0}
        return out | {"slurm_jobs_pending": pending, "slurm_jobs_running": running, "slurm_jobs_hold": hold}

    took = []
    jobs = [sbatch(s, "--hold", "--partition=main", *SLEEP) for _ in range(2)]
    took.append(prom.wait_values("two held jobs", counts(2, 0, 2), METRICS_WAIT_S))
    scontrol(s, "release", ",".join(map(str, jobs)))
    _wait_running(s, *jobs)
    took.append(prom.wait_values("both released and running", counts(0, 2, 0), METRICS_WAIT_S))
    _controller(s, "scancel", *map(str, jobs))
    wait_for("both jobs gone from squeue", lambda: True if not _squeue_count(s, "main", "RUNNING") else None,
             SLURM_WAIT_S)
    took.append(prom.wait_values("both cancelled", counts(0, 0, 0), METRICS_WAIT_S))
    print("partition job counts followed Slurm in " + ", ".join(f"{t:.1f}s" for t in took))


@pytest.mark.smoke
def test_the_charts_keda_query_counts_waiting_jobs_and_busy_nodes(scraped: Scraped) -> None:
    """The ScaledObject's query text as `helm template` renders it, run in Prometheus: both workers run a
    job, three more jobs of the nodeset cannot start and one is held: 3 waiting + 2 busy = 5 replicas."""
    s, prom, query = scraped.s, scraped.prom, scraped.keda_query
    demand = f'slurmpod_nodeset_demand_nodes{{nodeset="{NODESET}"}}'
    took = [prom.wait_value("an idle nodeset wants no pod", query, 0, METRICS_WAIT_S)]
    busy = [sbatch(s, "--exclusive", *SLEEP) for _ in range(WORKERS)]
    _wait_running(s, *busy)
    took.append(prom.wait_value("two busy nodes", query, WORKERS, METRICS_WAIT_S))
    waiting = [sbatch(s, *SLEEP) for _ in range(3)]
    held = sbatch(s, "--hold", *SLEEP)
    assert {job(s, j).state for j in [*waiting, held]} == {"PENDING"}
    took.append(prom.wait_values("three jobs waiting", {query: 3 + WORKERS, demand: 3}, METRICS_WAIT_S))
    _controller(s, "scancel", *map(str, [*waiting, held]))
    took.append(prom.wait_values("the waiting jobs cancelled", {query: WORKERS, demand: 0}, METRICS_WAIT_S))
    _controller(s, "scancel", *map(str, busy))
    all_idle(s, SLURM_WAIT_S)
    took.append(prom.wait_value("all cancelled", query, 0, METRICS_WAIT_S))
    print(f"KEDA query {query!r} followed the queue in " + ", ".join(f"{t:.1f}s" for t in took))


def test_a_job_that_names_a_busy_node_asks_only_for_the_nodes_beyond_it(scraped: Scraped) -> None:
    """--nodelist naming a busy worker: slurmctld says Priority or Resources, not ReqNodeNotAvail, and a
    new pod is never that node: the job of one node asks for none, the job of two nodes for one."""
    s, prom = scraped.s, scraped.prom
    busy = s.cluster.workers[0]
    _wait_running(s, sbatch(s, "--exclusive", f"--nodelist={busy}", *SLEEP))
    named = [sbatch(s, f"--nodelist={busy}", *SLEEP), sbatch(s, "--nodes=2", f"--nodelist={busy}", *SLEEP)]
    states = {job(s, j).state for j in named}
    assert states == {"PENDING"}, states
    took = prom.wait_values("named-node jobs", {"slurm_jobs_pending": 2,
                                                f'slurmpod_nodeset_demand_nodes{{nodeset="{NODESET}"}}': 1},
                            METRICS_WAIT_S)
    print(f"jobs naming a busy node asked for 1 new node, seen after {took:.1f}s")


@pytest.mark.parametrize(("first", "second"), [
    (("admin", "cable check"), ("health", reasons.health("gpu-ecc", "2 uncorrectable ECC errors"))),
    (("k8s", reasons.k8s("node cordoned")), ("autoscale", wk.REASON_AUTOSCALE_SCALE_IN)),
    (("prestop", wk.REASON_POD_TERMINATING), ("admin", "slurmpod: looks like ours, is not")),
], ids=["admin-health", "k8s-autoscale", "prestop-admin-lookalike"])
def test_drained_nodes_are_counted_by_who_drained_them(scraped: Scraped, first: tuple[str, str],
                                                       second: tuple[str, str]) -> None:
    s, prom = scraped.s, scraped.prom
    for worker, (_, reason) in zip(s.cluster.workers, (first, second), strict=True):
        _drain(s, worker, reason)
    owners = Counter(owner for owner, _ in (first, second))
    want = {f'slurmpod_drained_nodes{{owner="{o}"}}': owners[o]
            for o in ("health", "prestop", "k8s", "autoscale", "admin")}
    want["slurm_nodes_drained"] = WORKERS
    took = prom.wait_values(f"drains by {dict(owners)}", want, METRICS_WAIT_S)
    print(f"drains by {dict(owners)} counted after {took:.1f}s")


def test_hostile_job_names_and_reasons_add_no_series(scraped: Scraped) -> None:
    """A job name and drain reasons holding newlines, quotes, braces and backslashes, each a line of the
    text format if printed raw: the exporter serves the same series as before, none with a new value."""
    s, prom = scraped.s, scraped.prom
    prom.wait_values("a clean cluster", {"slurm_jobs": 0, "slurm_nodes_drained": 0,
                                         "absent(slurmpod_health_drained_nodes)": 1}, METRICS_WAIT_S)
    before = _series(prom)
    line = '"} 1\nslurm_nodes 99\nslurmpod_drained_nodes{owner="health"} 42\n# \\'
    sbatch(s, "--hold", f"--job-name=x{line}", f"--comment=c{line}", "-o", "/dev/null", "--wrap", "true")
    _drain(s, s.cluster.workers[0], f"admin{line}")
    _drain(s, s.cluster.workers[1], f'slurmpod: gpu"}}{line}: detail')  # not a check name: an admin's
    prom.wait_values("the hostile job and drains", {"slurm_jobs_hold": 1, 'slurmpod_drained_nodes{owner="admin"}': 2,
                                                    'slurmpod_drained_nodes{owner="health"}': 0,
                                                    "slurm_nodes": WORKERS}, METRICS_WAIT_S)
    after = _series(prom)
    assert after == before, {"added": after - before, "gone": before - after}
    (target,) = prom.targets()
    assert (target["health"], target["lastError"]) == ("up", ""), target


def test_a_stopped_slurmctld_leaves_the_last_poll_served_and_the_exporter_recovers(scraped: Scraped) -> None:
    """slurmctld frozen (SIGSTOP: it holds its port and never answers, the worst case for a client): polls
    time out at their deadline, scrapes keep answering at once with the last good poll's series and
    slurmpod_exporter_up 0, and the first poll after SIGCONT is whole again. slurmctld is never restarted;
    it is stopped for about 3 polls, well inside SlurmdTimeout (60 s), so no node is marked down."""
    s, prom = scraped.s, scraped.prom
    prom.wait_values("a good poll", {"slurmpod_exporter_up": 1, "slurm_nodes_idle": WORKERS}, METRICS_WAIT_S)
    pid = _controller(s, "pgrep", "-x", "slurmctld").split()[0]
    stopped = time.monotonic()
    _controller(s, "kill", "-STOP", pid)
    try:
        down = prom.wait_value("exporter down", "slurmpod_exporter_up", 0, METRICS_WAIT_S)
        last = prom.value("slurmpod_exporter_last_poll_timestamp_seconds")
        failures = prom.value("slurmpod_exporter_poll_failures_total") or 0
        wait_for("another failed poll", lambda: True if (prom.value("slurmpod_exporter_poll_failures_total") or 0)
                 > failures else None, METRICS_WAIT_S + 2 * promkit.SCRAPE_INTERVAL_S, poll=0.5)
        started = time.monotonic()
        with urllib.request.urlopen(scraped.url, timeout=SCRAPE_GET_S) as response:
            assert response.status == 200
        scrape_s = time.monotonic() - started
        assert prom.values(["slurmpod_exporter_up", "slurmpod_exporter_last_poll_timestamp_seconds", "slurm_nodes",
                            "slurm_nodes_idle"]) == {
            "slurmpod_exporter_up": 0, "slurmpod_exporter_last_poll_timestamp_seconds": last,
            "slurm_nodes": WORKERS, "slurm_nodes_idle": WORKERS}
        (target,) = prom.targets()
        assert target["health"] == "up", target
    finally:
        _controller(s, "kill", "-CONT", pid)
    frozen = time.monotonic() - stopped
    up = prom.wait_value("exporter up again", "slurmpod_exporter_up", 1, METRICS_WAIT_S)
    assert (prom.value("slurmpod_exporter_last_poll_timestamp_seconds") or 0) > (last or 0)
    print(f"slurmctld frozen {frozen:.1f}s: up 0 after {down:.1f}s, a scrape took {scrape_s:.2f}s, "
          f"up 1 {up:.1f}s after SIGCONT")
