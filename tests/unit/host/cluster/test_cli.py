"""`slurmpod cluster up` over what an earlier cluster of the same name left behind."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

import pytest

from slurmpod.errors import PermanentError
from slurmpod_host.cluster import cli, netenforce


@pytest.fixture(autouse=True)
def no_iptables(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """netenforce.remove stands in for iptables: unit tests never run it on the host."""
    calls: list[str] = []

    def remove(name: str) -> list[str]:
        calls.append(name)
        return []

    monkeypatch.setattr(netenforce, "remove", remove)
    return calls


@dataclass
class _Obj:
    name: str
    removed: list[str]
    containers: list[Any] = field(default_factory=list)

    def remove(self, **_: Any) -> None:
        self.removed.append(self.name)

    def reload(self) -> None:
        pass


class _Listing:
    def __init__(self, items: list[_Obj]) -> None:
        self.items = items

    def list(self, **_: Any) -> list[_Obj]:
        return list(self.items)


class _Client:
    """The three listings runtime.find and runtime.remove_all use."""

    def __init__(self, containers: int, networks: int, volumes: int) -> None:
        self.removed: list[str] = []
        self.containers = _Listing([_Obj(f"demo-worker-{i}", self.removed) for i in range(containers)])
        self.networks = _Listing([_Obj(f"demo-net-{i}", self.removed) for i in range(networks)])
        self.volumes = _Listing([_Obj(f"demo-home-{i}", self.removed) for i in range(volumes)])


def test_nothing_left_is_nothing_to_do() -> None:
    client, out = _Client(0, 0, 0), io.StringIO()
    cli.replace_stale(client, "demo", out)
    assert (client.removed, out.getvalue()) == ([], "")


def test_state_without_pods_is_replaced_and_said_so(no_iptables: list[str]) -> None:
    client, out = _Client(0, 1, 2), io.StringIO()
    cli.replace_stale(client, "demo", out)
    assert no_iptables == ["demo"]  # a stale cluster's NetworkPolicy rules go with its network
    assert client.removed == ["demo-net-0", "demo-home-0", "demo-home-1"]
    assert out.getvalue().splitlines() == [
        "cluster 'demo' has no pods left: replacing its stale network and volumes",
        "removed network demo-net-0", "removed volume demo-home-0", "removed volume demo-home-1"]


def test_a_cluster_with_pods_is_refused() -> None:
    client = _Client(2, 1, 1)
    with pytest.raises(PermanentError, match=r"already exists \(2 pods\)"):
        cli.replace_stale(client, "demo", io.StringIO())
    assert client.removed == []
