"""The Service ports the emulator publishes on the host's loopback, and the nat rules that do it."""

from __future__ import annotations

import copy
import ipaddress
import socket
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import pytest

from slurmpod.errors import BadInput
from slurmpod_host.cluster import auth as cluster_auth
from slurmpod_host.cluster import manifests, podspec, publish, services
from slurmpod_host.cluster.manifests import Bundle, Document
from slurmpod_host.cluster.services import Published, Wanted

HOST_KEY = b"-----BEGIN OPENSSH PRIVATE KEY-----\n" + b"k" * 64 + b"\n-----END OPENSSH PRIVATE KEY-----\n"
PARAMS = podspec.ClusterParams(name="demo", subnet=ipaddress.IPv4Network("10.213.9.0/24"),
                               cluster_uid=uuid.UUID(int=7), created=datetime(2025, 1, 2, tzinfo=UTC),
                               node_cpu=Fraction(2), node_memory=Fraction(24 * 2**30), workers=2)


def _bundle(directory: str | None = None) -> Bundle:
    where = manifests.default_dir() if directory is None else manifests.default_dir() / directory
    return cluster_auth.configure(manifests.load(where), "munge", ssh_host_key=HOST_KEY)


def _wanted(bundle: Bundle) -> tuple[Wanted, ...]:
    return services.wanted(bundle, podspec.plan_cluster(bundle, PARAMS, lambda n: b"x" * n), PARAMS.name)


def test_the_login_service_is_published_to_the_first_login_pod_and_headless_ones_never() -> None:
    plans = {p.name: p for p in podspec.plan_cluster(_bundle(), PARAMS, lambda n: b"x" * n)}
    wanted = {w.key: w for w in _wanted(_bundle())}
    assert set(wanted) == {"login/ssh", "metrics/metrics"}
    login, metrics = wanted["login/ssh"], wanted["metrics/metrics"]
    assert (login.service, login.port_name, login.pod, login.target_port, login.node_port) == \
        ("login", "ssh", "demo-login-0", 22, None)
    assert login.pod_ip == plans["demo-login-0"].ip
    # slurmpod's exporter, behind its own Service, on the controller pod
    assert (metrics.pod, metrics.target_port, metrics.pod_ip) == ("demo-controller-0", 9401,
                                                                   plans["demo-controller-0"].ip)


def test_with_rest_on_its_service_is_published_too() -> None:
    keys = {w.key for w in _wanted(_bundle("accounting"))}
    assert keys == {"login/ssh", "metrics/metrics", "restapi/slurmrestd"}


def _edited(edit: Any) -> Bundle:
    bundle = _bundle()
    docs = []
    for d in bundle.documents:
        if d.kind == "Service" and d.name == "login":
            body = copy.deepcopy(dict(d.body))
            edit(body["spec"]["ports"][0])
            docs.append(Document(d.source, body))
        else:
            docs.append(d)
    return Bundle(bundle.namespace, tuple(docs))


@pytest.mark.parametrize(("edit", "field"), [
    (lambda p: p.update(targetPort="ssh"), "targetPort"),
    (lambda p: p.update(protocol="UDP"), "protocol"),
    (lambda p: p.update(nodePort="30022\n-A OUTPUT -j ACCEPT"), "nodePort"),
    (lambda p: p.update(nodePort=70000), "nodePort"),
])
def test_a_port_the_emulator_cannot_publish_is_bad_input_naming_the_field(edit: Any, field: str) -> None:
    with pytest.raises(BadInput) as err:
        _wanted(_edited(edit))
    assert f"Service/login.spec.ports[0].{field}" in str(err.value)


def test_a_node_port_is_the_host_port() -> None:
    (login,) = [w for w in _wanted(_edited(lambda p: p.update(nodePort=30022))) if w.service == "login"]
    (chosen,) = services.choose([login], set(), lambda: pytest.fail("no free port needed"), lambda port: False)
    assert chosen.host_port == 30022


def test_a_node_port_taken_or_listened_on_is_refused_naming_it() -> None:
    (login,) = [w for w in _wanted(_edited(lambda p: p.update(nodePort=30022))) if w.service == "login"]
    with pytest.raises(BadInput, match=r"nodePort.*30022.*another cluster"):
        services.choose([login], {30022}, lambda: 40000, lambda port: False)
    with pytest.raises(BadInput, match=r"nodePort.*30022.*listens"):
        services.choose([login], set(), lambda: 40000, lambda port: port == 30022)


def test_free_ports_skip_those_other_clusters_publish_and_each_other() -> None:
    wants = [Wanted("a", "ssh", "p", "10.0.0.2", 22, None), Wanted("b", "rest", "q", "10.0.0.3", 6820, None)]
    offered: Iterator[int] = iter([40001, 40001, 40002, 40003])
    chosen = services.choose(wants, {40001}, lambda: next(offered), lambda port: False)
    assert [c.host_port for c in chosen] == [40002, 40003]


def test_a_free_loopback_port_is_not_listened_on_and_a_listened_one_is_seen() -> None:
    port = services.free_loopback_port()
    assert not services.listened(port)
    with socket.socket() as s:
        s.bind((services.LOOPBACK, 0))
        s.listen()
        assert services.listened(s.getsockname()[1])


def test_the_rules_dnat_the_loopback_port_and_snat_to_the_gateway() -> None:
    p = Published("slurmpod-login", "ssh", "demo-login-0", "10.213.9.9", 22, 40022)
    rules = publish.render("demo", "10.213.9.1", [p])
    dnat = publish.chain("demo")
    assert len(dnat) <= 28  # iptables' limit on a chain name
    assert rules.restore.splitlines() == [
        "*nat", f":{dnat} - [0:0]", f":{dnat}-S - [0:0]",
        f"-A {dnat} -d 127.0.0.1/32 -p tcp -m tcp --dport 40022 -j DNAT --to-destination 10.213.9.9:22",
        f"-A {dnat}-S -s 127.0.0.1/32 -d 10.213.9.9/32 -p tcp -m tcp --dport 22 -j SNAT --to-source 10.213.9.1",
        "COMMIT"]
    assert rules.jumps == (("OUTPUT", dnat), ("POSTROUTING", f"{dnat}-S"))
    assert publish.chain("other") != dnat


def test_the_host_ports_taken_are_read_from_every_cluster_s_dnat_chain() -> None:
    listing = "\n".join([
        "-P OUTPUT ACCEPT",
        "-N SLURMPOD-SVC-aaaaaaaa", "-N SLURMPOD-SVC-aaaaaaaa-S",
        "-A OUTPUT -j SLURMPOD-SVC-aaaaaaaa",
        "-A SLURMPOD-SVC-aaaaaaaa -d 127.0.0.1/32 -p tcp -m tcp --dport 40022 -j DNAT --to-destination 10.0.0.2:22",
        "-A SLURMPOD-SVC-aaaaaaaa-S -s 127.0.0.1/32 -d 10.0.0.2/32 -p tcp -m tcp --dport 22 "
        "-j SNAT --to-source 10.0.0.1",
        "-A SLURMPOD-SVC-bbbbbbbb -d 127.0.0.1/32 -p tcp -m tcp --dport 41000 -j DNAT --to-destination 10.0.1.2:6820",
        "-A DOCKER -p tcp -m tcp --dport 5000 -j DNAT --to-destination 172.17.0.2:5000",
    ])
    assert publish.taken_ports(listing) == {40022, 41000}


def test_a_published_port_follows_its_pod_to_a_new_address() -> None:
    login = Published("login", "ssh", "demo-login-0", "10.213.9.9", 22, 40022)
    rest = Published("restapi", "slurmrestd", "demo-restapi-0", "10.213.9.10", 6820, 40023)
    moved = services.repoint([login, rest], "demo-login-0", "10.213.9.20")
    assert moved == (Published("login", "ssh", "demo-login-0", "10.213.9.20", 22, 40022), rest)
    assert services.repoint(moved, "demo-worker-0", "10.213.9.30") == moved
