"""Host files of an emulated cluster (slurmpod_host.cluster.state)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurmpod.errors import BadInput
from slurmpod_host.cluster import state
from slurmpod_host.cluster import well_known as host_wk
from slurmpod_host.cluster.plan import HostFile

SLURMPOD = Path(sys.executable).with_name("slurmpod")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({host_wk.ENV_STATE_DIR: "/s"}, Path("/s/c")),
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


BAD_NAMES = ["", ".", "..", "/", "a/b", "../x", "/etc", "Slurmpod", "-a", "a-", "a" * 64, "a b", "a\n", "a.b"]
BAD_IDS = ["empty", "dot", "dotdot", "slash", "nested", "parent", "absolute", "upper", "leading-dash",
           "trailing-dash", "too-long", "space", "newline", "dotted"]


@pytest.mark.parametrize("name", BAD_NAMES, ids=BAD_IDS)
def test_a_name_that_could_leave_the_state_root_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(BadInput) as exc:
        state.state_dir(name, {host_wk.ENV_STATE_DIR: str(tmp_path / "root")})
    (problem,) = exc.value.problems
    assert (problem.field, problem.value) == ("--name", name)


@pytest.mark.parametrize("name", ["slurmpod", "c", "my-cluster-2", "a" * 63], ids=["default", "one-char",
                                                                                     "dashes", "63-chars"])
def test_dns_label_names_stay_under_the_root(tmp_path: Path, name: str) -> None:
    root = tmp_path / "root"
    path = state.state_dir(name, {host_wk.ENV_STATE_DIR: str(root)})
    assert path.parent == root and path.name == name


@pytest.mark.parametrize("command", ["down", "status"])
@pytest.mark.parametrize("name", ["..", "", "/", "../root"], ids=["dotdot", "empty", "slash", "parent"])
def test_cluster_command_refuses_the_name_before_docker(tmp_path: Path, command: str, name: str) -> None:
    root = tmp_path / "states" / "clusters"
    root.mkdir(parents=True)
    (tmp_path / "states" / "precious").write_text("keep\n")
    (root / "other").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURMPOD_")}
    # Any Docker call would fail with exit 1 against this socket; exit 2 proves none was made.
    env.update({host_wk.ENV_STATE_DIR: str(root), "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"})
    proc = subprocess.run([str(SLURMPOD), "cluster", command, "--name", name], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"slurmpod: bad input: --name={name!r}"), proc.stderr
    assert "Traceback" not in proc.stderr
    assert (tmp_path / "states" / "precious").read_text() == "keep\n" and (root / "other").is_dir()
