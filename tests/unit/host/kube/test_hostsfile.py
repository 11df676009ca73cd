"""The DNS records the dnsmasq feed writes (slurmpod_host.kube.hostsfile)."""

from __future__ import annotations

from slurmpod_host.kube import hostsfile

SERVICES = [
    {"metadata": {"namespace": "default", "name": "kubernetes"}, "spec": {"clusterIP": "10.96.0.1"}},
    {"metadata": {"namespace": "ns", "name": "slurm"}, "spec": {"clusterIP": "None"}},
    {"metadata": {"namespace": "ns", "name": "empty"}, "spec": {"clusterIP": "None"}},
]
ENDPOINTS = [
    {"metadata": {"namespace": "ns", "name": "slurm"},
     "subsets": [{"addresses": [{"ip": "10.244.0.2", "hostname": "w-0"}, {"ip": "10.244.0.3"}]}]},
    {"metadata": {"namespace": "ns", "name": "empty"}},
]


def test_cluster_ip_and_headless_records() -> None:
    assert hostsfile.records(SERVICES, ENDPOINTS, "cluster.local") == [
        ("10.244.0.2", "slurm.ns.svc.cluster.local"),
        ("10.244.0.2", "w-0.slurm.ns.svc.cluster.local"),
        ("10.244.0.3", "slurm.ns.svc.cluster.local"),
        ("10.96.0.1", "kubernetes.default.svc.cluster.local"),
    ]


def test_render_is_one_line_per_record() -> None:
    assert hostsfile.render([("10.0.0.1", "a.b")]) == "10.0.0.1 a.b\n"
    assert hostsfile.render([]) == ""
