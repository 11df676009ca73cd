"""Which Service ports the emulator publishes on the host's loopback, and on which host port.

In Kubernetes, kube-proxy makes every Service with a cluster IP reachable from each node, and a NodePort
Service on each node's port. The emulator's one node is this host: each Service with a selector and a
cluster IP (not headless) is published at 127.0.0.1:HOST_PORT, to the first pod its selector matches (one
Docker host, one endpoint). HOST_PORT is the port's nodePort where the manifest sets one, else a free port
chosen when the cluster comes up and kept for the cluster's lifetime (publish.py loads the rules).
Ref: https://kubernetes.io/docs/concepts/services-networking/service/#type-nodeport
Ref: https://kubernetes.io/docs/reference/networking/virtual-ips/
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace

from slurmpod import well_known as wk
from slurmpod.errors import BadInput, PermanentError
from slurmpod.problems import Problems
from slurmpod_host.cluster.manifests import Bundle, release_of
from slurmpod_host.cluster.plan import PodPlan

LOOPBACK = "127.0.0.1"
FREE_PORT_TRIES = 100


@dataclass(frozen=True, slots=True)
class Wanted:
    """A Service port to publish, before its host port is chosen."""

    service: str
    port_name: str
    pod: str
    pod_ip: str
    target_port: int
    node_port: int | None  # the manifest's nodePort: the host port it must get

    @property
    def key(self) -> str:
        return f"{self.service}/{self.port_name}"


@dataclass(frozen=True, slots=True)
class Published:
    """A Service port published at 127.0.0.1:host_port, forwarded to pod_ip:target_port."""

    service: str
    port_name: str
    pod: str
    pod_ip: str
    target_port: int
    host_port: int

    @property
    def key(self) -> str:
        return f"{self.service}/{self.port_name}"

    def describe(self) -> str:
        return f"service {self.key} published at {LOOPBACK}:{self.host_port} -> {self.pod}:{self.target_port}"


def _port_number(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535 else None


def wanted(bundle: Bundle, plans: Sequence[PodPlan], cluster: str) -> tuple[Wanted, ...]:
    """Pure: the Service ports of ``bundle`` to publish, each to the first of ``plans`` its selector matches.
    A Service whose selector matches no pod (a role turned off) publishes nothing. The release's instance
    label in a selector names ``cluster``, as podspec labels its pods."""
    problems = Problems()
    out: list[Wanted] = []
    for doc in bundle.of_kind("Service"):
        spec = doc.body.get("spec") or {}
        selector = dict(spec.get("selector") or {})
        if spec.get("clusterIP") == "None" or not selector:  # headless, or endpoints not from pods
            continue
        release = release_of(doc.body)
        if release is not None and selector.get(wk.LABEL_INSTANCE) == release:
            selector[wk.LABEL_INSTANCE] = cluster
        pod = next((p for p in plans if selector.items() <= dict(p.labels).items()), None)
        if pod is None:
            continue
        for i, port in enumerate(spec.get("ports") or ()):
            field = f"{doc.where}.spec.ports[{i}]"
            if port.get("protocol", "TCP") != "TCP":
                problems.add(f"{field}.protocol", port.get("protocol"), "the emulator publishes TCP ports only")
                continue
            target = _port_number(port.get("targetPort", port.get("port")))
            if target is None:
                problems.add(f"{field}.targetPort", port.get("targetPort"),
                             "the emulator publishes numeric target ports only (1-65535)")
                continue
            node_port = port.get("nodePort")
            if node_port is not None and _port_number(node_port) is None:
                problems.add(f"{field}.nodePort", node_port, "must be a port number, 1-65535")
                continue
            out.append(Wanted(doc.name, str(port.get("name") or port.get("port")), pod.name, pod.ip, target,
                              node_port))
    if problems:
        raise BadInput(dict.fromkeys(problems))
    return tuple(out)


def choose(wants: Sequence[Wanted], taken: Collection[int], free_port: Callable[[], int],
           listened: Callable[[int], bool]) -> tuple[Published, ...]:
    """Host ports for ``wants``: the nodePort, else the first ``free_port()`` that is neither ``taken`` (by
    another cluster's rules) nor given to another port here. A nodePort already taken, or one a process of
    the host ``listened`` on (the rule would hide it), is a BadInput naming the Service's port."""
    used = set(taken)
    out: list[Published] = []
    for w in wants:
        port = w.node_port
        field = f"Service/{w.service}.spec.ports[{w.port_name}].nodePort"
        if port is not None and port in used:
            raise BadInput.one(field, port, "already published on this host by another cluster or Service")
        if port is not None and listened(port):
            raise BadInput.one(field, port, f"a process of this host listens on {LOOPBACK}:{port}")
        for _ in range(FREE_PORT_TRIES):
            if port is not None and port not in used:
                break
            port = free_port()
        else:
            raise PermanentError(f"no free host port for Service/{w.service} port {w.port_name} "
                                 f"after {FREE_PORT_TRIES} tries")
        used.add(port)
        out.append(Published(w.service, w.port_name, w.pod, w.pod_ip, w.target_port, port))
    return tuple(out)


def repoint(published: Sequence[Published], pod: str, ip: str) -> tuple[Published, ...]:
    """Pure: ``published`` with ``pod``'s ports sent to ``ip``, the address its new container got (an
    endpoint follows its pod, as kube-proxy's rules follow the EndpointSlice)."""
    return tuple(replace(p, pod_ip=ip) if p.pod == pod else p for p in published)


def listened(port: int) -> bool:
    """Whether a process of this host listens on 127.0.0.1:``port`` (it cannot be bound)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed connection's TIME_WAIT is no listener
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return True
        return False


def free_loopback_port() -> int:
    """A port nothing listens on at 127.0.0.1 now: the kernel's pick for a socket bound to port 0."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])
