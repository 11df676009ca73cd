"""PodInfo: what Kubernetes tells a pod about itself, read once at start and validated.

Sources: downward-API environment (fieldRef, resourceFieldRef) and the downwardAPI volume files
`labels` and `annotations`. Slinky's slurm-operator env (POD_CPUS, POD_MEMORY, SLINKY_TOPOLOGY) is
accepted too. Every problem found is reported at once, each naming its field and value.
Ref: https://kubernetes.io/docs/concepts/workloads/pods/downward-api/
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from slurmpod import confvalues, kubelet_format
from slurmpod import well_known as wk
from slurmpod.errors import BadInput
from slurmpod.problems import Problems

# Slurm keeps CPUs per node in a uint16; more than that is not a real limit.
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_CPUs
MAX_CPU_MILLIS = 65_535_000
# 1 PiB in MiB: beyond any node; resourceFieldRef reports node allocatable when no limit is set.
MAX_MEMORY_MIB = 1 << 30
# terminationGracePeriodSeconds beyond a day is a typo, not a plan.
MAX_GRACE_SECONDS = 86_400
DEFAULT_GRACE_SECONDS = 30  # Kubernetes' default terminationGracePeriodSeconds


@dataclass(frozen=True, slots=True)
class PodInfo:
    """The pod as Kubernetes describes it. Limits are None where the pod has none."""

    name: str
    namespace: str
    uid: str
    node_name: str
    pod_ip: str
    host_ip: str
    cluster_name: str
    controller: str
    cpu_limit_millis: int | None
    memory_limit_mib: int | None
    grace_seconds: int
    topology: str
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    annotations: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class PodSelf:
    """What a command run inside a started pod (a probe, preStop, a supervisord program) needs of it."""

    name: str  # "" when POD_NAME is not set
    namespace: str
    role: str
    run_dir: Path  # where pod start wrote supervisord.conf (SLURMPOD_RUN_DIR)


def identity(env: Mapping[str, str]) -> PodSelf:
    """The pod's name, namespace and role, read leniently: a probe must answer even on odd input.

    The role is the `slurmpod.io/role` label (downward API), else SLURMPOD_POD_ROLE, else worker."""
    labels = Path(env.get(wk.ENV_PODINFO_DIR, wk.PODINFO_DIR)) / wk.PODINFO_LABELS
    try:
        role = kubelet_format.parse(labels.read_text(encoding="utf-8"), str(labels)).get(wk.LABEL_ROLE)
    except (OSError, UnicodeDecodeError, BadInput):
        role = None
    return PodSelf(env.get(wk.ENV_POD_NAME, ""), env.get(wk.ENV_POD_NAMESPACE) or "default",
                   role or env.get(wk.ENV_POD_ROLE, "worker"), Path(env.get(wk.ENV_RUN_DIR, wk.RUN_DIR)))


def labels(env: Mapping[str, str]) -> dict[str, str]:
    """The pod's labels (downward API), read leniently: none when the file is missing or unreadable."""
    path = Path(env.get(wk.ENV_PODINFO_DIR, wk.PODINFO_DIR)) / wk.PODINFO_LABELS
    try:
        return dict(kubelet_format.parse(path.read_text(encoding="utf-8"), str(path)))
    except (OSError, UnicodeDecodeError, BadInput):
        return {}


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines (``render --env-file``): blank lines and # comments ignored."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput.one("--env-file", str(path), f"cannot read: {exc.strerror}") from None
    env: dict[str, str] = {}
    p = Problems()
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            p.add(f"{path}:{lineno}", line, "expected KEY=VALUE")
            continue
        env[key.strip()] = value
    p.raise_if_any()
    return env


def _read_map(directory: Path, name: str, p: Problems) -> Mapping[str, str]:
    path = directory / name
    if not path.exists():
        return MappingProxyType({})
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        p.add(str(path), "", f"cannot read: {exc}")
        return MappingProxyType({})
    return MappingProxyType(p.field(str(path), text, _kubelet_map) or {})


def _kubelet_map(field: str, text: str) -> dict[str, str]:
    return kubelet_format.parse(text, field)


def _int_env(env: Mapping[str, str], key: str, low: int, high: int, p: Problems) -> int | None:
    raw = env.get(key)
    if raw is None:
        return None
    return p.field(key, raw, lambda field, value: confvalues.integer(field, value, low, high))


def _ip_env(env: Mapping[str, str], key: str, p: Problems) -> str:
    raw = env.get(key, "")
    if not raw:
        return ""
    try:
        return str(ipaddress.ip_address(raw))
    except ValueError:
        p.add(key, raw, "not an IP address")
        return ""


def load(env: Mapping[str, str], podinfo_dir: Path, *, require_controller: bool = True,
         optional_dir: bool = False) -> PodInfo:
    """Build a PodInfo from ``env`` and the downwardAPI files; BadInput lists every problem.

    ``optional_dir``: a missing directory means no labels and annotations (Slinky's pods mount none)."""
    problems = Problems()

    name = env.get(wk.ENV_POD_NAME, "")
    if not name:
        problems.add(wk.ENV_POD_NAME, "", "required (fieldRef metadata.name)")
    else:
        problems.field(wk.ENV_POD_NAME, name, confvalues.node_name)

    namespace = env.get(wk.ENV_POD_NAMESPACE, "default")
    cluster_name = env.get(wk.ENV_CLUSTER_NAME, "slurmpod")
    controller = env.get(wk.ENV_CONTROLLER, "")
    checks = [(confvalues.name, wk.ENV_CLUSTER_NAME, cluster_name)]
    if namespace:
        checks.append((confvalues.node_name, wk.ENV_POD_NAMESPACE, namespace))
    if controller or require_controller:
        checks.append((confvalues.host, wk.ENV_CONTROLLER, controller))
    for check, key, value in checks:
        problems.field(key, value, check)

    # CPU limit: resourceFieldRef limits.cpu with divisor 1m, or Slinky's whole-CPU POD_CPUS.
    cpu = _int_env(env, wk.ENV_CPU_LIMIT, 1, MAX_CPU_MILLIS, problems)
    if cpu is None:
        whole = _int_env(env, wk.ENV_SLINKY_POD_CPUS, 1, MAX_CPU_MILLIS // 1000, problems)
        cpu = whole * 1000 if whole is not None else None
    memory = _int_env(env, wk.ENV_MEMORY_LIMIT, 1, MAX_MEMORY_MIB, problems)
    if memory is None:
        memory = _int_env(env, wk.ENV_SLINKY_POD_MEMORY, 1, MAX_MEMORY_MIB, problems)
    grace = _int_env(env, wk.ENV_GRACE_SECONDS, 1, MAX_GRACE_SECONDS, problems)

    if not podinfo_dir.is_dir():
        if not (optional_dir and not podinfo_dir.exists()):
                problems.add(wk.ENV_PODINFO_DIR, str(podinfo_dir), "not a directory (downwardAPI volume)")
        labels: Mapping[str, str] = MappingProxyType({})
        annotations: Mapping[str, str] = MappingProxyType({})
    else:
        labels = _read_map(podinfo_dir, wk.PODINFO_LABELS, problems)
        annotations = _read_map(podinfo_dir, wk.PODINFO_ANNOTATIONS, problems)

    pod_ip = _ip_env(env, wk.ENV_POD_IP, problems)
    host_ip = _ip_env(env, wk.ENV_HOST_IP, problems)
    # Slinky's env first, then the pod's annotation (as a webhook sets it), then its label.
    topology = (env.get(wk.ENV_SLINKY_TOPOLOGY, "") or annotations.get(wk.ANNOTATION_TOPOLOGY, "")
                or labels.get(wk.LABEL_TOPOLOGY, ""))

    problems.raise_if_any()
    return PodInfo(
        name=name,
        namespace=namespace,
        uid=env.get(wk.ENV_POD_UID, ""),
        node_name=env.get(wk.ENV_NODE_NAME, ""),
        pod_ip=pod_ip,
        host_ip=host_ip,
        cluster_name=cluster_name,
        controller=controller,
        cpu_limit_millis=cpu,
        memory_limit_mib=memory,
        grace_seconds=grace if grace is not None else DEFAULT_GRACE_SECONDS,
        topology=topology.strip(),
        labels=labels,
        annotations=annotations,
    )
