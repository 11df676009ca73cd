"""`slurmpod cluster down` removes everything, even after a pod was killed by hand.

Runs after every other cluster test (conftest.py orders it last): it ends the session's cluster.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from clusterkit import NAME, Session, wait_for

from slurmpod_host.cluster import runtime
from slurmpod_host.cluster import well_known as host_wk

pytestmark = [pytest.mark.docker, pytest.mark.cluster]


def test_down_after_docker_kill(session: Session, state_dir: Path) -> None:
    client = session.client
    victim = session.cluster.workers[-1]
    before = client.containers.get(victim).attrs["State"]
    assert before["Running"] and before["Pid"] > 0
    client.containers.get(victim).kill()

    def killed() -> dict[str, object] | None:
        # The kill took: the process is gone (Docker's restart policy may already run a new one).
        now = client.containers.get(victim).attrs["State"]
        return now if not now["Running"] or now["Pid"] != before["Pid"] else None

    wait_for(f"{victim} killed", killed, timeout=30)
    assert runtime.find(client, NAME).volumes  # the shared /home and the controller's state volume
    down = session.slurmpod("cluster", "down", "--name", NAME, timeout=180)
    assert down.returncode == 0, down.stderr
    assert f"removed container {victim}" in down.stdout
    assert runtime.find(client, NAME).empty
    flt = {"label": f"{host_wk.DOCKER_LABEL_CLUSTER}={NAME}"}
    assert client.containers.list(all=True, filters=flt) == []
    assert client.networks.list(filters=flt) == []
    assert client.volumes.list(filters=flt) == []
    assert not client.networks.list(names=[f"{NAME}-net"])
    assert not state_dir.exists()
    again = session.slurmpod("cluster", "down", "--name", NAME, timeout=60)
    assert again.returncode == 0
    assert "nothing to remove" in again.stdout
