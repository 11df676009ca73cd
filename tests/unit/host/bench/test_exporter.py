"""The exporter bench's pure parts: sdiag's RPC tables, the probe's readers, the bench spec, the figures."""

from __future__ import annotations

import ast
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from slurmpod import joblist
from slurmpod.entrypoints.cluster_spec import parse
from slurmpod.entrypoints.exporter import poll
from slurmpod.errors import PermanentError
from slurmpod_host.bench import __main__ as bench
from slurmpod_host.bench import exporter, exporter_probe
from slurmpod_host.bench.exporter import Daemon, Side
from slurmpod_host.bench.report import Report
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[4]


def sdiag(by_type: dict[str, tuple[int, int]], by_user: dict[int, tuple[int, int]]) -> dict[str, Any]:
    """An `sdiag --json` document shaped as Slurm 24.11 prints it (the parts the probe reads)."""
    def ave(count: int, total: int) -> dict[str, Any]:
        return {"set": True, "infinite": False, "number": total // count if count else 0}

    return {"statistics": {
        "rpcs_by_message_type": [{"type_id": 2000 + i, "message_type": k, "count": c, "queued": 0, "dropped": 0,
                                  "cycle_last": 0, "cycle_max": 0, "total_time": t, "average_time": ave(c, t)}
                                 for i, (k, (c, t)) in enumerate(by_type.items())],
        "rpcs_by_user": [{"user_id": u, "user": f"u{u}", "count": c, "total_time": t, "average_time": ave(c, t)}
                         for u, (c, t) in by_user.items()],
    }}


def test_rpc_table_reads_both_sections() -> None:
    doc = sdiag({"REQUEST_JOB_INFO": (3, 900), "REQUEST_STATS_INFO": (1, 40)}, {0: (7, 1000), 64030: (2, 50)})
    assert exporter_probe.rpc_table(doc) == {"REQUEST_JOB_INFO": (3, 900), "REQUEST_STATS_INFO": (1, 40)}
    assert exporter_probe.rpc_table(doc, "rpcs_by_user", "user_id") == {"0": (7, 1000), "64030": (2, 50)}


@pytest.mark.parametrize("doc", [{}, {"statistics": {}}, {"statistics": {"rpcs_by_message_type": None}}],
                         ids=["empty", "no-rpcs", "null"])
def test_rpc_table_of_a_document_without_rpcs_is_empty(doc: dict[str, Any]) -> None:
    assert exporter_probe.rpc_table(doc) == {}


def test_net_rpcs_takes_away_sdiags_own_and_never_goes_below_zero() -> None:
    before = {"REQUEST_STATS_INFO": (5, 500), "REQUEST_PING": (1, 10)}
    # The poll's four commands (two partition reads: squeue loads the partitions too), plus one sdiag.
    after = {"REQUEST_STATS_INFO": (7, 700), "REQUEST_PING": (1, 10), "REQUEST_JOB_INFO": (1, 30_000),
             "REQUEST_NODE_INFO": (1, 2000), "REQUEST_PARTITION_INFO": (2, 100)}
    # One sdiag, and a probe's ping that landed in the blank window only.
    blank = {**after, "REQUEST_STATS_INFO": (8, 790), "REQUEST_PING": (2, 20)}
    assert exporter_probe.net_rpcs(before, after, blank) == {
        "REQUEST_JOB_INFO": (1, 30_000), "REQUEST_NODE_INFO": (1, 2000), "REQUEST_PARTITION_INFO": (2, 100),
        "REQUEST_STATS_INFO": (1, 110)}


def test_bare_script_times_the_commands_and_fails_with_them(tmp_path: Path) -> None:
    ok = subprocess.run(["bash", "-c", exporter_probe.bare_script([("echo", "a b; touch x"), ("true",)])],
                        capture_output=True, text=True, timeout=30, cwd=tmp_path, check=False)
    assert ok.returncode == 0 and ok.stdout == ""
    assert float(ok.stderr.strip().splitlines()[-1]) >= 0
    assert not (tmp_path / "x").exists()  # an argument is one word, never a second command
    failed = subprocess.run(["bash", "-c", exporter_probe.bare_script([("false",), ("touch", "y")])],
                            capture_output=True, text=True, timeout=30, cwd=tmp_path, check=False)
    assert failed.returncode != 0 and not (tmp_path / "y").exists()


def test_bare_script_runs_the_exporters_four_commands() -> None:
    script = exporter_probe.bare_script(poll.commands())
    assert script.count(">/dev/null") == len(poll.READS) == 4
    assert "scontrol --future show nodes --json >/dev/null" in script
    assert f"{shlex.join(joblist.ARGV)} >/dev/null" in script


@pytest.mark.parametrize(("stat", "ticks"), [
    ("123 (slurmctld) S 1 123 123 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 1000 1 1 0", 325),
    ("9 (a) b (c)) R 1 9 9 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 5 1 1 0", 10),
], ids=["slurmctld", "name-with-parens-and-spaces"])
def test_proc_ticks_adds_utime_and_stime(stat: str, ticks: int) -> None:
    assert exporter_probe.proc_ticks(stat) == ticks


def test_proc_ticks_reads_a_real_stat_line() -> None:
    assert exporter_probe.proc_ticks(Path("/proc/self/stat").read_text()) >= 0


@pytest.mark.parametrize(("key", "kib"), [("VmRSS", 72472), ("VmHWM", 262544), ("VmSwap", 0)],
                         ids=["rss", "hwm", "absent"])
def test_status_kib(key: str, kib: int) -> None:
    status = "Name:\tslurmpod\nVmHWM:\t  262544 kB\nVmRSS:\t   72472 kB\nThreads:\t3\n"
    assert exporter_probe.status_kib(status, key) == kib


def test_find_pid_matches_a_process_by_its_argv() -> None:
    marker = "31.4159"
    child = subprocess.Popen(["sleep", marker])
    try:
        # Until the child has exec'd, its argv is this process's.
        found, _ = wait_for("sleep exec'd", lambda: exporter_probe.find_pid(lambda argv: argv == ["sleep", marker]),
                            timeout=10, poll=0.02)
        assert found == child.pid
        assert exporter_probe.find_pid(lambda argv: argv == ["sleep", "no-such"]) is None
    finally:
        child.kill()
        child.wait(timeout=10)


def test_probe_matches_slurmctld_not_slurmscriptd_and_the_exporter() -> None:
    assert exporter_probe._is_slurmctld(["/usr/sbin/slurmctld", "-D"])
    assert not exporter_probe._is_slurmctld(["slurmctld: slurmscriptd"])
    assert exporter_probe._is_exporter(["/opt/slurmpod/bin/python", "/usr/local/bin/slurmpod", "daemon", "exporter",
                                        "--port", "9401"])
    assert not exporter_probe._is_exporter(["/opt/slurmpod/bin/python", "/tmp/probe.py", "daemon"])


def test_probe_refuses_an_unknown_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert exporter_probe.main(["probe", "scrape"]) == 2
    assert "usage" in capsys.readouterr().err


def test_probe_imports_nothing_of_the_host_side() -> None:
    """It runs in a pod, where only the standard library, slurmpod and its dependencies are."""
    tree = ast.parse(Path(exporter_probe.__file__).read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    allowed = set(sys.stdlib_module_names) | {"slurmpod", "prometheus_client", "__future__"}
    assert names and all(name.split(".")[0] in allowed for name in names), names


def probe_line(mode: str, seconds: float, **over: Any) -> str:
    doc = {"mode": mode, "wall_s": seconds + 0.1, "seconds": seconds, "up": True, "error": "", "rpcs": 5,
           "rpc_us": 20_000, "rpcs_by_type": {"REQUEST_JOB_INFO": 1, "REQUEST_PARTITION_INFO": 2},
           "ctld_cpu_s": 0.03, "cpu_s": seconds, "child_peak_kib": 1_555_600, **over}
    return json.dumps(doc)


def test_parse_side_reads_the_probes_line() -> None:
    side = exporter.parse_side(probe_line("poll", 4.5, up=False, error="squeue --json exited -9"))
    assert side == Side("poll", 4.5, False, "squeue --json exited -9", 5, 20_000,
                        {"REQUEST_JOB_INFO": 1, "REQUEST_PARTITION_INFO": 2}, 0.03, 4.5, 1_555_600)


def test_parse_daemon_reads_memory_and_samples_and_none_when_stopped() -> None:
    line = json.dumps({"mode": "daemon", "wall_s": 0.2, "running": True, "pid": 10, "rss_kib": 72_000,
                       "hwm_kib": 260_000, "scrape_bytes": 123_456,
                       "samples": {"slurmpod_exporter_up": 1.0, "slurmpod_exporter_slurm_calls_total": 12.0,
                                   "slurmpod_exporter_poll_failures_total": 0.0,
                                   "slurmpod_exporter_poll_seconds": 4.6}})
    assert exporter.parse_daemon(line) == Daemon(72_000, 260_000, 123_456, 12.0, 0.0, 1.0, 4.6)
    assert exporter.parse_daemon(json.dumps({"mode": "daemon", "running": False})) is None


def test_parse_sizes_reads_the_bytes_by_command() -> None:
    line = json.dumps({"mode": "sizes", "wall_s": 12.0, "bytes": {"squeue --json": 76_918_453, "sdiag --json": 6167}})
    assert exporter.parse_sizes(line) == {"squeue --json": 76_918_453, "sdiag --json": 6167}


def shipped_spec() -> str:
    """cluster.yaml of the shipped manifests' ConfigMap."""
    docs = yaml.safe_load_all((REPO / "deploy" / "kubernetes" / "slurmpod.yaml").read_text())
    cm = next(d for d in docs if d and d["kind"] == "ConfigMap" and "cluster.yaml" in (d.get("data") or {}))
    return str(cm["data"]["cluster.yaml"])


def test_bench_spec_adds_the_lines_to_the_shipped_spec_and_keeps_the_rest() -> None:
    text, feature = exporter.bench_spec(shipped_spec())
    spec, shipped = parse(yaml.safe_load(text)), parse(yaml.safe_load(shipped_spec()))
    assert spec.extra_lines == exporter.EXTRA_LINES == ("MaxJobCount=40000", "MaxArraySize=10001")
    assert feature == shipped.nodesets[0].feature
    assert (spec.nodesets, spec.partitions, spec.metrics) == (shipped.nodesets, shipped.partitions, shipped.metrics)


def test_bench_spec_replaces_a_sites_own_limit_and_keeps_its_other_lines() -> None:
    site = yaml.safe_dump({"nodesets": [{"name": "gpu", "feature": "h100"}],
                           "extraLines": ["MaxJobCount=5000", "SlurmctldDebug=info"]})
    text, feature = exporter.bench_spec(site)
    assert yaml.safe_load(text)["extraLines"] == ["SlurmctldDebug=info", *exporter.EXTRA_LINES]
    assert feature == "h100"


def test_bench_spec_without_nodesets_is_refused() -> None:
    with pytest.raises(PermanentError, match="nodesets"):
        exporter.bench_spec("clusterName: x\n")


@pytest.mark.parametrize(("count", "hostlist"), [(1000, "bench[0001-1000]"), (12, "bench[0001-0012]"),
                                                 (20000, "bench[00001-20000]")], ids=["1000", "12", "20000"])
def test_node_range(count: int, hostlist: str) -> None:
    assert exporter.node_range(count) == hostlist


def test_rounds_alternate_which_side_goes_first() -> None:
    assert [exporter.rotated(i) for i in range(3)] == [("poll", "bare"), ("bare", "poll"), ("poll", "bare")]


def sides() -> list[Side]:
    polls = [Side("poll", s, True, "", 5, 20_000, {}, 0.04, s, 1_555_600) for s in (4.7, 4.6, 5.9)]
    bares = [Side("bare", s, True, "", 5, 16_000, {}, 0.03, s - 0.8, 1_555_000) for s in (3.8, 3.9, 3.7)]
    return [x for pair in zip(polls, bares, strict=True) for x in pair]


def test_figures_are_medians_beside_the_bare_reads_and_the_start() -> None:
    report = Report()
    small, large = Daemon(30_000, 31_000, 20_480, 12, 0, 1, 0.5), Daemon(72_000, 262_144, 1_048_576, 12, 0, 1, 4.6)
    exporter.add_figures(report, "24.11", sides(), small, large)
    by = {f.name.split(" (")[0].removeprefix("[24.11] "): f for f in report.figures}
    assert (by["seconds per exporter poll"].value, by["seconds per exporter poll"].baseline) == (4.7, 3.8)
    assert by["seconds per exporter poll"].samples == (4.7, 4.6, 5.9)
    assert by["seconds a poll adds over the bare commands"].value == pytest.approx(0.9)  # paired: 0.9, 0.7, 2.2
    assert (by["slurmctld RPCs per poll"].value, by["slurmctld RPCs per poll"].ratio) == (5, 1.0)
    assert by["slurmctld time in those RPCs per poll"].value == 20.0
    assert by["exporter VmHWM"].value == 256.0 and by["GET /metrics size"].value == 1024.0
    assert by["GET /metrics size"].baseline == 20.0
    assert all(f.ok is None and not f.floor for f in report.figures)  # the part has no floor


@pytest.mark.parametrize(("shipped", "said"), [(1 << 30, True), (4 << 30, False), (0, False)],
                         ids=["over-1Gi", "under-4Gi", "unknown"])
def test_notes_say_when_the_peak_passes_the_shipped_limit(shipped: int, said: bool) -> None:
    report = Report()
    done = [*sides(), Side("poll", 10.8, False, "squeue --json timed out", 4, 0, {}, 0.1, 9.0, 0)]
    exporter.add_notes(report, "24.11", done, {"squeue --json": 76_918_453}, large=Daemon(1, 1, 1, 12, 1, 0, 10.8),
                       shipped_bytes=shipped)
    text = "\n".join(report.notes)
    assert "1 of 7 measured reads failed: poll: squeue --json timed out" in text
    assert "`squeue --json` 76,918,453" in text
    assert ("over the controller's shipped memory limit (1024 MiB)" in text) is said


def test_the_part_is_registered() -> None:
    assert "exporter" in bench.PARTS and "exporter" in (bench.__doc__ or "")
    assert bench.EXPORTER_CLUSTER not in (bench.BENCH_CLUSTER, *bench.REQUEUE_CLUSTERS)
    assert os.path.basename(exporter.PROBE).endswith(".py")
