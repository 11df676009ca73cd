"""One emulated cluster for the whole session: `slurmpod cluster up --name sptest --workers 2`.

The flavor comes from SLURMPOD_TEST_FLAVOR (default 24.11); missing images are built first with
`slurmpod images build`. No Docker engine is a test FAILURE, never a skip. The cluster's host
files live in a session temp dir (SLURMPOD_STATE_DIR), and `cluster down` runs at the end.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clusterkit import NAME, UP_ARGS, UP_TIMEOUT_S, WORKERS, Session, all_idle, run_slurmpod
from policyvolume import PolicyVolume

from slurmpod_host.cluster import cli, demo
from slurmpod_host.cluster import well_known as host_wk

TEARDOWN_FILE = "test_cluster_teardown.py"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """test_cluster_teardown.py ends the session's cluster, so it runs after every other test."""
    items.sort(key=lambda item: item.path.name == TEARDOWN_FILE)  # stable: the rest keep their order


@pytest.fixture(scope="session")
def flavor() -> str:
    return os.environ.get("SLURMPOD_TEST_FLAVOR", "24.11")


@pytest.fixture(scope="session")
def session(docker_client: Any, flavor: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    demo.ensure_images(flavor, sys.stderr)
    state_root = tmp_path_factory.mktemp("cluster-state")
    env = {**os.environ, host_wk.ENV_STATE_DIR: str(state_root)}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(host_wk.ENV_STATE_DIR, str(state_root))  # for the in-process helpers (cli.attach)
        run_slurmpod(env, "cluster", "down", "--name", NAME, timeout=120)  # leftovers of an aborted run
        up = run_slurmpod(env, "cluster", "up", "--name", NAME, *UP_ARGS, "--workers", str(WORKERS), "--flavor", flavor,
                          "--timeout", str(UP_TIMEOUT_S), timeout=UP_TIMEOUT_S + 120)
        try:
            if up.returncode != 0:
                pytest.fail(f"cluster up failed (exit {up.returncode}):\n{up.stdout}\n{up.stderr}",
                            pytrace=False)
            cluster = cli.attach(docker_client, NAME)
            assert cluster is not None, up.stdout
            sys.stderr.write(up.stdout)
            yield Session(cluster, docker_client, flavor, env)
        finally:
            run_slurmpod(env, "cluster", "down", "--name", NAME, timeout=120)


@pytest.fixture(scope="session")
def state_dir(session: Session) -> Path:
    return Path(session.env[host_wk.ENV_STATE_DIR]) / NAME


@pytest.fixture
def policy(session: Session) -> Iterator[PolicyVolume]:
    """The controller's policy volume; whatever a test publishes, the shipped policy comes back after it."""
    volume = PolicyVolume(session)
    try:
        yield volume
    finally:
        volume.restore()


# squeue's default states are the live ones (PENDING, RUNNING, SUSPENDED, COMPLETING, CONFIGURING).
# Ref: https://slurm.schedmd.com/squeue.html#OPT_states
LEFTOVER_FORMAT = "%i|%T|%j|%u|%N|%r"


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After a module's last test and its fixtures' teardown: no job of its may live on in the shared
    cluster, where it would take a worker from the next module. Any found are cancelled, and the module
    that left them gets the error."""
    if nextitem is None or nextitem.path == item.path:
        return  # the last item's teardown has ended the session's cluster too
    s = getattr(item, "funcargs", {}).get("session")
    if not isinstance(s, Session) or item.path.name == TEARDOWN_FILE:
        return
    listed = s.root_in(s.cluster.controller, "squeue", "-h", "-o", LEFTOVER_FORMAT, timeout=30)
    assert listed.code == 0, f"squeue after {item.path.name}: {listed.stderr}"
    # COMPLETING: ended, slurmd still cleaning up (the epilog); the next module's first wait covers it.
    left = [line for line in listed.stdout.strip().splitlines() if line.split("|")[1] != "COMPLETING"]
    if left:
        ids = [line.split("|", 1)[0] for line in left]
        s.root_in(s.cluster.controller, "scancel", *ids, timeout=30)
        all_idle(s)
        raise AssertionError(f"{item.path.name} left jobs in the cluster (cancelled now):\n"
                             f"{LEFTOVER_FORMAT}\n" + "\n".join(left))
