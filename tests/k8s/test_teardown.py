"""After the suite nothing of the local Kubernetes is left: no process, container, network, mount,
iptables rule or state dir."""

from __future__ import annotations

from typing import Any

from conftest import run_slurmpod
from kubekit import Kube

from slurmpod_host.kube import leftovers
from slurmpod_host.kube.layout import Layout


def test_down_leaves_nothing_behind(kube: Kube, layout: Layout, docker_client: Any) -> None:
    done = run_slurmpod("k8s", "down", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    left = leftovers.find(layout, docker_client)
    assert left.empty, left
    assert not [c for c in docker_client.containers.list(all=True) if c.name.startswith("k8s_")]
