"""Secret keys: validated before anything is written (mode, size, type), installed 0400 atomically."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import podkit
import pytest

from slurmpod.entrypoints import secrets
from slurmpod.errors import BadInput


@pytest.mark.parametrize("mode", [0o400, 0o600, 0o700], ids=oct)
def test_accepts_private_modes(tmp_path: Path, mode: int) -> None:
    key = podkit.write_key(tmp_path / "munge.key", mode=mode)
    read = secrets.read_key(key, "munge key secret")
    assert read.data == key.read_bytes()
    assert read.source == str(key)


@pytest.mark.parametrize("mode", [0o440, 0o640, 0o644, 0o604, 0o620, 0o402, 0o401, 0o410, 0o444, 0o666], ids=oct)
def test_refuses_open_modes(tmp_path: Path, mode: int) -> None:
    key = podkit.write_key(tmp_path / "munge.key", mode=mode)
    with pytest.raises(BadInput) as err:
        secrets.read_key(key, "munge key secret")
    (problem,) = err.value.problems
    assert (problem.field, problem.value) == ("munge key secret mode", f"{mode:04o}")


@pytest.mark.parametrize(
    ("size", "reason"),
    [(0, "key is empty"), (1, "1 bytes"), (31, "31 bytes, at least 32"), (secrets.MAX_KEY_BYTES + 1, "more than")],
    ids=["empty", "one-byte", "31-bytes", "too-big"],
)
def test_refuses_bad_sizes(tmp_path: Path, size: int, reason: str) -> None:
    key = podkit.write_key(tmp_path / "munge.key", size=size)
    with pytest.raises(BadInput, match=reason):
        secrets.read_key(key, "munge key secret")


def test_minimum_size_accepted(tmp_path: Path) -> None:
    key = podkit.write_key(tmp_path / "munge.key", size=secrets.MIN_KEY_BYTES)
    assert len(secrets.read_key(key, "k").data) == secrets.MIN_KEY_BYTES


def test_follows_kubelet_symlinks(tmp_path: Path) -> None:
    """Secret volumes are symlinks into a ..data directory; the target's mode is what counts."""
    real = podkit.write_key(tmp_path / "..2024_01_01" / "munge.key")
    (tmp_path / "..data").symlink_to(real.parent.name)
    (tmp_path / "munge.key").symlink_to("..data/munge.key")
    assert secrets.read_key(tmp_path / "munge.key", "k").data == real.read_bytes()


def test_refuses_directory_and_missing(tmp_path: Path) -> None:
    (tmp_path / "dir.key").mkdir()
    with pytest.raises(BadInput, match="not a regular file"):
        secrets.read_key(tmp_path / "dir.key", "k")
    with pytest.raises(BadInput, match="missing"):
        secrets.read_key(tmp_path / "absent.key", "k")


def test_install_writes_0400_atomically(tmp_path: Path) -> None:
    key = secrets.read_key(podkit.write_key(tmp_path / "src.key"), "k")
    dest = tmp_path / "etc/munge/munge.key"
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"old key")
    secrets.install(key, dest, os.getuid(), os.getgid())
    assert dest.read_bytes() == key.data
    st = dest.stat()
    assert stat.S_IMODE(st.st_mode) == 0o400
    assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())
    assert sorted(p.name for p in dest.parent.iterdir()) == ["munge.key"]  # no temp file left behind
