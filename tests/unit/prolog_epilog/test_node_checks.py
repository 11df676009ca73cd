"""Node checks (munge, disk, memory, mounts): pure judgements, and munge through a recording runner."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from slurmpod import well_known as wk
from slurmpod.commands import Result
from slurmpod.prolog_epilog.check import CheckEnv, GpuSource
from slurmpod.prolog_epilog.checks.node import disk, memory, mounts, munge
from slurmpod.prolog_epilog.config import Config
from slurmpod.prolog_epilog.job import JobInfo
from slurmpod.prolog_epilog.result import Context, Status
from slurmpod.prolog_epilog.state import StateDir


class Recorder:
    """A Runner that answers from a table and records what was run."""

    def __init__(self, answers: dict[str, tuple[int, str, str]]) -> None:
        self.answers = answers
        self.argv: list[list[str]] = []

    def __call__(self, argv: Sequence[str], timeout: float) -> Result:
        assert timeout > 0
        self.argv.append(list(argv))
        code, out, err = self.answers[argv[0]]
        return Result(tuple(argv), code, out, err)


def _env(tmp_path: Path, run: Recorder, auth: str = "munge", **over: object) -> CheckEnv:
    def no_nvml() -> object:
        raise AssertionError("node checks never touch NVML")

    return CheckEnv(Context.PERIODIC, Config(**over), JobInfo(), StateDir(tmp_path),  # type: ignore[arg-type]
                    GpuSource(no_nvml, 1.0, 1.0), run, auth=auth)  # type: ignore[arg-type]


@pytest.mark.parametrize(("answers", "status", "reason"), [
    ({wk.MUNGE_BIN: (0, "", ""), wk.UNMUNGE_BIN: (0, "STATUS: Success (0)\n", "")}, Status.OK, ""),
    ({wk.MUNGE_BIN: (1, "", "munge: Error: Failed to access socket"), wk.UNMUNGE_BIN: (0, "", "")},
     Status.FAIL, "munge failed"),
    ({wk.MUNGE_BIN: (0, "", ""), wk.UNMUNGE_BIN: (15, "", "unmunge: Error: Invalid credential")},
     Status.FAIL, "unmunge failed"),
], ids=["round-trip", "munged-down", "wrong-key"])
def test_munge_round_trip(tmp_path: Path, answers: dict[str, tuple[int, str, str]], status: Status,
                          reason: str) -> None:
    run = Recorder(answers)
    result = munge.run(_env(tmp_path, run))
    assert result.status is status
    assert reason in result.reason
    assert run.argv[0][:2] == [wk.MUNGE_BIN, "-n"]  # an absolute path: hooks run without PATH


def test_munge_skipped_when_auth_is_slurm(tmp_path: Path) -> None:
    run = Recorder({})
    assert munge.run(_env(tmp_path, run, auth="slurm")).status is Status.SKIPPED
    assert run.argv == []


@pytest.mark.parametrize(("readings", "status", "text"), [
    ([("/", 50.0, 1.0), ("/scratch", 200.0, 10.0)], Status.OK, ""),
    ([("/", 0.5, 1.0), ("/scratch", 200.0, 10.0)], Status.FAIL, "/ has 0.5 GiB free, needs 1"),
    ([("/", 50.0, 1.0), ("/scratch", None, 10.0)], Status.FAIL, "missing: /scratch"),
], ids=["enough", "root-full", "scratch-missing"])
def test_disk(readings: list[tuple[str, float | None, float]], status: Status, text: str) -> None:
    result = disk.judge(readings)
    assert result.status is status
    assert text in result.reason


@pytest.mark.parametrize(("available", "real", "status"), [
    (95_000, 100_000, Status.OK), (50_000, 100_000, Status.FAIL), (50_000, 0, Status.SKIPPED),
    (None, 100_000, Status.FAIL),
], ids=["enough", "short", "realmemory-unknown", "unreadable"])
def test_memory(available: int | None, real: int, status: Status) -> None:
    assert memory.judge(available, real, 0.9).status is status


def test_meminfo_parse() -> None:
    assert memory.parse_meminfo("MemTotal: 2048000 kB\nMemAvailable:    1048576 kB\n") == 1024


def test_mounts_names_the_missing_one() -> None:
    mounted = mounts.mount_points("overlay / overlay rw 0 0\nnfs:/home /home nfs4 rw 0 0\n"
                                  "x /data\\040set ext4 rw 0 0\n")
    assert mounts.judge(["/home", "/data set"], mounted).status is Status.OK
    result = mounts.judge(["/home", "/datasets"], mounted)
    assert (result.status, result.reason) == (Status.FAIL, "not mounted: /datasets")


def test_hook_settings_come_from_the_config_file(tmp_path: Path) -> None:
    from slurmpod.prolog_epilog import config, registry

    cfg = config.parse({"auth": "munge", "real_memory_mib": 1000, "expected_gpus": 8}, registry.names())
    assert (cfg.auth, cfg.real_memory_mib, cfg.expected_gpus) == ("munge", 1000, 8)
