"""Host files of an emulated cluster (slurmpod_host.cluster.state)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slurmpod import well_known as wk
from slurmpod_host.cluster import state
from slurmpod_host.cluster.plan import HostFile


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({wk.ENV_STATE_DIR: "/s"}, Path("/s/c")),
        ({"XDG_STATE_HOME": "/x"}, Path("/x/slurmpod/clusters/c")),
        ({}, Path.home() / ".local/state/slurmpod/clusters/c"),
    ],
    ids=["override", "xdg", "default"],
)
def test_state_dir(env: dict[str, str], expected: Path) -> None:
    assert state.state_dir("c", env) == expected


def test_write_modes_links_and_remove(tmp_path: Path) -> None:
    root = tmp_path / "c"
    old = os.umask(0o077)
    try:
        state.write(root, [
            HostFile("v", directory=True, mode=0o755),
            HostFile("v/..s", directory=True, mode=0o755),
            HostFile("v/..s/key", content=b"k", mode=0o400),
            HostFile("v/..data", symlink_to="..s"),
            HostFile("v/key", symlink_to="..data/key"),
            HostFile("t/log", mode=0o666),
        ])
    finally:
        os.umask(old)
    assert (root / "v/key").read_bytes() == b"k"
    assert (root / "v/..s/key").stat().st_mode & 0o777 == 0o400
    assert (root / "t/log").stat().st_mode & 0o777 == 0o666
    assert os.readlink(root / "v/key") == "..data/key"
    assert root.stat().st_mode & 0o777 == 0o700
    assert state.remove(root)
    assert not root.exists()
    assert not state.remove(root)
