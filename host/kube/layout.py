"""Where the local Kubernetes keeps its binaries, state and addresses: one frozen value, passed down.

The binaries are cached per machine outside the clone (a second CI run on the machine reuses them); the
state of a running cluster lives in one directory that ``down`` removes whole.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

VERSION = "v1.20.2"
DEFAULT_CACHE = Path("/var/cache/slurmpod/kubernetes-1.20.2")
DEFAULT_STATE = Path("/var/lib/slurmpod-k8s")
ENV_CACHE = "SLURMPOD_K8S_CACHE"
ENV_STATE = "SLURMPOD_K8S_STATE_DIR"
NODE_NAME = "slurmpod-k8s"
PAUSE_IMAGE = "slurmpod/k8s-pause:1.20.2"
CLUSTER_DOMAIN = "cluster.local"
# Labels dockershim puts on every container it makes; only a kubelet's containers carry them.
# Ref: https://github.com/kubernetes/kubernetes/blob/v1.20.2/pkg/kubelet/dockershim/naming.go
DOCKERSHIM_TYPE_LABEL = "io.kubernetes.docker.type"
DOCKERSHIM_NAME_PREFIX = "k8s_"


@dataclass(frozen=True, slots=True)
class Net:
    """Addresses: etcd and the components' health ports on loopback, the rest on one bridge of our own.

    The API server and the kubelet listen on the bridge's gateway address because pods must reach them
    (the ``kubernetes`` Service's endpoint); nothing listens on the machine's other interfaces."""

    bridge: str = "spk8s0"
    pod_cidr: str = "10.244.0.0/24"
    service_cidr: str = "10.96.0.0/24"
    etcd_client_port: int = 23790
    etcd_peer_port: int = 23800
    api_port: int = 6443

    @property
    def gateway(self) -> str:
        """The bridge's own address: API server, kubelet and DNS for pods."""
        return str(next(ipaddress.ip_network(self.pod_cidr).hosts()))

    @property
    def api_service_ip(self) -> str:
        """The ``kubernetes`` Service's ClusterIP: the first address of the service range.
        Ref: https://kubernetes.io/docs/concepts/services-networking/cluster-ip-allocation/"""
        return str(next(ipaddress.ip_network(self.service_cidr).hosts()))

    @property
    def api_url(self) -> str:
        return f"https://{self.gateway}:{self.api_port}"


@dataclass(frozen=True, slots=True)
class Layout:
    cache: Path
    state: Path
    net: Net = Net()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Layout:
        env = os.environ if environ is None else environ
        return cls(Path(env.get(ENV_CACHE, str(DEFAULT_CACHE))), Path(env.get(ENV_STATE, str(DEFAULT_STATE))))

    def bin(self, name: str) -> Path:
        return self.cache / "bin" / name

    @property
    def kubectl(self) -> Path:
        """The kubectl built from the same tree: kubectl supports one minor version of skew only.
        Ref: https://kubernetes.io/releases/version-skew-policy/#kubectl"""
        return self.bin("kubectl")

    @property
    def pki(self) -> Path:
        return self.state / "pki"

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (group system:masters) for users and tests."""
        return self.state / "admin.kubeconfig"

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    @property
    def run(self) -> Path:
        return self.state / "run"

    @property
    def kubelet_root(self) -> Path:
        return self.state / "kubelet"

    @property
    def hosts_dir(self) -> Path:
        """dnsmasq's --hostsdir: the feed writes the Services' and pods' names here."""
        return self.state / "dns"

    @property
    def volumes(self) -> Path:
        """hostPath directories behind the PersistentVolumes made for the chart's claims."""
        return self.state / "volumes"
