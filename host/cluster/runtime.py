"""The Docker side of the emulator: network, volumes, containers as pods, exec, teardown.

Every object carries the label io.slurmpod.cluster=<cluster>, which is all `down` needs, so it
works after a pod was killed by hand or when some objects are already gone.
Ref: https://docker-py.readthedocs.io/en/stable/api.html (low-level API: create_container et al.)
"""

from __future__ import annotations

import ipaddress
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
from docker.types import IPAMConfig, IPAMPool
from docker.types import Mount as DockerMount

from slurmpod.errors import PermanentError, TransientError
from slurmpod_host.cluster import network, podspec
from slurmpod_host.cluster import well_known as host_wk
from slurmpod_host.cluster.plan import MountKind, PodPlan

log = logging.getLogger(__name__)

DockerError = docker.errors.DockerException  # what the SDK raises when the engine refuses a request

CLIENT_TIMEOUT_S = 900  # socket timeout; each exec is bounded inside the pod by `timeout`
EXEC_KILL_AFTER_S = 5  # timeout(1) -k: SIGKILL this long after SIGTERM
TIMEOUT_EXIT = 124  # timeout(1)'s exit status when the command timed out
# Docker restarts a crashing container with a growing delay (100 ms doubling), like CrashLoopBackOff.
# Ref: https://docs.docker.com/engine/containers/start-containers-automatically/
RESTART_POLICY = {"Name": "unless-stopped"}
CRASH_RESTARTS = 3  # a pod restarted this often during `up` is crash-looping
# Docker's embedded DNS on an internal network never answers a name it does not know, where cluster DNS
# (CoreDNS) answers NXDOMAIN at once; with glibc's default 5 s x 2 tries, slurmd's reverse lookup of
# 0.0.0.0 at every start stalled its registration 10 s. One 1 s try bounds that stall.
# Ref: https://man7.org/linux/man-pages/man5/resolv.conf.5.html (options timeout, attempts)
DNS_OPTIONS = ("timeout:1", "attempts:1")
NS = 1_000_000_000
# The labels a kubelet with dockershim sets, so `docker ps --filter label=io.kubernetes.pod.name=...` finds a pod.
# Ref: https://github.com/kubernetes/kubernetes/blob/release-1.23/pkg/kubelet/dockershim/labels.go
LABEL_POD_NAME = "io.kubernetes.pod.name"
LABEL_POD_NAMESPACE = "io.kubernetes.pod.namespace"
LABEL_POD_UID = "io.kubernetes.pod.uid"
LABEL_CONTAINER_NAME = "io.kubernetes.container.name"
# kubelet keeps the hook and grace period on the container, so a delete uses the pod's own spec.
# Ref: https://github.com/kubernetes/kubernetes/blob/master/pkg/kubelet/kuberuntime/labels.go
LABEL_PRE_STOP = "io.kubernetes.container.preStopHandler"  # JSON: {"exec": {"command": [...]}}
LABEL_GRACE = "io.kubernetes.pod.terminationGracePeriod"  # seconds


@dataclass(frozen=True, slots=True)
class ExecResult:
    code: int
    stdout: str
    stderr: str

    @property
    def timed_out(self) -> bool:
        return self.code in {124, 137}  # timeout(1): 124 after SIGTERM, 128+9 after -k


@dataclass(frozen=True, slots=True)
class PodStatus:
    name: str
    role: str
    state: str  # Docker's: created, running, restarting, exited, dead
    health: str  # healthy, unhealthy, starting, or "" without a readiness probe
    ip: str
    restarts: int
    exit_code: int
    started: str
    message: str  # the termination log
    probe: str  # output of the last readiness check

    @property
    def ready(self) -> bool:
        """Kubernetes' Ready condition: running and, with a readinessProbe, its last checks passed."""
        return self.state == "running" and self.health in {"", "healthy"}


@dataclass(frozen=True, slots=True)
class Objects:
    containers: tuple[Any, ...]
    networks: tuple[Any, ...]
    volumes: tuple[Any, ...]

    @property
    def empty(self) -> bool:
        return not (self.containers or self.networks or self.volumes)


def connect() -> Any:
    """A Docker client that answered a ping; PermanentError naming the cause otherwise."""
    try:
        client = docker.from_env(timeout=CLIENT_TIMEOUT_S)
        client.ping()
    except docker.errors.DockerException as exc:
        raise PermanentError(f"no Docker engine answers: {exc}") from None
    return client


def _label_filter(name: str) -> dict[str, str]:
    return {"label": f"{host_wk.DOCKER_LABEL_CLUSTER}={name}"}


def find(client: Any, name: str) -> Objects:
    flt = _label_filter(name)
    return Objects(
        containers=tuple(client.containers.list(all=True, filters=flt)),
        networks=tuple(client.networks.list(filters=flt)),
        volumes=tuple(client.volumes.list(filters=flt)),
    )


def taken_subnets(client: Any) -> list[ipaddress.IPv4Network]:
    """Subnets of every Docker network and every host route."""
    taken = network.host_routes()
    for net in client.api.networks():
        for cfg in (net.get("IPAM") or {}).get("Config") or []:
            subnet = cfg.get("Subnet", "")
            try:
                parsed = ipaddress.ip_network(subnet)
            except ValueError:
                continue
            if isinstance(parsed, ipaddress.IPv4Network):
                taken.append(parsed)
    return taken


def missing_images(client: Any, images: Sequence[str]) -> list[str]:
    missing = []
    for image in sorted(set(images)):
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound:
            missing.append(image)
    return missing


def ssh_host_key(client: Any, image: str) -> bytes:
    """A fresh ed25519 host key, made by ssh-keygen in a throw-away container of ``image`` (no network),
    as a user would make one for the login pods' Secret; the host needs no OpenSSH of its own."""
    script = "ssh-keygen -q -t ed25519 -N '' -C slurmpod-login -f /tmp/k >/dev/null && cat /tmp/k"
    try:
        out = client.containers.run(image, ["sh", "-c", script], entrypoint=[], remove=True,
                                    network_disabled=True, stdout=True, stderr=False)
    except docker.errors.DockerException as exc:
        raise PermanentError(f"cannot make an ssh host key with {image}: {exc}") from None
    key = bytes(out)
    if b"OPENSSH PRIVATE KEY" not in key:
        raise PermanentError(f"ssh-keygen in {image} printed no key")
    return key


def create_network(client: Any, params: podspec.ClusterParams) -> None:
    """A user-defined bridge, internal: pods reach each other and nothing beyond this host."""
    ipam = IPAMConfig(pool_configs=[IPAMPool(subnet=str(params.subnet), gateway=params.gateway)])
    client.networks.create(params.network, driver="bridge", internal=True, ipam=ipam,
                           labels={host_wk.DOCKER_LABEL_CLUSTER: params.name})


def create_volumes(client: Any, name: str, plans: Sequence[PodPlan]) -> None:
    for volume in dict.fromkeys(v for p in plans for v in p.volumes):
        client.volumes.create(name=volume, labels={host_wk.DOCKER_LABEL_CLUSTER: name})


def _mounts(plan: PodPlan, root: Path) -> list[Any]:
    mounts = []
    for m in plan.mounts:
        if m.kind is MountKind.BIND:
            mounts.append(DockerMount(m.target, str(root / m.source), type="bind", read_only=m.read_only))
        elif m.kind is MountKind.HOST:
            mounts.append(DockerMount(m.target, m.source, type="bind", read_only=m.read_only))
        elif m.kind is MountKind.VOLUME:
            # no_copy: a fresh PersistentVolume is empty; Docker would copy the image's files in.
            mounts.append(DockerMount(m.target, m.source, type="volume", read_only=m.read_only, no_copy=True))
        else:
            mounts.append(DockerMount(m.target, "", type="tmpfs", tmpfs_size=m.size))
    return mounts


def create_pod(client: Any, plan: PodPlan, params: podspec.ClusterParams, root: Path) -> str:
    """Create (not start) the container for ``plan``; returns its id."""
    api = client.api
    healthcheck = None
    if plan.readiness is not None:
        r = plan.readiness
        healthcheck = {"test": ["CMD", *r.command], "interval": r.period_s * NS, "timeout": r.timeout_s * NS,
                       "retries": r.failure_threshold, "start_period": r.initial_delay_s * NS}
    host_config = api.create_host_config(
        mounts=_mounts(plan, root),
        nano_cpus=plan.nano_cpus,
        mem_limit=plan.mem_limit,
        cpu_shares=plan.cpu_shares,
        cap_add=list(plan.cap_add) or None,
        cap_drop=list(plan.cap_drop) or None,
        security_opt=list(plan.security_opt) or None,
        init=False,  # supervisord is PID 1
        restart_policy=RESTART_POLICY,
        network_mode=params.network,
        dns_opt=list(DNS_OPTIONS),
    )
    endpoint = api.create_endpoint_config(ipv4_address=plan.ip, aliases=list(plan.aliases))
    labels = {host_wk.DOCKER_LABEL_CLUSTER: params.name, host_wk.DOCKER_LABEL_ROLE: plan.role,
              LABEL_POD_NAME: plan.name, LABEL_POD_NAMESPACE: plan.namespace, LABEL_POD_UID: plan.uid,
              LABEL_CONTAINER_NAME: plan.role, LABEL_GRACE: str(plan.stop_timeout_s)}
    if plan.pre_stop is not None:
        labels[LABEL_PRE_STOP] = json.dumps({"exec": {"command": list(plan.pre_stop)}})
    created = api.create_container(
        image=plan.image,
        name=plan.name,
        hostname=plan.name,
        entrypoint=list(plan.entrypoint) if plan.entrypoint is not None else None,
        command=list(plan.command) if plan.command is not None else None,
        environment=[f"{k}={v}" for k, v in plan.env],
        working_dir=plan.working_dir,
        labels=labels,
        healthcheck=healthcheck,
        stop_timeout=plan.stop_timeout_s,
        host_config=host_config,
        networking_config=api.create_networking_config({params.network: endpoint}),
    )
    return str(created["Id"])


def exec_in(client: Any, container: str, argv: Sequence[str], *, timeout_s: float, user: str | None = None,
            workdir: str | None = None, env: Mapping[str, str] | None = None) -> ExecResult:
    """Run ``argv`` in a pod, bounded by timeout(1) inside it (coreutils is in every image)."""
    api = client.api
    bounded = ["timeout", "-k", str(EXEC_KILL_AFTER_S), str(int(timeout_s)), *argv]
    ex = api.exec_create(container, bounded, user=user or "", workdir=workdir,
                         environment=dict(env) if env else None)
    out, err = api.exec_start(ex["Id"], demux=True)
    code = api.exec_inspect(ex["Id"]).get("ExitCode")
    return ExecResult(code if isinstance(code, int) else -1,
                      (out or b"").decode("utf-8", "replace"), (err or b"").decode("utf-8", "replace"))


def pod_status(container: Any, root: Path) -> PodStatus:
    attrs = container.attrs
    st = attrs.get("State") or {}
    nets = (attrs.get("NetworkSettings") or {}).get("Networks") or {}
    ips = [n.get("IPAddress") or (n.get("IPAMConfig") or {}).get("IPv4Address", "") for n in nets.values()]
    name = attrs.get("Name", "").lstrip("/")
    health = st.get("Health") or {}
    checks = health.get("Log") or []
    term = root / podspec.termination_log_path(name)
    try:
        message = term.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        message = ""
    return PodStatus(
        name=name,
        role=(attrs.get("Config") or {}).get("Labels", {}).get(host_wk.DOCKER_LABEL_ROLE, ""),
        state=str(st.get("Status", "unknown")),
        health=str(health.get("Status", "")),
        ip=next(iter(ips), ""),
        restarts=int(attrs.get("RestartCount", 0)),
        exit_code=int(st.get("ExitCode", 0)),
        started=str(st.get("StartedAt", "")),
        message=message,
        probe=str(checks[-1].get("Output", "")).strip() if checks else "",
    )


def statuses(client: Any, name: str, root: Path) -> list[PodStatus]:
    containers = client.containers.list(all=True, filters=_label_filter(name))
    return sorted((pod_status(c, root) for c in containers), key=lambda s: (host_wk.START_ORDER.index(s.role)
                  if s.role in host_wk.START_ORDER else 9, s.name))


def wait_healthy(client: Any, pod: str, timeout_s: float) -> None:
    """OrderedReady: wait for the pod's readiness (Docker health) before the next ordinal starts."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        health = (client.api.inspect_container(pod).get("State") or {}).get("Health") or {}
        if health.get("Status") == "healthy":
            return
        time.sleep(1)
    raise TransientError(f"pod {pod} not ready after {timeout_s:.0f}s (readinessProbe)")


def logs_tail(client: Any, pod: str, lines: int | str) -> str:
    """The last ``lines`` lines of the container's output; ``"all"`` for everything since it started."""
    try:
        raw = client.api.logs(pod, stdout=True, stderr=True, tail=lines)
    except docker.errors.APIError as exc:
        return f"(no logs: {exc})"
    return bytes(raw).decode("utf-8", "replace")


def remove_all(client: Any, name: str) -> list[str]:
    """Remove every container, network and volume labelled for cluster ``name``; what was removed."""
    removed: list[str] = []
    objs = find(client, name)
    for c in objs.containers:
        try:
            c.remove(force=True, v=True)
            removed.append(f"container {c.name}")
        except docker.errors.NotFound:
            pass
    for n in objs.networks:
        try:
            n.reload()
            for c in n.containers:  # anything else someone attached by hand
                n.disconnect(c, force=True)
            n.remove()
            removed.append(f"network {n.name}")
        except docker.errors.NotFound:
            pass
    for v in client.volumes.list(filters=_label_filter(name)):
        try:
            v.remove(force=True)
            removed.append(f"volume {v.name}")
        except docker.errors.NotFound:
            pass
    return removed
