"""The policy bench's pure parts: sdiag parsing, the slurm.conf switch, the submit loops, the figures."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from slurmpod.slurm_plugins.stats import PluginStats
from slurmpod_host.bench import policy
from slurmpod_host.bench.report import Report

SDIAG = """\
Remote Procedure Call statistics by message type
\tREQUEST_PARTITION_INFO                  ( 2009) count:12     ave_time:85     total_time:1020
\tREQUEST_SUBMIT_BATCH_JOB                ( 4003) count:1000   ave_time:3456   total_time:3456000
\tREQUEST_JOB_INFO_SINGLE                 ( 2021) count:3      ave_time:120    total_time:360
"""


@pytest.mark.parametrize(("text", "expected"), [(SDIAG, (1000, 3456)), ("no rpcs yet\n", (0, 0))],
                         ids=["counted", "absent"])
def test_parse_sdiag_submit(text: str, expected: tuple[int, int]) -> None:
    assert policy.parse_sdiag_submit(text) == expected


CONF = "ClusterName=c\n# Ref: x\nJobSubmitPlugins=slurmpod\nPartitionName=main Nodes=workers State=UP\n"


@pytest.mark.parametrize("start", [CONF, CONF.replace("JobSubmitPlugins=slurmpod\n", "")],
                         ids=["with-line", "without-line"])
@pytest.mark.parametrize("setup", policy.SETUPS)
def test_conf_edit_switches_the_plugin_and_adds_the_bench_lines_once(tmp_path: Path, start: str,
                                                                     setup: str) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text(start)
    script = policy.conf_edit(setup).replace(policy.SLURM_CONF, str(conf))
    for _ in range(2):  # every trial runs it again
        subprocess.run(["bash", "-c", script], check=True, timeout=10)
    lines = conf.read_text().splitlines()
    active = [x for x in lines if x.startswith("JobSubmitPlugins=")]
    assert active == ([] if setup == "none" else [f"JobSubmitPlugins={setup}"])
    for extra in policy.BENCH_LINES:
        assert lines.count(extra) == 1
    assert "PartitionName=main Nodes=workers State=UP" in lines


def test_submit_loops_submit_every_job_held(tmp_path: Path) -> None:
    fake = tmp_path / "sbatch"
    fake.write_text(f"#!/bin/sh\necho \"$*\" >> {tmp_path}/calls\n")
    fake.chmod(0o755)
    out = subprocess.run(["bash", "-c", policy.submit_loops(4, 40)], capture_output=True, text=True, check=True,
                         timeout=30, env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    calls = (tmp_path / "calls").read_text().splitlines()
    assert len(calls) == 40 and all(c.startswith("-H ") for c in calls)
    assert "FAIL" not in out.stdout and out.stdout.startswith("TIMES ")


def _trial(setup: str, ave: float, p50: int = 0) -> policy.Trial:
    plugin = PluginStats(1001, 1001, 0, 60.0, p50, p50 * 3, 500.0) if setup == "slurmpod" else None
    return policy.Trial(setup, 1000, ave, 250.0, plugin)


@pytest.mark.parametrize(("slurmpod_us", "p50", "ok"), [(3300.0, 60, [True, True, True]),
                                                        (4000.0, 150, [False, False, False])],
                         ids=["within-floors", "over-floors"])
def test_figures_use_medians_and_the_issues_floors(slurmpod_us: float, p50: int, ok: list[bool]) -> None:
    done = [t for _ in range(5) for t in (_trial("none", 3200.0), _trial("lua", 3500.0),
                                          _trial("slurmpod", slurmpod_us, p50))]
    report = Report()
    policy.add_figures(report, done, 5)
    judged = [f.ok for f in report.figures if f.ok is not None]
    assert judged == ok
    assert report.figures[0].value == slurmpod_us and report.figures[0].baseline == 3200.0


def test_each_set_up_takes_each_place_in_turn() -> None:
    rounds = [policy.rotated(policy.SETUPS, i) for i in range(len(policy.SETUPS))]
    assert rounds[0] == policy.SETUPS
    for place in range(len(policy.SETUPS)):
        assert sorted(r[place] for r in rounds) == sorted(policy.SETUPS)
