"""`slurmpod cluster down` removes everything, even after a pod was killed by hand.

Runs after every other cluster test (conftest.py orders it last): it ends the session's cluster.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from clusterkit import NAME, Session

from slurmpod import well_known as wk
from slurmpod_host.cluster import runtime

pytestmark = [pytest.mark.docker, pytest.mark.cluster]


def test_down_after_docker_kill(session: Session, state_dir: Path) -> None:
    client = session.client
    victim = session.cluster.workers[-1]
    client.containers.get(victim).kill()
    assert client.containers.get(victim).status in {"exited", "restarting", "running"}
    assert runtime.find(client, NAME).volumes  # the shared /home and the controller's state volume
    down = session.slurmpod("cluster", "down", "--name", NAME, timeout=180)
    assert down.returncode == 0, down.stderr
    assert f"removed container {victim}" in down.stdout
    assert runtime.find(client, NAME).empty
    flt = {"label": f"{wk.DOCKER_LABEL_CLUSTER}={NAME}"}
    assert client.containers.list(all=True, filters=flt) == []
    assert client.networks.list(filters=flt) == []
    assert client.volumes.list(filters=flt) == []
    assert not client.networks.list(names=[f"{NAME}-net"])
    assert not state_dir.exists()
    again = session.slurmpod("cluster", "down", "--name", NAME, timeout=60)
    assert again.returncode == 0
    assert "nothing to remove" in again.stdout
