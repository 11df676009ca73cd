"""Subnet choice for the cluster network (slurmpod_host.cluster.network)."""

from __future__ import annotations

import ipaddress

import pytest

from slurmpod_host.cluster import network


def test_choose_subnet_is_stable_and_in_pool() -> None:
    a = network.choose_subnet("slurmpod", [])
    assert a == network.choose_subnet("slurmpod", [])
    assert a.subnet_of(network.POOL)
    assert a.prefixlen == network.PREFIX


def test_choose_subnet_skips_taken() -> None:
    first = network.choose_subnet("x", [])
    second = network.choose_subnet("x", [first])
    assert second != first
    assert not second.overlaps(first)


def test_choose_subnet_skips_a_host_route_covering_the_pool() -> None:
    with pytest.raises(RuntimeError):
        network.choose_subnet("x", [ipaddress.IPv4Network("10.0.0.0/8")])


def test_parse_proc_route() -> None:
    text = (
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "eth0\t00000000\t0100A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"  # default route: left out
        "eth0\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"  # 192.168.0.0/24
        "docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"  # 172.17.0.0/16
    )
    assert network.parse_proc_route(text) == [
        ipaddress.IPv4Network("192.168.0.0/24"),
        ipaddress.IPv4Network("172.17.0.0/16"),
    ]
