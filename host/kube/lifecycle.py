"""``up``, ``down`` and ``status`` of the local cluster. Each step prints what it does and its time.

up: build (cached), PKI, tokens and kubeconfigs, the bridge, config files from ./templates, the pause
image, then every daemon in components.ORDER, each waited for before the next that needs it; done when
the node is Ready and untainted and the ``default`` ServiceAccount exists. down: every daemon stopped by
its pid, the kubelet's containers removed, kube-proxy's rules cleaned, mounts and the bridge removed, the
state dir deleted; then it checks that nothing is left (leftovers.py) and fails naming what is.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TextIO, TypeVar

from slurmpod.errors import PermanentError, SlurmpodError, TransientError
from slurmpod_host.cluster import well_known as host_wk
from slurmpod_host.kube import api, build, components, identities, iptables, leftovers, procs, render
from slurmpod_host.kube.layout import CLUSTER_DOMAIN, NODE_NAME, Layout

T = TypeVar("T")
SYNC_FREQUENCY_S = 10  # the kubelet's syncFrequency (templates/kubelet.yaml), also its ConfigMap delay
POLL_S = 0.5
# Bounds for each wait at start, measured here: etcd < 2 s, API server < 15 s, node Ready < 30 s.
ETCD_TIMEOUT_S = 30.0
API_TIMEOUT_S = 90.0
NODE_TIMEOUT_S = 120.0
CMD_TIMEOUT_S = 60
LOG_DIRS = (Path("/var/log/pods"), Path("/var/log/containers"))  # the kubelet's, not configurable in 1.20
# kube-proxy's iptables mode sets this to 1 (NodePorts on localhost); down puts back what up found.
# Ref: https://github.com/kubernetes/kubernetes/blob/v1.20.2/pkg/proxy/iptables/proxier.go (sysctlRouteLocalnet)
ROUTE_LOCALNET = Path("/proc/sys/net/ipv4/conf/all/route_localnet")
SAVED_SYSCTL = "route_localnet.before"


@dataclass(frozen=True, slots=True)
class Up:
    seconds: float
    kubeconfig: Path
    kubectl: Path


@contextmanager
def step(out: TextIO, what: str) -> Iterator[None]:
    print(f"k8s: {what}", file=out, flush=True)
    started = time.monotonic()
    yield
    print(f"k8s:   done in {time.monotonic() - started:.1f}s", file=out, flush=True)


def wait_for(what: str, check: Callable[[], T | None], timeout_s: float, layout: Layout | None = None,
             log: str | None = None) -> T:
    deadline = time.monotonic() + timeout_s
    last_error = ""
    while time.monotonic() < deadline:
        try:
            value = check()
        except (TransientError, OSError, ValueError, KeyError) as exc:
            value, last_error = None, str(exc)
        if value is not None:
            return value
        time.sleep(POLL_S)
    tail = ""
    if layout is not None and log is not None:
        path = layout.logs / f"{log}.log"
        tail = "\n".join(path.read_text(errors="replace").splitlines()[-25:]) if path.exists() else ""
    raise PermanentError(f"{what}: not after {timeout_s:.0f}s ({last_error})\n{tail}")


def _sh(argv: list[str], timeout: float = CMD_TIMEOUT_S, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and result.returncode != 0:
        raise PermanentError(f"{' '.join(argv)}: exit {result.returncode}: {result.stderr.strip()}")
    return result


def _check_subnet_free(layout: Layout) -> None:
    ours = ipaddress.ip_network(layout.net.pod_cidr)
    routes = json.loads(_sh(["ip", "-j", "route"]).stdout or "[]")
    for route in routes:
        dst = route.get("dst", "")
        if dst in ("default", "") or route.get("dev") == layout.net.bridge:
            continue
        net = ipaddress.ip_network(dst if "/" in dst else f"{dst}/32", strict=False)
        if net.version == 4 and net.overlaps(ours):
            raise PermanentError(f"pod network {ours} overlaps route {dst} on {route.get('dev')}")


def _bridge(layout: Layout) -> None:
    n = layout.net
    if not Path(f"/sys/class/net/{n.bridge}").exists():
        _sh(["ip", "link", "add", n.bridge, "type", "bridge"])
    prefix = ipaddress.ip_network(n.pod_cidr).prefixlen
    _sh(["ip", "addr", "replace", f"{n.gateway}/{prefix}", "dev", n.bridge])
    _sh(["ip", "link", "set", n.bridge, "up"])
    iptables.allow_bridge(n.bridge)


def _configs(layout: Layout) -> None:
    n, st = layout.net, layout.state
    render.write(st / "resolv.conf", "resolv.conf", {}, 0o644)
    render.write(st / "kubelet.yaml", "kubelet.yaml", {
        "node_ip": n.gateway, "ca_file": str(layout.pki / "ca.crt"), "dns_ip": n.gateway,
        "cluster_domain": CLUSTER_DOMAIN, "resolv_conf": str(st / "resolv.conf"),
        "sync_frequency": f"{SYNC_FREQUENCY_S}s"})
    render.write(st / "kube-proxy.yaml", "kube-proxy.yaml", {
        "kubeconfig": str(st / "kube-proxy.kubeconfig"), "pod_cidr": n.pod_cidr, "node_name": NODE_NAME})
    render.write(st / "cni" / "10-slurmpod.conflist", "cni.conflist", {
        "bridge": n.bridge, "pod_cidr": n.pod_cidr, "gateway": n.gateway, "service_cidr": n.service_cidr,
        "ipam_dir": str(st / "cni-ipam")},
        0o644)
    layout.hosts_dir.mkdir(parents=True, exist_ok=True)
    (layout.hosts_dir / "cluster").touch()
    render.write(st / "dnsmasq.conf", "dnsmasq.conf", {
        "dns_ip": n.gateway, "hosts_dir": str(layout.hosts_dir), "cluster_domain": CLUSTER_DOMAIN,
        "pid_file": str(layout.run / "dnsmasq.own.pid")}, 0o644)


def _pki(layout: Layout) -> None:
    script = resources.files("slurmpod_host.kube").joinpath("make-pki.sh")
    with resources.as_file(script) as path:
        _sh(["bash", str(path), str(layout.pki), layout.net.gateway, layout.net.api_service_ip, CLUSTER_DOMAIN])


def _http_ok(url: str) -> bool | None:
    try:
        with urllib.request.urlopen(url, timeout=3) as r:  # noqa: S310 - loopback health endpoints
            return True if r.status == 200 else None
    except OSError:
        return None


def _node_ready(layout: Layout) -> bool | None:
    done = api.kubectl(layout, "get", "node", NODE_NAME, "-o", "json", timeout=20, check=False)
    if done.returncode != 0:
        return None  # not registered yet
    node = json.loads(done.stdout)
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions", []))
    tainted = any(t["key"].startswith("node.kubernetes.io/") for t in node["spec"].get("taints") or [])
    return True if ready and not tainted else None


def running(layout: Layout) -> dict[str, int | None]:
    return {d: procs.running(layout.run, d) for d in components.ORDER}


def emulated_pods(client: Any) -> list[str]:
    """Containers of `slurmpod cluster` (the emulator) on this engine."""
    return sorted(c.name for c in client.containers.list(filters={"label": host_wk.DOCKER_LABEL_CLUSTER}))


def up(layout: Layout, client: Any, out: TextIO = sys.stdout) -> Up:
    started = time.monotonic()
    now = running(layout)
    if all(now.values()):
        print(f"k8s: already running (KUBECONFIG={layout.kubeconfig})", file=out)
        return Up(0.0, layout.kubeconfig, layout.kubectl)
    # The emulator's pods carry io.kubernetes.* labels too; a kubelet and the emulator never share an engine.
    emulated = emulated_pods(client)
    if emulated:
        raise PermanentError(f"an emulated cluster runs on this Docker engine ({', '.join(emulated[:4])}): "
                             "`slurmpod cluster down --name NAME` first")
    if any(now.values()) or not leftovers.find(layout, client).empty:
        with step(out, "leftovers of an earlier cluster: down first"):
            down(layout, client, out)
    with step(out, f"control-plane binaries in {layout.cache / 'bin'}"):
        build.ensure(layout, out)
    with step(out, "certificates, tokens, kubeconfigs, bridge, config files, pause image"):
        _check_subnet_free(layout)
        for d in (layout.state, layout.run, layout.logs):
            d.mkdir(parents=True, exist_ok=True)
        if ROUTE_LOCALNET.exists():
            (layout.state / SAVED_SYSCTL).write_text(ROUTE_LOCALNET.read_text(encoding="utf-8"), encoding="utf-8")
        (layout.state / "made-log-dirs").write_text(
            "\n".join(str(p) for p in LOG_DIRS if not p.exists()), encoding="utf-8")
        _pki(layout)
        identities.write_all(layout)
        _bridge(layout)
        _configs(layout)
        build.import_pause(layout, client)
    daemons = {d.name: d for d in components.all_daemons(layout)}
    admin = api.Client.from_kubeconfig(layout.kubeconfig)
    with step(out, "etcd"):
        procs.start(daemons["etcd"], layout.run, layout.logs)
        wait_for("etcd healthy", lambda: _http_ok(f"http://127.0.0.1:{layout.net.etcd_client_port}/health"),
                 ETCD_TIMEOUT_S, layout, "etcd")
    with step(out, "kube-apiserver"):
        procs.start(daemons["kube-apiserver"], layout.run, layout.logs)
        wait_for("kube-apiserver ready", lambda: admin.get_text("/readyz") == "ok" or None,
                 API_TIMEOUT_S, layout, "kube-apiserver")
    with step(out, "dnsmasq and its feed, controller-manager, scheduler, kubelet, kube-proxy; node Ready"):
        for name in components.ORDER[2:]:
            procs.start(daemons[name], layout.run, layout.logs)
        wait_for("node Ready and untainted", lambda: _node_ready(layout), NODE_TIMEOUT_S, layout, "kubelet")
        wait_for("kube-proxy healthy", lambda: _http_ok("http://127.0.0.1:10256/healthz"), API_TIMEOUT_S,
                 layout, "kube-proxy")
        wait_for("ServiceAccount default/default",
                 lambda: admin.get("/api/v1/namespaces/default/serviceaccounts/default"),
                 API_TIMEOUT_S, layout, "kube-controller-manager")
        dead = [n for n, pid in running(layout).items() if pid is None]
        if dead:
            raise PermanentError(f"exited at start: {', '.join(dead)} (logs in {layout.logs})")
    seconds = time.monotonic() - started
    print(f"k8s: up in {seconds:.1f}s: export KUBECONFIG={layout.kubeconfig}; kubectl is {layout.kubectl}",
          file=out, flush=True)
    return Up(seconds, layout.kubeconfig, layout.kubectl)


def _unmount_all(layout: Layout) -> None:
    for point in sorted(leftovers.mounts(layout), key=len, reverse=True):
        _sh(["umount", "-l", point], check=False)


def down(layout: Layout, client: Any, out: TextIO = sys.stdout) -> leftovers.Leftovers:
    with step(out, "stop the daemons"):
        killed = procs.stop(layout.run, list(reversed(components.ORDER))) if layout.run.exists() else []
        for pid, cmd in leftovers.processes(layout):  # started by an earlier up whose pid files are gone
            print(f"k8s:   stray process {pid}: {cmd[:120]}", file=out)
            procs.kill_pid(pid)
        if killed:
            print(f"k8s:   killed after the grace period: {', '.join(killed)}", file=out)
    with step(out, "remove the kubelet's containers"):
        for name in leftovers.containers(client):
            try:
                client.containers.get(name).remove(force=True, v=True)
            except Exception as exc:
                print(f"k8s:   {name}: {exc}", file=out)
    with step(out, "kube-proxy --cleanup, mounts, bridge, state dir"):
        if layout.bin("kube-proxy").exists():
            _sh([str(layout.bin("kube-proxy")), "--cleanup"], check=False)
        iptables.remove_kube_chains()
        _unmount_all(layout)
        if Path(f"/sys/class/net/{layout.net.bridge}").exists():
            _sh(["ip", "link", "del", layout.net.bridge], check=False)
        saved = layout.state / SAVED_SYSCTL
        if saved.exists() and ROUTE_LOCALNET.exists():
            ROUTE_LOCALNET.write_text(saved.read_text(encoding="utf-8"), encoding="utf-8")
        made = layout.state / "made-log-dirs"
        for line in (made.read_text(encoding="utf-8").splitlines() if made.exists() else []):
            if line in {str(p) for p in LOG_DIRS}:
                shutil.rmtree(line, ignore_errors=True)
        if not leftovers.mounts(layout):
            shutil.rmtree(layout.state, ignore_errors=True)
    left = leftovers.find(layout, client)
    if not left.empty:
        raise PermanentError(f"left behind after down: {left}")
    print("k8s: down; nothing left behind", file=out, flush=True)
    return left


# The daemons a test may stop and start again on a running cluster: the API server (an API that does not
# answer) and the kubelet (a node that goes NotReady while its pods keep running under Docker).
RESTARTABLE = ("kube-apiserver", "kubelet")


def stop_one(layout: Layout, name: str) -> None:
    """Stop one daemon of a running cluster; its pods (containers) are left as they are."""
    if name not in RESTARTABLE:
        raise PermanentError(f"{name}: only {', '.join(RESTARTABLE)} may be stopped on a running cluster")
    procs.stop(layout.run, [name])


def start_one(layout: Layout, name: str) -> float:
    """Start one stopped daemon again with its configuration from `up`; seconds until it answers."""
    if name not in RESTARTABLE:
        raise PermanentError(f"{name}: only {', '.join(RESTARTABLE)} may be started again")
    started = time.monotonic()
    daemons = {d.name: d for d in components.all_daemons(layout)}
    if procs.running(layout.run, name) is None:
        procs.start(daemons[name], layout.run, layout.logs)
    if name == "kube-apiserver":
        admin = api.Client.from_kubeconfig(layout.kubeconfig)
        wait_for("kube-apiserver ready", lambda: admin.get_text("/readyz") == "ok" or None, API_TIMEOUT_S,
                 layout, "kube-apiserver")
    else:
        wait_for("kubelet healthy", lambda: _http_ok("http://127.0.0.1:10248/healthz"), NODE_TIMEOUT_S,
                 layout, "kubelet")
    return time.monotonic() - started


def status(layout: Layout, out: TextIO = sys.stdout) -> bool:
    now = running(layout)
    for name, pid in now.items():
        print(f"{name:24} {'running, pid ' + str(pid) if pid else 'not running'}", file=out)
    if not now["kube-apiserver"]:
        return False
    try:
        print(api.kubectl(layout, "get", "nodes,pods", "-A", "-o", "wide", timeout=20).stdout, file=out)
    except SlurmpodError as exc:
        print(f"kubectl: {exc}", file=out)
        return False
    return all(now.values())
