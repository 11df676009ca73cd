"""Build orchestration helpers that need no Docker: plan, settings, repo, revision, rootfs commands."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import paths
import pytest

from slurmpod.errors import BadInput
from slurmpod_host.images import build, flavors, progress, rootfs
from slurmpod_host.images.engine import ImageInfo

REPO = paths.REPO


@pytest.mark.parametrize(
    ("requested", "base_exists", "planned"),
    [
        (None, True, ("base", "controller", "worker", "login", "accounting", "restapi")),
        (["worker"], True, ("worker",)),
        (["worker"], False, ("base", "worker")),
        (["login", "base", "controller"], True, ("base", "controller", "login")),
        (["base"], False, ("base",)),
    ],
)
def test_plan_images(requested: list[str] | None, base_exists: bool, planned: tuple[str, ...]) -> None:
    assert build.plan_images(requested, base_exists) == planned


def test_plan_rejects_unknown_roles() -> None:
    with pytest.raises(BadInput, match="role='gpu'"):
        build.plan_images(["gpu"], True)


def test_settings_from_cli_args(tmp_path: Path) -> None:
    args = argparse.Namespace(flavor="26.05", role=["worker"], base_image=None, mirror="http://m.example/debian/",
                              log_file=None, values_file=str(tmp_path / "v.yaml"))
    settings, requested = build.settings_from_args(args, repo=REPO)
    assert settings.flavor.suite == "forky"
    assert settings.log_file == REPO / "build" / "images-26.05.log"
    assert settings.mirror == "http://m.example/debian"
    assert settings.values_file == tmp_path / "v.yaml"
    assert settings.base_from() == "slurmpod/base:26.05"
    assert requested == ["worker"]


def test_find_repo_and_revision(tmp_path: Path) -> None:
    assert build.find_repo() == REPO
    assert build.find_repo([REPO / "images" / "dockerfiles"]) == REPO
    assert build.git_revision(tmp_path) == "unknown"
    assert build.project_source(REPO).startswith("https://")


def test_summary_and_list_tables() -> None:
    step = progress.StepRecord(1, "RUN x", True, 0.1)
    built = build.Built("worker", "slurmpod/worker", ("24.11", "24.11-0.1.0"), "sha256:" + "a" * 64,
                        221_000_000, 13.8, "24.11.5", (step,), False)
    text = build.summary([built], 40.0)
    assert "slurmpod/worker" in text and "221" in text and "1/1" in text and text.endswith("total 40.0 s")
    info = ImageInfo("sha256:" + "b" * 64, ("slurmpod/worker:24.11",), 5_000_000, "", "2026-11-30T00:00:00Z",
                     {"io.slurmpod.slurm-version": "24.11.5"})
    other = ImageInfo("sha256:" + "c" * 64, ("debian:trixie",), 1, "", "", {})
    ours = build.slurmpod_images([other, info])
    assert ours == [info]
    assert "24.11.5" in build.list_table(ours)


SID = "/usr/share/debootstrap/scripts/sid"


@pytest.mark.parametrize(
    ("flavor", "tail"), [("24.11", ["http://m/debian"]), ("26.05", ["http://m/debian", SID])]
)
def test_debootstrap_command(flavor: str, tail: list[str]) -> None:
    f = flavors.get(flavor)
    cmd = rootfs.debootstrap_command(f, Path("/tmp/r"), "http://m/debian")
    assert cmd == ["debootstrap", "--variant=minbase", f.suite, "/tmp/r", *tail]


def test_mounts_under_finds_leftover_mounts_deepest_first(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    info = (f"22 1 0:21 / /proc rw - proc proc rw\n"
            f"90 22 0:21 / {root}/root/proc rw - proc proc rw\n"
            f"91 22 0:22 / {root}/root/dev/pts rw - devpts devpts rw\n"
            f"92 22 0:23 / {root}-other/x rw - tmpfs t rw\n"
            f"93 22 0:24 / {root}/with\\040space rw - tmpfs t rw\n")
    expected = [root / "root/dev/pts", root / "root/proc", root / "with space"]
    assert rootfs.mounts_under(tmp_path, info) == expected


def test_tidy_removes_host_identity_and_apt_lists(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/hostname").write_text("buildhost\n")
    (tmp_path / "etc/resolv.conf").write_text("nameserver 10.0.0.1\n")
    lists = tmp_path / "var/lib/apt/lists"
    lists.mkdir(parents=True)
    (lists / "deb.debian.org_debian_dists_trixie_InRelease").write_text("x")
    rootfs.tidy(tmp_path)
    assert (tmp_path / "etc/hostname").read_text() == "localhost\n"
    assert not (tmp_path / "etc/resolv.conf").exists()
    assert list(lists.iterdir()) == []


def test_step_printer_goes_to_the_log_file_too() -> None:
    out, log = io.StringIO(), io.StringIO()
    printer = progress.StepPrinter("base 24.11", out, log)
    printer.say("hello")
    assert out.getvalue() == log.getvalue() == "[base 24.11] hello\n"
