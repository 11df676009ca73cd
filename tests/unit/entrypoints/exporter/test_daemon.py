"""`slurmpod daemon exporter`: its settings from the cluster spec and flags, bad input refused with exit 2
before Slurm is asked anything, and the real command end to end over stand-in Slurm commands on loopback."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import pytest
import slurmdocs
import yaml
from fakes.slurm_client import FakeSlurm
from prometheus_client.parser import text_string_to_metric_families
from slurmdocs import node

from slurmpod import joblist
from slurmpod import well_known as wk
from slurmpod.demand import NodeSetShape
from slurmpod.entrypoints import cluster_spec
from slurmpod.entrypoints.exporter import daemon
from slurmpod.entrypoints.exporter.poll import Poller
from slurmpod.errors import BadInput
from slurmpod.joblist import JobRecord
from slurmpod.slurm import Report

SLURMPOD = Path(sys.executable).with_name("slurmpod")
SPEC = {"nodesets": [{"name": "gpu", "feature": "h100"}, {"name": "cpu"}],
        "partitions": [{"name": "main", "nodesets": ["gpu", "cpu"], "default": True},
                       {"name": "gpu", "nodesets": ["gpu"]}]}


def test_shapes_are_the_specs_nodesets_with_the_partitions_that_hold_them() -> None:
    assert daemon.shapes(cluster_spec.parse(SPEC)) == (
        NodeSetShape("gpu", "h100", ("main", "gpu"), cpus=0, gpus=0),
        NodeSetShape("cpu", "cpu", ("main",), cpus=0, gpus=0))


def test_a_nodeset_with_a_shape_is_judged_by_it_as_the_autoscaler_judges_it() -> None:
    spec = {**SPEC, "nodesets": [{"name": "gpu", "feature": "h100", "shape": {"cpu": "8", "memory": "64Gi",
                                                                            "gpus": 4}}, {"name": "cpu"}]}
    assert daemon.shapes(cluster_spec.parse(spec))[0] == NodeSetShape("gpu", "h100", ("main", "gpu"), cpus=8, gpus=4)


@pytest.mark.parametrize(("metrics", "flag", "seconds"), [({}, None, 15.0), ({"pollSeconds": 60}, None, 60.0),
                                                          ({"pollSeconds": 60}, 7.5, 7.5)],
                         ids=["default", "spec", "flag-wins"])
def test_poll_interval_from_the_spec_or_the_flag(metrics: dict[str, int], flag: float | None, seconds: float) -> None:
    assert daemon.settings(cluster_spec.parse({**SPEC, "metrics": metrics}), flag).poll_seconds == seconds


def test_a_flag_faster_than_the_floor_is_bad_input() -> None:
    with pytest.raises(BadInput) as err:
        daemon.settings(cluster_spec.parse(SPEC), 0.5)
    assert err.value.problems[0].field == "--poll-seconds"


def _stand_ins(tmp_path: Path, docs: dict[Report, dict[str, object]] | None,
               jobs: Sequence[JobRecord] = ()) -> tuple[Path, Path]:
    """scontrol and sdiag that print ``docs``, squeue that prints the lines of ``jobs`` (None: that fail as
    when slurmctld is away), each leaving a line in the calls file."""
    calls, bin_dir = tmp_path / "calls", tmp_path / "bin"
    bin_dir.mkdir()
    by_tool: dict[str, Report | dict[str, Report] | None] = {
        "scontrol": {"nodes": Report.NODES, "partitions": Report.PARTITIONS}, "squeue": None, "sdiag": Report.DIAG}
    for tool, which in by_tool.items():
        lines = [f'echo "{tool} $*" >> {calls}']
        if docs is None:
            lines.append('echo "Unable to contact slurm controller (connect failure)" >&2; exit 1')
        elif isinstance(which, dict):
            for word, report in which.items():
                (tmp_path / f"{report.name}.json").write_text(json.dumps(docs[report]))
                lines.append(f'case "$*" in *{word}*) cat {tmp_path / f"{report.name}.json"}; exit 0;; esac')
            lines.append("exit 1")
        elif which is None:
            (tmp_path / "squeue.txt").write_text("".join(f"{slurmdocs.line(j)}\n" for j in jobs))
            lines.append(f"cat {tmp_path / 'squeue.txt'}")
        else:
            (tmp_path / f"{which.name}.json").write_text(json.dumps(docs[which]))
            lines.append(f"cat {tmp_path / f'{which.name}.json'}")
        script = bin_dir / tool
        script.write_text("#!/bin/sh\n" + "\n".join(lines) + "\n")
        script.chmod(0o755)
    return calls, bin_dir


def _env(tmp_path: Path, bin_dir: Path, spec: dict[str, object], **extra: str) -> dict[str, str]:
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(spec))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURMPOD_")}
    env.update({"PATH": f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}",
                wk.ENV_CLUSTER_SPEC: str(tmp_path / "cluster.yaml"),
                wk.ENV_TERMINATION_LOG: str(tmp_path / "termination-log")}, **extra)
    return env


@pytest.mark.parametrize(
    ("spec", "argv", "extra", "named"),
    [
        ({"metrics": {"enabled": False}}, [], {}, "metrics.enabled='false'"),
        ({"metrics": {"pollSeconds": 1}}, [], {}, "metrics.pollSeconds='1'"),
        ({}, ["--poll-seconds", "2"], {}, "--poll-seconds='2.0'"),
        ({}, [], {"SLURMPOD_EXPORTER_POLL_SECONDS": "often"}, "SLURMPOD_EXPORTER_POLL_SECONDS='often'"),
        ({}, [], {wk.ENV_EXPORTER_PORT: "70000"}, "SLURMPOD_EXPORTER_PORT='70000'"),
        ({}, ["--port", "0"], {}, "SLURMPOD_EXPORTER_PORT='0'"),
    ],
    ids=["metrics-off", "spec-poll-too-fast", "flag-poll-too-fast", "env-poll-not-a-number", "env-port-too-big",
         "port-zero"],
)
def test_bad_input_exits_2_without_asking_slurm(tmp_path: Path, spec: dict[str, object], argv: list[str],
                                                 extra: dict[str, str], named: str) -> None:
    calls, bin_dir = _stand_ins(tmp_path, None)
    proc = subprocess.run([str(SLURMPOD), "daemon", "exporter", *argv], env=_env(tmp_path, bin_dir, spec, **extra),
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("slurmpod: bad input: ") and named in proc.stderr, proc.stderr
    assert not calls.exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {s.name + json.dumps(s.labels, sort_keys=True) * bool(s.labels): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def _wait_for(port: int, name: str, seconds: float = 20.0) -> dict[str, float]:
    end = time.monotonic() + seconds
    while True:
        try:
            metrics = _get(port)
            if name in metrics:
                return metrics
        except OSError:
            pass
        if time.monotonic() > end:
            raise AssertionError(f"{name} not served on port {port} within {seconds} s")
        time.sleep(0.1)


def test_the_command_serves_slurm_and_slurmpod_series_and_stops_on_sigterm(tmp_path: Path) -> None:
    docs = slurmdocs.reports([node("w-0", ["IDLE"], features=("h100",), partitions=("main", "gpu")),
                              node("w-1", ["ALLOCATED"], alloc_cpus=32, features=("h100",))],
                             [slurmdocs.partition("main", nodes=2, cpus=64),
                              slurmdocs.partition("gpu", nodes=1, cpus=32)])
    calls, bin_dir = _stand_ins(tmp_path, docs, [slurmdocs.job(1, reason="Resources", nodes=3)])
    port = _free_port()
    env = _env(tmp_path, bin_dir, {**SPEC, "metrics": {"pollSeconds": 5}}, **{wk.ENV_EXPORTER_PORT: str(port)})
    proc = subprocess.Popen([str(SLURMPOD), "daemon", "exporter"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        metrics = _wait_for(port, "slurm_nodes")
        assert metrics["slurm_nodes"] == 2
        assert metrics['slurmpod_nodeset_demand_nodes{"nodeset": "gpu"}'] == 3
        assert metrics['slurmpod_nodeset_demand_nodes{"nodeset": "cpu"}'] == 3
        assert metrics["slurmpod_exporter_up"] == 1
        assert metrics["process_cpu_seconds_total"] >= 0  # the exporter's own cost, for who watches it
        before = calls.read_text().splitlines()
        assert sorted(before) == ["scontrol --future show nodes --json", "scontrol show partitions --json",
                                  "sdiag --json", " ".join(joblist.ARGV)]
        for _ in range(10):
            _get(port)
        assert calls.read_text().splitlines() == before  # scrapes run no Slurm command
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_serve_answers_from_the_last_poll(tmp_path: Path) -> None:
    fake = FakeSlurm()
    fake.reports = slurmdocs.reports([node("w-0", ["IDLE"])], [])
    poller = Poller(fake, daemon.settings(cluster_spec.parse(SPEC), None), clock=fake.clock)
    server = daemon.serve(poller, 0, addr="127.0.0.1")
    try:
        port = server.server_port
        assert _get(port)["slurmpod_exporter_up"] == 0
        poller.poll()
        calls = len(fake.calls)
        assert _get(port)["slurm_nodes"] == 1
        assert len(fake.calls) == calls
    finally:
        server.shutdown()


def test_importing_the_exporter_registers_nothing_in_the_default_registry() -> None:
    code = ("import prometheus_client as p; before = set(p.REGISTRY._names_to_collectors); "
            "import slurmpod.entrypoints.exporter.daemon, slurmpod.entrypoints.exporter.poll; "
            "assert set(p.REGISTRY._names_to_collectors) == before")
    proc = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
