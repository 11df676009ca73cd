"""Pod start's input, read once: the typed, frozen objects every later stage takes.

``load`` reads what the pod learns from Kubernetes (PodInfo: downward-API env and files) and from its
settings (SLURMPOD_* env, the cluster spec, Slinky's slurmd args) and validates it. Nothing after it
reads the environment: the role builders (entrypoints/roles/) get a ``StartInput`` and ``Adapters``.
Ref: https://kubernetes.io/docs/concepts/workloads/pods/downward-api/
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from slurmpod import confvalues, podinfo, slurm_version
from slurmpod import well_known as wk
from slurmpod.entrypoints import roles, slinky, sssd_conf
from slurmpod.errors import BadInput
from slurmpod.prolog_epilog import task_env

if TYPE_CHECKING:
    from slurmpod.entrypoints import cluster_spec
    from slurmpod.hardware import Gpu
    from slurmpod.kube import access
    from slurmpod.slurm import SlurmClient


@dataclass(frozen=True, slots=True)
class Settings:
    """Where the pod's inputs are; each has a SLURMPOD_ environment twin for tests and other layouts."""

    podinfo_dir: Path
    cluster_spec: Path
    munge_key: Path
    slurm_key: Path
    run_dir: Path
    hw_root: Path
    ssh_host_key: Path
    db_password: Path = Path(wk.DB_PASSWORD_SECRET)
    jwt_key: Path = Path(wk.JWT_KEY_SECRET)
    sssd_conf: Path = Path(wk.SSSD_CONF_SECRET)
    sssd_binary: Path = Path(wk.SSSD_BINARY)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        return cls(
            podinfo_dir=Path(env.get(wk.ENV_PODINFO_DIR, wk.PODINFO_DIR)),
            cluster_spec=Path(env.get(wk.ENV_CLUSTER_SPEC, wk.CLUSTER_SPEC_FILE)),
            munge_key=Path(env.get("SLURMPOD_MUNGE_KEY_FILE", wk.MUNGE_KEY_SECRET)),
            slurm_key=Path(env.get("SLURMPOD_SLURM_KEY_FILE", wk.SLURM_KEY_SECRET)),
            run_dir=Path(env.get(wk.ENV_RUN_DIR, wk.RUN_DIR)),
            hw_root=Path(env.get("SLURMPOD_HW_ROOT", "/")),
            ssh_host_key=Path(env.get("SLURMPOD_SSH_HOST_KEY_FILE",
                                      f"{wk.SSH_HOST_KEY_SECRET_DIR}/{wk.SSH_HOST_KEY_FILE}")),
            db_password=Path(env.get("SLURMPOD_DB_PASSWORD_FILE", wk.DB_PASSWORD_SECRET)),
            jwt_key=Path(env.get("SLURMPOD_JWT_KEY_FILE", wk.JWT_KEY_SECRET)),
            sssd_conf=Path(env.get("SLURMPOD_SSSD_CONF_FILE", wk.SSSD_CONF_SECRET)),
            sssd_binary=Path(env.get("SLURMPOD_SSSD_BINARY", wk.SSSD_BINARY)),
        )


@dataclass(frozen=True, slots=True)
class StartInput:
    """Everything pod start learned, validated. Fields a role does not read are None."""

    role: str
    pod: podinfo.PodInfo
    settings: Settings
    auth: str  # munge | slurm
    spec: cluster_spec.ClusterSpec | None = None  # the controller's
    operator: slinky.SlurmdArgs | None = None  # a worker started by Slinky's operator
    slurm_version: slurm_version.SlurmVersion | None = None  # controller, worker
    nodeset: str | None = None  # worker: SLURMPOD_NODESET
    task_env: task_env.Inputs | None = None  # worker
    health_agent: bool = False  # worker: SLURMPOD_HEALTH_AGENT (true unless "false")
    health_agent_metrics_port: int = wk.HEALTH_AGENT_METRICS_PORT  # worker: its live metrics (0: none)
    claim_placeholder: bool = False  # worker: SLURMPOD_CLAIM_PLACEHOLDER (false unless "true")
    accounting_host: str | None = None  # controller with accounting: slurmdbd's host
    exporter_port: int = wk.EXPORTER_PORT  # controller: the exporter's /metrics (SLURMPOD_EXPORTER_PORT)
    db_host: str | None = None  # accounting: slurmdbd's StorageHost
    kube_api: access.Settings | None = None  # controller with the API topology source
    sssd: sssd_conf.SssdConf | None = None  # login, worker, controller, restapi: the site's sssd.conf, if mounted
    mkhomedir: bool = False  # with sssd: pam_mkhomedir makes a directory user's home on first ssh login


def _default_gpus() -> tuple[Gpu, ...]:
    from slurmpod import nvml  # noqa: PLC0415 - pynvml only where a worker probes its GPUs

    return nvml.inventory()


def _default_slurm() -> SlurmClient:
    from slurmpod.slurm import CliSlurmClient  # noqa: PLC0415 - the controller's alone

    return CliSlurmClient()


@dataclass(frozen=True, slots=True)
class Adapters:
    """The outside world pod start asks: the GPUs NVML sees, and slurmctld (the controller's topology)."""

    gpus: Callable[[], tuple[Gpu, ...]] = _default_gpus
    slurm: Callable[[], SlurmClient] = _default_slurm


def auth(env: Mapping[str, str], spec: cluster_spec.ClusterSpec | None) -> str:
    """munge | slurm: the spec decides on the controller, SLURMPOD_AUTH (the ConfigMap's `auth`) elsewhere.

    Both come from one ConfigMap; on the controller they must agree, or workers would start with an auth
    type slurmctld does not accept (and fail far from the cause).
    """
    value = env.get(wk.ENV_AUTH)
    if value is not None and value not in wk.AUTH_TYPES:
        raise BadInput.one(wk.ENV_AUTH, value, f"must be one of {', '.join(wk.AUTH_TYPES)}")
    if spec is None:
        return value or wk.AUTH_MUNGE
    if value is not None and value != spec.auth:
        raise BadInput.one(wk.ENV_AUTH, value, f"differs from the cluster spec's auth: {spec.auth} "
                           "(set the ConfigMap's `auth` and cluster.yaml's `auth:` alike)")
    return spec.auth


def _host_env(env: Mapping[str, str], name: str, why: str) -> str:
    value = env.get(name)
    if not value:
        raise BadInput.one(name, "", f"must be set: {why}")
    return confvalues.host(name, value)


def accounting_host(env: Mapping[str, str], spec: cluster_spec.ClusterSpec) -> str | None:
    """slurmdbd's host (the chart: <release>-accounting-0) when the spec enables accounting."""
    if not spec.accounting.enabled:
        return None
    return _host_env(env, wk.ENV_ACCOUNTING_HOST, "the cluster spec enables accounting")


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    """A true/false setting; anything else is refused naming it."""
    raw = env.get(name, "true" if default else "false")
    if raw not in ("true", "false"):
        raise BadInput.one(name, raw, "must be true or false")
    return raw == "true"


def _health_agent_metrics_port(env: Mapping[str, str]) -> int:
    raw = env.get(wk.ENV_HEALTH_AGENT_METRICS_PORT, str(wk.HEALTH_AGENT_METRICS_PORT))
    if not (raw.isascii() and raw.isdigit()) or int(raw) > 65535:  # the TCP port range
        raise BadInput.one(wk.ENV_HEALTH_AGENT_METRICS_PORT, raw, "must be a TCP port, 0 to 65535 (0: no metrics)")
    return int(raw)


def _exporter_port(env: Mapping[str, str]) -> int:
    raw = env.get(wk.ENV_EXPORTER_PORT, str(wk.EXPORTER_PORT))
    if not (raw.isascii() and raw.isdigit()) or not 0 < int(raw) <= 65535:  # the TCP port range
        raise BadInput.one(wk.ENV_EXPORTER_PORT, raw, "must be a TCP port, 1 to 65535")
    return int(raw)


def load(role: str, env: Mapping[str, str], settings: Settings, operator: slinky.SlurmdArgs | None = None, *,
         with_auth: bool = True) -> StartInput:
    """Read and validate every input of pod start; BadInput names what is wrong.

    ``operator``: a worker started by Slinky's operator (``env`` completed by ``slinky.pod_env``).
    ``with_auth``: False for previews (`render node`): auth does not change the node, so it is not read."""
    kind = roles.REGISTRY.get(role)
    if kind is None:
        raise BadInput.one("ROLE", role, f"unknown role; expected one of {', '.join(wk.POD_ROLES)}")
    if operator is not None and role != "worker":
        raise BadInput.one("ROLE", role, "slurmd args are for the worker role only")
    confvalues.path(wk.ENV_RUN_DIR, str(settings.run_dir))  # written into supervisord.conf
    pod = podinfo.load(env, settings.podinfo_dir, require_controller=kind.needs_controller,
                       optional_dir=operator is not None)
    if operator is not None:
        pod = slinky.with_topology(pod, operator)
    spec = None
    if kind.cluster_spec:  # the cluster spec (YAML) is the controller's alone: workers never import it
        from slurmpod.entrypoints import cluster_spec  # noqa: PLC0415

        spec = cluster_spec.load(settings.cluster_spec)
    inp = StartInput(role, pod, settings, auth(env, spec) if kind.auth and with_auth else wk.AUTH_MUNGE, spec,
                     operator)
    if kind.directory:
        conf = sssd_conf.read(settings.sssd_conf, role, settings.sssd_binary)
        inp = dataclasses.replace(inp, sssd=conf, mkhomedir=_flag(env, wk.ENV_SSSD_MKHOMEDIR, False))
    if kind.node:
        return dataclasses.replace(inp, slurm_version=slurm_version.detect(env),
                                   nodeset=env.get(wk.ENV_NODESET) or None, task_env=task_env.Inputs.from_env(env),
                                   health_agent=_flag(env, wk.ENV_HEALTH_AGENT, True),
                                   health_agent_metrics_port=_health_agent_metrics_port(env),
                                   claim_placeholder=_flag(env, wk.ENV_CLAIM_PLACEHOLDER, False))
    if spec is not None:
        from slurmpod.entrypoints import topology_sync  # noqa: PLC0415 - the controller's alone

        version = slurm_version.detect(env)
        api = topology_sync.api_settings(spec, env) if topology_sync.target(spec, version) else None
        port = _exporter_port(env) if spec.metrics.enabled else wk.EXPORTER_PORT
        return dataclasses.replace(inp, slurm_version=version, kube_api=api, accounting_host=accounting_host(env, spec),
                                   exporter_port=port)
    if kind.storage:
        return dataclasses.replace(inp, db_host=_host_env(env, wk.ENV_DB_HOST, "slurmdbd's StorageHost (the db pod)"))
    return inp
