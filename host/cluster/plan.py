"""What the emulator will ask Docker for, one PodPlan per pod: pure data, built by podspec.py."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class MountKind(enum.Enum):
    BIND = "bind"  # a host path under the cluster state dir
    VOLUME = "volume"  # a Docker named volume (a PersistentVolumeClaim)
    TMPFS = "tmpfs"  # emptyDir with medium: Memory
    HOST = "host"  # a hostPath volume: an absolute path on this Docker host (volumes.HOST_PATHS only)


@dataclass(frozen=True, slots=True)
class Mount:
    kind: MountKind
    source: str  # BIND: path relative to the state dir; VOLUME: Docker volume name; TMPFS: ""; HOST: absolute
    target: str
    read_only: bool
    size: int | None = None  # TMPFS: the tmpfs size in bytes; None: the kernel's default (half the host's memory)


@dataclass(frozen=True, slots=True)
class HostFile:
    """A file (or symlink) the emulator writes under the state dir before the pod starts."""

    path: str  # relative to the cluster state dir
    content: bytes = b""
    mode: int = 0o644
    symlink_to: str | None = None  # when set, a relative symlink instead of a file
    directory: bool = False  # when set, an empty directory with ``mode``


@dataclass(frozen=True, slots=True)
class Probe:
    """An exec probe; Docker runs readiness as the container's health check."""

    command: tuple[str, ...]
    initial_delay_s: int = 0
    period_s: int = 10
    timeout_s: int = 1
    failure_threshold: int = 3


@dataclass(frozen=True, slots=True)
class PodPlan:
    """One pod as Docker will run it."""

    name: str  # pod name = container name = hostname = Slurm node name
    statefulset: str  # with the cluster prefix
    ordinal: int
    role: str  # label slurmpod.io/role
    namespace: str
    uid: str
    ip: str
    image: str
    aliases: tuple[str, ...]  # extra DNS names: <pod>.<service>[.<namespace>.svc.cluster.local]
    labels: tuple[tuple[str, str], ...]  # sorted
    annotations: tuple[tuple[str, str], ...]  # sorted
    env: tuple[tuple[str, str], ...]  # in manifest order
    entrypoint: tuple[str, ...] | None  # container `command` (None: the image's)
    command: tuple[str, ...] | None  # container `args` (None: the image's)
    working_dir: str | None
    mounts: tuple[Mount, ...]
    files: tuple[HostFile, ...]
    volumes: tuple[str, ...]  # Docker named volumes to create before start
    nano_cpus: int | None
    mem_limit: int | None  # bytes
    cpu_shares: int
    cap_add: tuple[str, ...]
    cap_drop: tuple[str, ...]
    # Docker --security-opt: seccomp (pod securityContext.seccompProfile), no-new-privileges
    # (allowPrivilegeEscalation: false).
    security_opt: tuple[str, ...]
    readiness: Probe | None
    pre_stop: tuple[str, ...] | None
    stop_timeout_s: int  # terminationGracePeriodSeconds
    termination_log: str  # terminationMessagePath inside the container
    wait_ready: bool  # podManagementPolicy OrderedReady: the next pod starts once this one is ready

    def env_map(self) -> dict[str, str]:
        return dict(self.env)

    def label(self, key: str) -> str | None:
        return dict(self.labels).get(key)
