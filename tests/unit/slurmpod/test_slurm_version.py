"""Which Slurm is installed: SLURMPOD_SLURM_VERSION, else dpkg's status file, else the 24.11 default."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmpod import slurm_version
from slurmpod.errors import BadInput
from slurmpod.slurm_version import SlurmVersion

DPKG_STATUS = """\
Package: munge
Status: install ok installed
Version: 0.5.16-1

Package: slurm-client
Status: install ok installed
Architecture: amd64
Version: 24.11.5-2
Description: SLURM client side commands

Package: slurmd
Status: install ok installed
Version: 24.11.5-2
"""


@pytest.mark.parametrize(
    ("text", "expected", "topology"),
    [
        ("24.11", SlurmVersion(24, 11), False),
        ("24.11.5", SlurmVersion(24, 11), False),
        ("25.05", SlurmVersion(25, 5), True),
        ("25.05.0-0rc1", SlurmVersion(25, 5), True),
        (" 26.05.5 ", SlurmVersion(26, 5), True),
        ("25.11", SlurmVersion(25, 11), True),
    ],
    ids=["24.11", "24.11-micro", "25.05", "25.05-rc", "26.05-padded", "25.11"],
)
def test_parse(text: str, expected: SlurmVersion, topology: bool) -> None:
    version = SlurmVersion.parse(text)
    assert version == expected
    assert version.node_topology is topology


@pytest.mark.parametrize("text", ["", "latest", "25", "v24.11", "24.x", "24_11"], ids=repr)
def test_parse_refuses(text: str) -> None:
    with pytest.raises(BadInput) as err:
        SlurmVersion.parse(text)
    assert err.value.problems[0].field == "SLURMPOD_SLURM_VERSION"
    assert err.value.problems[0].value == text


def test_from_dpkg_status() -> None:
    assert slurm_version.from_dpkg_status(DPKG_STATUS) == "24.11.5"
    assert slurm_version.from_dpkg_status("Package: slurmctld\nVersion: 1:26.05.5-1+b1\n") == "26.05.5"
    assert slurm_version.from_dpkg_status("Package: munge\nVersion: 0.5.16-1\n") is None


def test_detect_prefers_env(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text(DPKG_STATUS)
    assert slurm_version.detect({"SLURMPOD_SLURM_VERSION": "25.05"}, status) == SlurmVersion(25, 5)
    assert slurm_version.detect({}, status) == SlurmVersion(24, 11)
    assert slurm_version.detect({"SLURMPOD_SLURM_VERSION": ""}, status) == SlurmVersion(24, 11)


def test_detect_default_without_slurm(tmp_path: Path) -> None:
    assert slurm_version.detect({}, tmp_path / "absent") == SlurmVersion.parse(slurm_version.DEFAULT)
    status = tmp_path / "status"
    status.write_text("Package: bash\nVersion: 5.2.37-2\n")
    assert slurm_version.detect({}, status) == SlurmVersion(24, 11)


def test_detect_bad_env_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="SLURMPOD_SLURM_VERSION='trixie'"):
        slurm_version.detect({"SLURMPOD_SLURM_VERSION": "trixie"}, tmp_path / "absent")


def test_mpi_plugins_are_read_from_debians_plugin_dir(tmp_path: Path) -> None:
    plugins = tmp_path / "usr/lib/x86_64-linux-gnu/slurm-wlm"
    plugins.mkdir(parents=True)
    for name in ("mpi_pmix.so", "mpi_pmix_v5.so", "mpi_pmi2.so", "mpi_cray_shasta.so", "job_submit_lua.so"):
        (plugins / name).write_bytes(b"")
    assert slurm_version.mpi_plugins(tmp_path) == {"pmix", "pmix_v5", "pmi2", "cray_shasta"}
    assert slurm_version.mpi_plugins(tmp_path / "nowhere") == frozenset()


@pytest.mark.parametrize(("version", "delay"), [
    (SlurmVersion(24, 11), False), (SlurmVersion(25, 5), False),
    (SlurmVersion(25, 11), True), (SlurmVersion(26, 5), True),
], ids=["24.11", "25.05", "25.11", "26.05"])
def test_requeue_delay_from_25_11(version: SlurmVersion, delay: bool) -> None:
    # Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_requeue_delay (added with expedited requeue in 25.11)
    assert version.requeue_delay is delay
