"""The exporter's own cost with 1,000 nodes and 10,000 jobs in Slurm's state, beside reading Slurm at all.

A cluster of its own (one worker) gets, through its cluster spec's extraLines, room for the jobs
(MaxJobCount, and MaxArraySize for the one array that makes them); its controller pod keeps the shipped
limits (values' controller.resources), and a command that peaks above the memory limit is noted. Then, in
the controller:
- NODES dynamic nodes of the nodeset's feature, State=FUTURE: registered, no slurmd behind them;
- JOBS held jobs: one held array, whose tasks but the last are split into job records of their own by one
  `scontrol update` of that task range (a pending array is one record until then; squeue lists each split
  task as one job once the array's own record holds one task).
Measured in the controller pod, the exporter stopped (and node-reaper, whose reads would land in the
window), each round one poll and one bare read, in turn first (exporter_probe.py):
- seconds: the exporter's own Poller (poll.py, the settings its daemon builds) polling once, beside the
  same four commands run by bash (`time`); and the seconds it adds, paired per round;
- slurmctld's RPCs and their time, for each: sdiag's RPCs by user, as both run as SlurmUser, whom nothing
  else in the pod runs as (the pod's probes run as root); by message type, every user's, in a note;
- slurmctld's CPU time (its /proc stat), for each;
- the CPU time of the poll (the poller and its commands) beside that of the bare commands;
- the largest command's peak RSS.
Then the exporter runs again under supervisord: after POLLS polls its VmRSS and VmHWM and the size of
GET /metrics, beside the same read after POLLS polls at start (one worker, no jobs).
Ref: https://slurm.schedmd.com/dynamic_nodes.html, https://slurm.schedmd.com/job_array.html,
https://slurm.schedmd.com/slurm.conf.html#OPT_MaxJobCount, https://slurm.schedmd.com/sdiag.html
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from slurmpod import well_known as wk
from slurmpod.entrypoints.exporter import poll
from slurmpod.errors import PermanentError
from slurmpod_host.bench import exporter_probe
from slurmpod_host.bench.report import Figure, Report, median
from slurmpod_host.cluster import cli as cluster_cli
from slurmpod_host.cluster import lifecycle, runtime

NODES, JOBS = 1000, 10_000
# Room for the jobs beside those a restart or a cancel keeps until MinJobAge; one array of JOBS tasks.
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_MaxArraySize (the largest index is one less)
EXTRA_LINES = (f"MaxJobCount={4 * JOBS}", f"MaxArraySize={JOBS + 1}")
POLLS = 3  # exporter polls before its memory is read
SIDES = ("poll", "bare")
QUIET = ("exporter", "node-reaper")  # the controller's programs stopped while a round is measured
PROBE = "/tmp/slurmpod-bench-exporter-probe.py"
PYTHON = f"{wk.VENV_DIR}/bin/python"
SUPERVISORCTL = f"{wk.SUPERVISORCTL} -c {wk.RUN_DIR}/{wk.SUPERVISORD_CONF}"
READY_TIMEOUT_S = 180
PROBE_TIMEOUT_S = 300
POLLS_TIMEOUT_S = POLLS * (wk.DEFAULT_EXPORTER_POLL_S + 30) + 60
MIB = 1024.0


@dataclass(frozen=True, slots=True)
class Side:
    """One poll or one bare read, as exporter_probe printed it."""

    side: str
    seconds: float
    up: bool
    error: str
    rpcs: int = 0  # slurmctld's RPCs from this side's user
    rpc_us: int = 0  # slurmctld's time in them (sdiag total_time)
    rpcs_by_type: dict[str, int] = field(default_factory=dict)  # every user's: the pod's probes land here too
    ctld_cpu_s: float = 0.0
    cpu_s: float = 0.0
    child_peak_kib: int = 0


@dataclass(frozen=True, slots=True)
class Daemon:
    """The running exporter after some polls."""

    rss_kib: int
    hwm_kib: int
    scrape_bytes: int
    calls: float
    failures: float
    up: float
    poll_seconds: float


def parse_side(line: str) -> Side:
    doc = json.loads(line)
    return Side(str(doc["mode"]), float(doc["seconds"]), bool(doc["up"]), str(doc.get("error", "")),
                int(doc["rpcs"]), int(doc["rpc_us"]), {str(k): int(v) for k, v in doc["rpcs_by_type"].items()},
                float(doc["ctld_cpu_s"]), float(doc["cpu_s"]), int(doc["child_peak_kib"]))


def parse_daemon(line: str) -> Daemon | None:
    """None while the exporter is not running."""
    doc = json.loads(line)
    if not doc.get("running"):
        return None
    s = doc.get("samples") or {}
    return Daemon(int(doc["rss_kib"]), int(doc["hwm_kib"]), int(doc["scrape_bytes"]),
                  float(s.get("slurmpod_exporter_slurm_calls_total", 0)),
                  float(s.get("slurmpod_exporter_poll_failures_total", 0)),
                  float(s.get("slurmpod_exporter_up", 0)), float(s.get("slurmpod_exporter_poll_seconds", 0)))


def parse_sizes(line: str) -> dict[str, int]:
    """{command: bytes it printed} from the probe's sizes line."""
    return {str(k): int(v) for k, v in json.loads(line)["bytes"].items()}


def bench_spec(text: str) -> tuple[str, str]:
    """(cluster.yaml with EXTRA_LINES added to its extraLines, the first nodeset's feature)."""
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict) or not doc.get("nodesets"):
        raise PermanentError("the cluster spec has no nodesets to add the bench's nodes to")
    extra = [str(line) for line in doc.get("extraLines") or []]
    keys = {line.split("=", 1)[0] for line in EXTRA_LINES}
    doc["extraLines"] = [line for line in extra if line.split("=", 1)[0] not in keys] + list(EXTRA_LINES)
    return yaml.safe_dump(doc, sort_keys=False), str(doc["nodesets"][0]["feature"])


def node_range(count: int) -> str:
    """Slurm's hostlist of the bench's nodes: bench[0001-1000]."""
    width = max(4, len(str(count)))
    return f"bench[{1:0{width}d}-{count:0{width}d}]"


def rotated(i: int) -> tuple[str, ...]:
    """Round ``i``'s order: the poll first in even rounds, the bare read first in odd ones."""
    return SIDES if i % 2 == 0 else SIDES[::-1]


@dataclass(frozen=True, slots=True)
class _Pods:
    client: Any
    controller: str
    login: str

    def root(self, script: str, what: str, timeout_s: float = 60, user: str | None = None) -> str:
        done = runtime.exec_in(self.client, self.controller, ["bash", "-c", script], timeout_s=timeout_s, user=user)
        if done.code != 0:
            raise PermanentError(f"bench exporter: {what} failed (exit {done.code}): "
                                 f"{done.stdout.strip()[-300:]} {done.stderr.strip()[-400:]}")
        return done.stdout

    def researcher(self, script: str, what: str) -> str:
        home = f"/home/{wk.DEMO_USER}"
        done = runtime.exec_in(self.client, self.login, ["bash", "-c", script], timeout_s=60, user=wk.DEMO_USER,
                               workdir=home, env={"HOME": home, "USER": wk.DEMO_USER})
        if done.code != 0:
            raise PermanentError(f"bench exporter: {what} failed (exit {done.code}): {done.stderr.strip()[-400:]}")
        return done.stdout

    def probe(self, mode: str) -> str:
        # poll and bare as SlurmUser, so that sdiag's RPCs by user hold theirs alone.
        user = str(wk.SLURM_UID) if mode in SIDES else None
        out = self.root(f"{PYTHON} -P {PROBE} {mode}", f"probe {mode}", PROBE_TIMEOUT_S, user)
        return out.strip().splitlines()[-1]

    def wait(self, script: str, what: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if runtime.exec_in(self.client, self.controller, ["bash", "-c", script], timeout_s=30).code == 0:
                return
            time.sleep(1)
        raise PermanentError(f"bench exporter: {what}: not after {READY_TIMEOUT_S} s")


def _prepare(client: Any, name: str, controller: str) -> tuple[str, int]:
    """The bench's spec on a new controller pod; (the nodeset feature, its memory limit in bytes)."""
    shipped = int(client.api.inspect_container(controller)["HostConfig"].get("Memory") or 0)
    old = lifecycle.set_config_map(name, "cluster", {})
    spec, feature = bench_spec(old[wk.CONFIG_MAP_KEY_SPEC])
    lifecycle.set_config_map(name, "cluster", {**old, wk.CONFIG_MAP_KEY_SPEC: spec})
    lifecycle.replace_pod(client, name, controller, lifecycle.PodPatch())
    return feature, shipped


def _install_probe(pods: _Pods) -> None:
    encoded = base64.b64encode(Path(exporter_probe.__file__).read_bytes()).decode()
    pods.root(f"echo {encoded} | base64 -d > {PROBE} && chmod 0644 {PROBE}", "installing the probe")


def _after_polls(pods: _Pods, polls: int) -> Daemon:
    """The running exporter once it has run ``polls`` polls' Slurm commands (or failed that many)."""
    deadline = time.monotonic() + POLLS_TIMEOUT_S
    calls = len(poll.READS)  # a poll runs one command per read
    while time.monotonic() < deadline:
        seen = parse_daemon(pods.probe("daemon"))
        if seen is not None and (seen.calls >= polls * calls or seen.failures >= polls):
            return seen
        time.sleep(5)
    raise PermanentError(f"bench exporter: the exporter did not poll {polls} times in {POLLS_TIMEOUT_S} s")


def _populate(pods: _Pods, feature: str) -> float:
    """NODES future nodes and JOBS held job records; returns the seconds it took."""
    started = time.monotonic()
    # Ref: https://slurm.schedmd.com/scontrol.html#OPT_create
    pods.root(f"scontrol create NodeName={node_range(NODES)} State=FUTURE CPUs=1 RealMemory=1000 "
              f"Features={feature}", "scontrol create")
    out = pods.researcher(f"sbatch --parsable -H -o /dev/null -J bench-exporter --array=0-{JOBS - 1} --wrap true",
                          "sbatch --array")
    job = int(out.strip().split(";")[0])
    # Updating some tasks of a pending array splits each into its own job record; all of them would update
    # the array's one record. Ref: https://slurm.schedmd.com/job_array.html#scontrol
    pods.root(f"scontrol update JobId={job}_[0-{JOBS - 2}] Comment=bench-exporter", "splitting the array", 300)
    took = time.monotonic() - started
    pending = int(pods.root("squeue -h -t PD -o %i | wc -l", "counting jobs").strip())
    nodes = int(pods.root(f"sinfo --future -h -N -n {node_range(NODES)} -o %N | sort -u | wc -l",
                          "counting nodes").strip())
    if pending < JOBS or nodes != NODES:
        raise PermanentError(f"bench exporter: {pending} pending job records and {nodes} bench nodes, not "
                             f"{JOBS} and {NODES}")
    return took


def _programs(pods: _Pods, action: str) -> None:
    for program in QUIET:
        pods.root(f"{SUPERVISORCTL} {action} {program}", f"supervisorctl {action} {program}")


def cost(report: Report, flavor: str, trials: int, *, name: str) -> None:
    """Cluster ``name`` up, the bench's scale in it, ``trials`` paired rounds and the exporter's memory, down."""
    cluster_cli.down(name)
    try:
        cluster = cluster_cli.up(name, flavor, workers=1, timeout_s=300)
        client = runtime.connect()
        feature, shipped = _prepare(client, name, cluster.controller)
        pods = _Pods(client, cluster.controller, cluster.login)
        pods.wait("slurmpod probe ready", f"{cluster.controller} ready")
        _install_probe(pods)
        small = _after_polls(pods, POLLS)
        took = _populate(pods, feature)
        report.notes.append(f"exporter ({flavor}): {NODES} future nodes and {JOBS} held job records (one array, "
                            f"split) made in {took:.1f} s")
        _programs(pods, "stop")
        sizes = parse_sizes(pods.probe("sizes"))
        for side in SIDES:  # unmeasured: the first reads after the jobs came fill slurmctld's caches
            pods.probe(side)
        done: list[Side] = []
        for i in range(trials):
            for side in rotated(i):
                done.append(parse_side(pods.probe(side)))
                print(f"bench: exporter round {i + 1} {side}: {done[-1].seconds:.2f} s, {done[-1].rpcs} RPCs, "
                      f"up {done[-1].up}", flush=True)
        _programs(pods, "start")
        large = _after_polls(pods, POLLS)
    finally:
        cluster_cli.down(name)
    add_figures(report, flavor, done, small, large)
    add_notes(report, flavor, done, sizes, large=large, shipped_bytes=shipped)


def add_figures(report: Report, flavor: str, done: list[Side], small: Daemon, large: Daemon) -> None:
    polls = [s for s in done if s.side == "poll"]
    bares = [s for s in done if s.side == "bare"]
    n = len(polls)
    scale = f"{NODES} nodes, {JOBS} jobs"
    bare_name = "the same four commands by the shell"

    def paired(what: str, unit: str, get: Any, base_name: str = bare_name) -> None:
        ours, base = [float(get(s)) for s in polls], [float(get(s)) for s in bares]
        report.add(Figure(f"[{flavor}] {what} ({scale}, median of {n})", unit, median(ours), median(base), base_name,
                          samples=tuple(ours), baseline_samples=tuple(base)))

    paired("seconds per exporter poll", "s", lambda s: s.seconds)
    added = [p.seconds - b.seconds for p, b in zip(polls, bares, strict=True)]
    report.add(Figure(f"[{flavor}] seconds a poll adds over the bare commands ({scale}, median of {n} paired rounds)",
                      "s", median(added), samples=tuple(added)))
    paired("slurmctld RPCs per poll", "RPCs", lambda s: s.rpcs)
    paired("slurmctld time in those RPCs per poll (sdiag)", "ms", lambda s: s.rpc_us / 1000.0)
    paired("slurmctld CPU per poll", "s", lambda s: s.ctld_cpu_s)
    paired("CPU per poll in the controller pod (the poller and its commands)", "s", lambda s: s.cpu_s)
    paired("largest command's peak RSS in a poll", "MiB", lambda s: s.child_peak_kib / MIB)
    start = "the same exporter at start (1 worker, no jobs)"
    report.add(Figure(f"[{flavor}] exporter VmRSS after {POLLS} polls ({scale})", "MiB", large.rss_kib / MIB,
                      small.rss_kib / MIB, start))
    report.add(Figure(f"[{flavor}] exporter VmHWM (peak RSS) after {POLLS} polls ({scale})", "MiB",
                      large.hwm_kib / MIB, small.hwm_kib / MIB, start))
    report.add(Figure(f"[{flavor}] GET /metrics size ({scale})", "KiB", large.scrape_bytes / 1024.0,
                      small.scrape_bytes / 1024.0, start))


def add_notes(report: Report, flavor: str, done: list[Side], sizes: dict[str, int], *, large: Daemon,
              shipped_bytes: int) -> None:
    failed = [s for s in done if not s.up]
    if failed:
        report.notes.append(f"exporter ({flavor}): {len(failed)} of {len(done)} measured reads failed: "
                            + "; ".join(f"{s.side}: {s.error}" for s in failed))
    polls = [s for s in done if s.side == "poll"]
    kinds = sorted({k for s in polls for k in s.rpcs_by_type})
    fewest = {k: min(s.rpcs_by_type.get(k, 0) for s in polls) for k in kinds}
    # Every user's: the pod's probes add to some windows, never take away, so the fewest is the poll's.
    report.notes.append(f"exporter ({flavor}): RPCs in a poll's window by type (fewest over the rounds): " + ", ".join(
        f"{k} {n}" for k, n in fewest.items() if n))
    report.notes.append(f"exporter ({flavor}): bytes printed: " + ", ".join(f"`{k}` {v:,}" for k, v in sizes.items()))
    peak = max((s.child_peak_kib for s in done), default=0) * 1024
    if shipped_bytes and peak > shipped_bytes:
        report.notes.append(f"exporter ({flavor}): the largest command peaked at {peak / MIB / MIB:.0f} MiB, over "
                            f"the controller's shipped memory limit ({shipped_bytes / MIB / MIB:.0f} MiB)")
    report.notes.append(f"exporter ({flavor}): the running exporter after {POLLS} polls at scale: up "
                        f"{large.up:g}, {large.failures:g} failed polls, last poll {large.poll_seconds:.2f} s")
