"""Submit cost of the job_submit policy: no plugin, job_submit/lua, job_submit/slurmpod, in one cluster.

The three set-ups alternate (none, lua, slurmpod; ``trials`` rounds, the order rotated each round) in the
same cluster, so noise hits them alike. Each trial switches JobSubmitPlugins in the controller's
slurm.conf, restarts slurmctld, warms it up with WARMUP_JOBS submissions (the first RPCs after a restart
pay for caches and, with lua, the script's load), resets sdiag, submits JOBS held jobs from CLIENTS
parallel sbatch loops in the login pod as the researcher (the same jobs for every set-up), then reads:
- the average REQUEST_SUBMIT_BATCH_JOB time slurmctld measured (sdiag, microseconds);
- submissions per second, wall clock of the loops inside the login pod;
- for slurmpod, the time spent inside the plugin per call, measured by its C shim (p50, p99), over the
  measured submissions only (its histogram after the warm-up is subtracted), and how many of those
  calls its C fast path decided without Python.
The lua set-up runs host/bench/policy_lua/job_submit.lua, the shipped policy written for job_submit/lua.
Ref: https://slurm.schedmd.com/sdiag.html, https://slurm.schedmd.com/job_submit_plugins.html#lua
"""

from __future__ import annotations

import base64
import json
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurmpod import well_known as wk
from slurmpod.errors import TransientError
from slurmpod.slurm_plugins import stats
from slurmpod_host.bench.report import Figure, Report
from slurmpod_host.cluster import runtime

SETUPS = ("none", "lua", "slurmpod")  # entrypoints.cluster_spec.Policy
CLIENTS, JOBS = 4, 1000  # 4 parallel clients, 1000 held jobs
SUBMIT_FLOOR_RATIO = 1.10  # floor: median submit time with slurmpod at most 1.10x no plugin, <= lua
PLUGIN_P50_FLOOR_US = 100  # floor: at most 100 us p50 inside the plugin, default policy
SLURM_CONF = f"{wk.SLURM_ETC}/slurm.conf"
LUA_SCRIPT = Path(__file__).resolve().parent / "policy_lua" / "job_submit.lua"
# 15 trials x 1000 jobs outrun the default MaxJobCount (10000) while finished jobs wait MinJobAge (300 s)
# to be purged: the bench lowers both for its cluster. Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_MinJobAge
BENCH_LINES = ("MinJobAge=2", "MaxJobCount=100000")
RESTART_TIMEOUT_S = 90
SUBMIT_TIMEOUT_S = 600
DRAIN_QUEUE_TIMEOUT_S = 120
STATS_FLUSH_S = 1.2  # the shim writes its stats at most once a second, on a call
WARMUP_JOBS = 40  # per trial, before sdiag is reset: not measured
SUPERVISORCTL = ("supervisorctl", "-c", f"{wk.RUN_DIR}/{wk.SUPERVISORD_CONF}")
# `REQUEST_SUBMIT_BATCH_JOB ( 4003) count:1000 ave_time:3456 total_time:3456000` in sdiag's RPC section.
_SDIAG_SUBMIT = re.compile(r"REQUEST_SUBMIT_BATCH_JOB\s*\(\s*\d+\)\s*count:(?P<count>\d+)\s+ave_time:(?P<ave>\d+)")


@dataclass(frozen=True, slots=True)
class Trial:
    setup: str
    count: int  # REQUEST_SUBMIT_BATCH_JOB RPCs sdiag counted
    ave_us: float  # their average time in slurmctld
    per_s: float  # submissions per second (wall clock of the parallel loops)
    plugin: stats.PluginStats | None = None


def parse_sdiag_submit(text: str) -> tuple[int, int]:
    """(count, ave_time us) of REQUEST_SUBMIT_BATCH_JOB in `sdiag` output; (0, 0) when absent."""
    m = _SDIAG_SUBMIT.search(text)
    return (int(m["count"]), int(m["ave"])) if m else (0, 0)


def conf_edit(setup: str) -> str:
    """Shell that points slurm.conf's JobSubmitPlugins at ``setup`` (and adds the bench's lines once)."""
    line = f"JobSubmitPlugins={setup}" if setup != "none" else "#JobSubmitPlugins=none"
    script = [f"sed -i 's/^#\\?JobSubmitPlugins=.*/{line}/' {SLURM_CONF}",
              f"grep -qx '{line}' {SLURM_CONF} || echo '{line}' >> {SLURM_CONF}"]
    script += [f"grep -qx '{extra}' {SLURM_CONF} || echo '{extra}' >> {SLURM_CONF}" for extra in BENCH_LINES]
    return " && ".join(script)


def submit_loops(clients: int, jobs: int, tag: str = "policy") -> str:
    """Shell run as the researcher: ``clients`` parallel sbatch loops; prints start, end and failures."""
    each = jobs // clients
    # A job name unique per submission: the plugin's Python side remembers its answer for a repeated
    # request, and the bench measures fresh decisions, not remembered ones.
    loops = [f"for i in $(seq {each}); do sbatch -H -Q -o /dev/null -J bench-{tag}-{c}-$i --wrap true "
             ">/dev/null 2>&1 || echo FAIL; done" for c in range(clients)]
    return (f"s=$(date +%s.%N); {' & '.join(f'( {loop} )' for loop in loops)}; wait; "
            "echo \"TIMES $s $(date +%s.%N)\"")


def _root(client: Any, pod: str, script: str, timeout_s: float = 60) -> runtime.ExecResult:
    return runtime.exec_in(client, pod, ["bash", "-c", script], timeout_s=timeout_s)


def _must(result: runtime.ExecResult, what: str) -> str:
    if result.code != 0:
        raise TransientError(f"bench policy: {what} failed (exit {result.code}): {result.stderr.strip()[-400:]}")
    return result.stdout


def install_lua(client: Any, controller: str) -> None:
    encoded = base64.b64encode(LUA_SCRIPT.read_bytes()).decode()
    _must(_root(client, controller, f"echo {encoded} | base64 -d > {wk.SLURM_ETC}/job_submit.lua"), "job_submit.lua")


def switch(client: Any, controller: str, setup: str) -> None:
    """Point slurm.conf at ``setup``, restart slurmctld, and check the running one reports it."""
    _must(_root(client, controller, conf_edit(setup)), f"editing slurm.conf for {setup}")
    _must(runtime.exec_in(client, controller, [*SUPERVISORCTL, "restart", "slurmctld"], timeout_s=60),
          "restarting slurmctld")
    deadline = time.monotonic() + RESTART_TIMEOUT_S
    want = "(null)" if setup == "none" else setup
    while time.monotonic() < deadline:
        shown = _root(client, controller, "scontrol show config 2>/dev/null | grep '^JobSubmitPlugins'", 15)
        if shown.code == 0 and shown.stdout.split("=", 1)[-1].strip() == want:
            return
        time.sleep(0.5)
    raise TransientError(f"bench policy: slurmctld with JobSubmitPlugins={want} not up after {RESTART_TIMEOUT_S} s")


def _drain_queue(client: Any, controller: str) -> None:
    _root(client, controller, f"scancel -u {wk.DEMO_USER}", 60)
    deadline = time.monotonic() + DRAIN_QUEUE_TIMEOUT_S
    while time.monotonic() < deadline:
        if not _root(client, controller, f"squeue -h -u {wk.DEMO_USER} -o %i", 30).stdout.strip():
            return
        time.sleep(1)
    raise TransientError(f"bench policy: {wk.DEMO_USER}'s jobs still queued after {DRAIN_QUEUE_TIMEOUT_S} s")


def _as_researcher(client: Any, login: str, script: str, timeout_s: float) -> runtime.ExecResult:
    home = f"/home/{wk.DEMO_USER}"
    return runtime.exec_in(client, login, ["bash", "-c", script], timeout_s=timeout_s, user=wk.DEMO_USER,
                           workdir=home, env={"HOME": home, "USER": wk.DEMO_USER})


def _plugin_snapshot(client: Any, controller: str, login: str) -> Any:
    """The shim's stats JSON as of now: wait out its once-a-second write limit, then make one call to write it."""
    time.sleep(STATS_FLUSH_S)
    _as_researcher(client, login, "sbatch -H -Q -o /dev/null -J bench-policy-flush --wrap true", 30)
    return json.loads(_must(_root(client, controller, f"cat {wk.PLUGIN_STATS_FILE}"), "reading the plugin's stats"))


def trial(client: Any, controller: str, login: str, setup: str, *, clients: int = CLIENTS,
          jobs: int = JOBS) -> Trial:
    switch(client, controller, setup)
    _must(_as_researcher(client, login, submit_loops(clients, WARMUP_JOBS, "warm"), SUBMIT_TIMEOUT_S), "warming up")
    before = _plugin_snapshot(client, controller, login) if setup == "slurmpod" else None
    _must(_root(client, controller, "sdiag --reset"), "sdiag --reset")
    run = _must(_as_researcher(client, login, submit_loops(clients, jobs), SUBMIT_TIMEOUT_S), "submitting")
    failures = run.count("FAIL")
    times = [line.split() for line in run.splitlines() if line.startswith("TIMES ")]
    if failures or not times:
        raise TransientError(f"bench policy ({setup}): {failures} of {jobs} submissions failed")
    wall = float(times[-1][2]) - float(times[-1][1])
    count, ave = parse_sdiag_submit(_must(_root(client, controller, "sdiag"), "sdiag"))
    plugin = None
    if before is not None:
        # The measured jobs plus the one call that flushes the stats.
        plugin = stats.parse(stats.delta(before, _plugin_snapshot(client, controller, login)), wk.PLUGIN_STATS_FILE)
        if plugin.calls < jobs:
            raise TransientError(f"bench policy: the plugin counted {plugin.calls} calls for {jobs} jobs")
    _drain_queue(client, controller)
    print(f"bench: policy {setup}: {count} submits, ave {ave} us, {jobs / wall:.1f}/s"
          + (f", plugin p50 {plugin.p50_us} us p99 {plugin.p99_us} us, {plugin.fast}/{plugin.calls} in C"
             if plugin else ""), flush=True)
    return Trial(setup, count, float(ave), jobs / wall, plugin)


def rotated(setups: tuple[str, ...], i: int) -> tuple[str, ...]:
    """Round ``i``'s order: each set-up takes each place in turn, so none always runs first after a
    drained queue or last in a round."""
    k = i % len(setups)
    return (*setups[k:], *setups[:k])


def submit_cost(report: Report, client: Any, controller: str, login: str, trials: int = 5) -> list[Trial]:
    """Alternate the three set-ups ``trials`` times; add the medians to the report."""
    install_lua(client, controller)
    done: list[Trial] = []
    try:
        for i in range(trials):
            for setup in rotated(SETUPS, i):
                done.append(trial(client, controller, login, setup))
    finally:
        switch(client, controller, "slurmpod")
    add_figures(report, done, trials)
    return done


def add_figures(report: Report, done: list[Trial], trials: int) -> None:
    by = {s: [t for t in done if t.setup == s] for s in SETUPS}
    ave = {s: statistics.median(t.ave_us for t in ts) for s, ts in by.items()}
    rate = {s: statistics.median(t.per_s for t in ts) for s, ts in by.items()}
    report.add(Figure(f"submit RPC time, slurmpod plugin (sdiag ave, median of {trials})", "us", ave["slurmpod"],
                      ave["none"], "no job_submit plugin", f"<= {SUBMIT_FLOOR_RATIO}x baseline",
                      ave["slurmpod"] <= SUBMIT_FLOOR_RATIO * ave["none"],
                      tuple(t.ave_us for t in by["slurmpod"]), tuple(t.ave_us for t in by["none"])))
    report.add(Figure(f"submit RPC time, slurmpod plugin vs job_submit/lua (median of {trials})", "us",
                      ave["slurmpod"], ave["lua"], "job_submit/lua, same policy", "<= 1.00x baseline",
                      ave["slurmpod"] <= ave["lua"], tuple(t.ave_us for t in by["slurmpod"]),
                      tuple(t.ave_us for t in by["lua"])))
    for setup in SETUPS:
        report.add(Figure(f"submissions per second, {setup} ({CLIENTS} clients, {JOBS} held jobs, median)", "1/s",
                          rate[setup], samples=tuple(t.per_s for t in by[setup])))
    plugin = [t.plugin for t in by["slurmpod"] if t.plugin is not None]
    if plugin:
        p50 = statistics.median(p.p50_us for p in plugin)
        p99 = statistics.median(p.p99_us for p in plugin)
        report.add(Figure("time inside the slurmpod plugin per call, p50 (C shim)", "us", p50,
                          floor=f"<= {PLUGIN_P50_FLOOR_US} us", ok=p50 <= PLUGIN_P50_FLOOR_US,
                          samples=tuple(float(p.p50_us) for p in plugin)))
        report.add(Figure("time inside the slurmpod plugin per call, p99 (C shim)", "us", p99,
                          samples=tuple(float(p.p99_us) for p in plugin)))
        share = [100.0 * p.fast / p.calls if p.calls else 0.0 for p in plugin]
        report.add(Figure("slurmpod plugin calls decided by its C fast path (no Python)", "%",
                          statistics.median(share), samples=tuple(share)))
