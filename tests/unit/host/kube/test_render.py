"""Every template of the local Kubernetes fills from what lifecycle.py gives it, and parses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from slurmpod_host.kube import components, render
from slurmpod_host.kube.layout import Layout, Net

VALUES = {"api_url": "https://10.244.0.1:6443", "ca_file": "/s/pki/ca.crt", "user": "u", "token": "t",
          "node_ip": "10.244.0.1", "dns_ip": "10.244.0.1", "cluster_domain": "cluster.local",
          "resolv_conf": "/s/resolv.conf", "sync_frequency": "10s", "kubeconfig": "/s/k", "pod_cidr": "10.244.0.0/24",
          "node_name": "n", "bridge": "spk8s0", "gateway": "10.244.0.1", "service_cidr": "10.96.0.0/24",
          "ipam_dir": "/s/ipam", "hosts_dir": "/s/dns", "pid_file": "/s/run/dnsmasq.pid"}


@pytest.mark.parametrize("template", ["kubeconfig.yaml", "kubelet.yaml", "kube-proxy.yaml"])
def test_yaml_templates_fill_and_parse(template: str) -> None:
    assert isinstance(yaml.safe_load(render.text(template, VALUES)), dict)


def test_cni_config_routes_only_the_service_range() -> None:
    conf = json.loads(render.text("cni.conflist", VALUES))
    ipam = conf["plugins"][0]["ipam"]
    assert ipam["routes"] == [{"dst": "10.96.0.0/24"}] and conf["plugins"][0]["ipMasq"] is False


def test_dnsmasq_asks_no_other_server() -> None:
    lines = render.text("dnsmasq.conf", VALUES).splitlines()
    assert "no-resolv" in lines and not [line for line in lines if line.startswith("server=")]


def test_addresses() -> None:
    net = Net()
    assert (net.gateway, net.api_service_ip, net.api_url) == ("10.244.0.1", "10.96.0.1", "https://10.244.0.1:6443")


def test_daemons_in_start_order() -> None:
    layout = Layout(Path("/c"), Path("/s"))
    assert [d.name for d in components.all_daemons(layout)] == list(components.ORDER)
    api = components.apiserver(layout).argv
    assert "--authorization-mode=Node,RBAC" in api and "--insecure-port=0" in api
