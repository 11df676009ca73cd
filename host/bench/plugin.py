"""The job_submit plugin's own cost per call, no Docker: job_submit_slurmpod.so in a stand-in slurmctld.

The plugin is built as the controller image builds it (build_plugin, cffi embedding), against the test
headers in tests/fakes/slurm, and loaded by tests/fakes/slurm/slurmctld_host.c, which calls job_submit
from THREADS threads at once, every job with its own name, on the preemptible partition (a job the
policy modifies: time cap, requeue, grace signal). Two policies alternate ``trials`` times:
- the shipped default policy, whose jobs the C fast path decides;
- the same policy plus a site rule that returns None, which sends every call to Python (the path of
  site rules, access by group and multi-node placement).
Each figure is the shim's own p50 per call (its 1 us histogram), median over the trials.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sysconfig
import tempfile
from pathlib import Path

import yaml

from slurmpod import well_known as wk
from slurmpod.errors import PermanentError
from slurmpod.slurm_plugins import build_plugin, stats
from slurmpod_host.bench.report import Figure, Report

THREADS, REPEAT = 4, 2500
JOB = "preempt"
RUN_TIMEOUT_S = 300
SITE_RULE = "def rule(job, decision):\n    return None\n"


def default_policy(repo: Path) -> str:
    """The shipped policy: the `slurmpod-policy` ConfigMap of the chart's rendered output."""
    docs = yaml.safe_load_all((repo / "deploy" / "kubernetes" / "slurmpod.yaml").read_text(encoding="utf-8"))
    for doc in docs:
        if doc and doc.get("kind") == "ConfigMap" and doc["metadata"]["name"] == "slurmpod-policy":
            return str(doc["data"]["policy.yaml"])
    raise PermanentError("deploy/kubernetes/slurmpod.yaml has no slurmpod-policy ConfigMap")


def build(repo: Path, out: Path) -> tuple[Path, Path]:
    """(the plugin, the stand-in slurmctld) built into ``out``."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise PermanentError("gcc is needed to build the plugin and the stand-in slurmctld")
    fakes = repo / "tests" / "fakes" / "slurm"
    plugin = build_plugin.build(out, [str(fakes / "include")], [sysconfig.get_paths()["purelib"]])
    host = out / "slurmctld_host"
    subprocess.run([cc, "-O1", "-rdynamic", "-I", str(fakes / "include"), "-o", str(host),
                    str(fakes / "slurmctld_host.c"), "-ldl", "-lpthread"], check=True, timeout=RUN_TIMEOUT_S)
    return plugin, host


def run(plugin: Path, host: Path, policy: Path, stats_file: Path) -> stats.PluginStats:
    env = {**os.environ, wk.ENV_POLICY: str(policy), wk.ENV_PLUGIN_STATS: str(stats_file), "HOST_UNIQUE": "1"}
    done = subprocess.run([str(host), str(plugin), "--threads", str(THREADS), "--repeat", str(REPEAT), JOB],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False, env=env)
    if done.returncode != 0 or "mismatches=0" not in done.stdout:
        raise PermanentError(f"stand-in slurmctld failed (exit {done.returncode}): {done.stdout[-400:]}")
    return stats.read(stats_file)


def stand_in(report: Report, repo: Path, trials: int = 5) -> None:
    with tempfile.TemporaryDirectory(prefix="slurmpod-bench-plugin-") as tmp_s:
        tmp = Path(tmp_s)
        plugin, host = build(repo, tmp)
        (tmp / "rules.py").write_text(SITE_RULE, encoding="utf-8")
        policies = {"c": tmp / "default.yaml", "python": tmp / "with-rule.yaml"}
        policies["c"].write_text(default_policy(repo), encoding="utf-8")
        policies["python"].write_text(default_policy(repo) + "rules: [{file: rules.py, function: rule}]\n",
                                      encoding="utf-8")
        got: dict[str, list[stats.PluginStats]] = {"c": [], "python": []}
        for _ in range(trials):
            for path, policy in policies.items():
                got[path].append(run(plugin, host, policy, tmp / f"stats-{path}.json"))
    # The host's warm-up call before its threads (the caller's name not yet in the C cache: Python),
    # each thread's jobs, and one after them; with the default policy every call but the first is C's.
    calls = 1 + THREADS * REPEAT + 1
    for path, runs in got.items():
        if any(s.calls != calls or s.fast != (calls - 1 if path == "c" else 0) for s in runs):
            raise PermanentError(f"stand-in slurmctld: unexpected call counts on the {path} path: {runs}")
    fast = statistics.median(s.p50_us for s in got["c"])
    slow = statistics.median(s.p50_us for s in got["python"])
    report.add(Figure(f"plugin per call in a stand-in slurmctld, C fast path, p50 ({THREADS} threads, {calls} "
                      f"unique jobs, median of {trials})", "us", fast, slow, "Python path (a site rule)",
                      samples=tuple(float(s.p50_us) for s in got["c"]),
                      baseline_samples=tuple(float(s.p50_us) for s in got["python"])))
    report.add(Figure("plugin per call in a stand-in slurmctld, C fast path, p99", "us",
                      statistics.median(s.p99_us for s in got["c"]), statistics.median(s.p99_us for s in got["python"]),
                      "Python path (a site rule)", samples=tuple(float(s.p99_us) for s in got["c"]),
                      baseline_samples=tuple(float(s.p99_us) for s in got["python"])))
