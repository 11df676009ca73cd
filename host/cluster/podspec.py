"""A small interpreter of the StatefulSet/PodSpec fields deploy/kubernetes uses -> PodPlans.

Only the fields listed here are understood; any other field is an error naming it, so the
manifests we ship stay the ones the emulator runs. Fields deliberately ignored say why.
readinessProbe becomes the container's Docker health check (Ready = healthy);
terminationGracePeriodSeconds becomes Docker's stop timeout; the pod's seccompProfile and each container's
allowPrivilegeEscalation become Docker's seccomp profile and no-new-privileges; lifecycle.preStop is kept in the
plan (and on the container) and run by slurmpod_host.cluster.lifecycle.delete_pod, not by `cluster down`,
which removes pods at once, as a forced delete would.
Ref: https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/
Ref: https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import math
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from slurmpod import quantity
from slurmpod import well_known as wk
from slurmpod.errors import BadInput, Problem
from slurmpod.problems import Problems
from slurmpod_host.cluster import no_api
from slurmpod_host.cluster import well_known as host_wk
from slurmpod_host.cluster.downward import PodMeta, field_value
from slurmpod_host.cluster.expansion import expand
from slurmpod_host.cluster.manifests import Bundle, Document
from slurmpod_host.cluster.plan import HostFile, Mount, MountKind, PodPlan, Probe
from slurmpod_host.cluster.services import Published
from slurmpod_host.cluster.volumes import VolumeContext, plan_volumes, resolve_secret

# spec.nodeName of every emulated pod: they all run on this one Docker host.
EMULATED_NODE_NAME = "kind-node-0"
DEFAULT_GRACE_SECONDS = 30  # Ref: https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/
DEFAULT_TERMINATION_LOG = wk.TERMINATION_LOG
CLUSTER_DOMAIN = "svc.cluster.local"
# Ref: https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-label-names
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
MAX_CLUSTER_NAME = 40  # leaves room for "-controller-NN" within a 63-character DNS label
MAX_WORKERS = 64
# kubelet's cgroup v1 cpu.shares from requests.cpu: milli * 1024 / 1000, at least 2.
# Ref: https://github.com/kubernetes/kubernetes/blob/master/pkg/kubelet/cm/helpers_linux.go (MilliCPUToShares)
MIN_SHARES = 2

STS_FIELDS = frozenset({"serviceName", "replicas", "podManagementPolicy", "selector", "template",
                        "volumeClaimTemplates"})
POD_FIELDS = frozenset({"containers", "volumes", "terminationGracePeriodSeconds",
                        "automountServiceAccountToken", "enableServiceLinks", "securityContext"})
# seccompProfile.type -> Docker's security option; RuntimeDefault is Docker's default profile (no option).
# Ref: https://kubernetes.io/docs/tutorials/security/seccomp/ Ref: https://docs.docker.com/engine/security/seccomp/
SECCOMP_OPTIONS: dict[str, tuple[str, ...]] = {"RuntimeDefault": (), "Unconfined": ("seccomp=unconfined",)}
NO_NEW_PRIVILEGES = "no-new-privileges:true"  # Ref: https://docs.docker.com/reference/cli/docker/container/run/#security-opt
POD_IGNORED = {"dnsConfig": "Docker's embedded DNS resolves bare pod names on the cluster network",
               "priorityClassName": "one Docker host and no scheduler: nothing is preempted"}
INTERPRETED_KINDS = frozenset({"StatefulSet", "Service", "ConfigMap", "Secret", "PersistentVolumeClaim"})
# Kinds the chart ships that have nothing to act on here (tests validate them offline).
_NO_API = "no API server: pods here never call it"
KINDS_IGNORED = {
    "PriorityClass": "one Docker host and no scheduler: nothing is preempted",
    "PodDisruptionBudget": "no eviction API: pods are deleted by `slurmpod cluster` only",
    "NetworkPolicy": "not enforced in the emulator: every pod on the cluster's bridge reaches every port",
    "ServiceAccount": _NO_API, "ClusterRole": _NO_API, "ClusterRoleBinding": _NO_API,
    "Role": _NO_API, "RoleBinding": _NO_API,
}
CONTAINER_FIELDS = frozenset({"name", "image", "command", "args", "env", "resources", "readinessProbe",
                              "lifecycle", "volumeMounts", "securityContext", "terminationMessagePath",
                              "workingDir"})
CONTAINER_IGNORED = {
    "ports": "a bridge network exposes every port between pods",
    "imagePullPolicy": "images are local; nothing is pulled",
    "livenessProbe": "Docker restarts a container only when it exits, not on a failed check",
}


@dataclass(frozen=True, slots=True)
class ClusterParams:
    """Everything about one emulated cluster that is not in the manifests."""

    name: str
    subnet: ipaddress.IPv4Network
    cluster_uid: uuid.UUID
    created: datetime
    node_cpu: Fraction  # node allocatable, what resourceFieldRef reports for a missing limit
    node_memory: Fraction  # bytes
    flavor: str | None = None  # rewrites the tag of slurmpod/* images
    workers: int | None = None  # replicas of the StatefulSet whose pods have role "worker"
    node_name: str = EMULATED_NODE_NAME
    # Load the manifests' NetworkPolicies as iptables rules on the bridge (netenforce.py); off: not enforced.
    enforce_network_policy: bool = False
    # The Service ports published on the host's loopback (services.py, publish.py), chosen at `cluster up`.
    published: tuple[Published, ...] = ()

    @property
    def gateway(self) -> str:
        """The bridge's address; pods see it as status.hostIP."""
        return str(next(self.subnet.hosts()))

    @property
    def network(self) -> str:
        return f"{self.name}-net"


def termination_log_path(pod: str) -> str:
    """The host file (relative to the state dir) behind a pod's terminationMessagePath."""
    return f"pods/{pod}/termination-log"


def validate_params(name: str, workers: int | None) -> None:
    problems = Problems()
    if len(name) > MAX_CLUSTER_NAME or not _DNS_LABEL.fullmatch(name):
        problems.add("--name", name, f"must be a DNS label of at most {MAX_CLUSTER_NAME} chars")
    if workers is not None and not 1 <= workers <= MAX_WORKERS:
        problems.add("--workers", str(workers), f"must be 1..{MAX_WORKERS}")
    problems.raise_if_any()


def _unknown(obj: Mapping[str, Any], allowed: frozenset[str], ignored: Mapping[str, str], field: str,
             problems: Problems) -> None:
    for key in obj:
        if key not in allowed and key not in ignored:
            problems.add(f"{field}.{key}", str(obj[key])[:40], "not interpreted by the emulator")


def _image(image: str, flavor: str | None) -> str:
    """slurmpod/<role>:<tag> with the tag replaced by the flavor."""
    if flavor is None or not image.startswith("slurmpod/"):
        return image
    return image.rsplit(":", 1)[0] + ":" + flavor


def _resources(container: Mapping[str, Any], params: ClusterParams, field: str,
               problems: Problems) -> dict[str, Fraction | None]:
    """limits.cpu/memory and requests.cpu/memory as the API server defaults them (requests <- limits)."""
    res = container.get("resources") or {}
    _unknown(res, frozenset({"limits", "requests"}), {}, f"{field}.resources", problems)
    out: dict[str, Fraction | None] = {}
    for kind in ("limits", "requests"):
        section = res.get(kind) or {}
        for key in section:
            if key not in {"cpu", "memory"}:
                problems.add(f"{field}.resources.{kind}.{key}", str(section[key]), "not emulated")
        for key in ("cpu", "memory"):
            raw = section.get(key)
            where = f"{field}.resources.{kind}.{key}"
            try:
                out[f"{kind}.{key}"] = None if raw is None else quantity.parse(where, raw)
            except BadInput as exc:
                problems.extend(exc.problems)
                out[f"{kind}.{key}"] = None
    for key in ("cpu", "memory"):  # Ref: https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/
        if out[f"requests.{key}"] is None:
            out[f"requests.{key}"] = out[f"limits.{key}"]
    return out


def _resource_value(ref: Mapping[str, Any], container: str, res: Mapping[str, Fraction | None], *,
                    params: ClusterParams, field: str, problems: Problems) -> str | None:
    """A resourceFieldRef: ceil(value / divisor); a missing limit reads as node allocatable."""
    name = str(ref.get("resource"))
    if name not in res:
        problems.add(f"{field}.resource", name, "the emulator serves limits/requests cpu/memory")
        return None
    if ref.get("containerName") not in (None, container):
        problems.add(f"{field}.containerName", str(ref.get("containerName")), "no such container")
        return None
    value = res[name]
    if value is None and name.startswith("limits"):
        # Ref: https://kubernetes.io/docs/concepts/workloads/pods/downward-api/#fallback-information-for-resource-limits
        value = params.node_cpu if name.endswith("cpu") else params.node_memory
    elif value is None:
        value = Fraction(0)
    try:
        divisor = quantity.parse(f"{field}.divisor", ref.get("divisor", "1"))
        return str(quantity.divide_ceil(value, divisor))
    except BadInput as exc:
        problems.extend(exc.problems)
        return None


def _config_map_key(ref: Mapping[str, Any], bundle: Bundle, field: str, problems: Problems) -> str | None:
    """A configMapKeyRef as kubelet resolves it: the ConfigMap's ``data[key]``; None leaves the variable
    unset (only when ``optional``; otherwise kubelet refuses to start the container).

    Ref: https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#environment-variables
    Ref: https://github.com/kubernetes/kubernetes/blob/master/pkg/kubelet/kubelet_pods.go (makeEnvironmentVariables)
    """
    _unknown(ref, frozenset({"name", "key", "optional"}), {}, field, problems)
    name, key, optional = str(ref.get("name", "")), str(ref.get("key", "")), ref.get("optional") is True
    doc = bundle.find("ConfigMap", name)
    if doc is None:
        if not optional:
            problems.add(f"{field}.name", name, "no such ConfigMap (kubelet: CreateContainerConfigError)")
        return None
    data = doc.body.get("data") or {}
    if key not in data:  # binaryData is not served to env
        if not optional:
            problems.add(f"{field}.key", key, f"not in ConfigMap {name}'s data")
        return None
    return str(data[key])


def _env(container: Mapping[str, Any], meta: PodMeta, res: Mapping[str, Fraction | None], *,
         params: ClusterParams, bundle: Bundle, field: str, problems: Problems) -> list[tuple[str, str]]:
    """The container's env in order; values expand $(VAR) over the variables defined before them."""
    env: dict[str, str] = {}
    for i, item in enumerate(container.get("env") or []):
        where = f"{field}.env[{i}]"
        name = str(item.get("name", ""))
        if "value" in item:
            env[name] = expand(str(item["value"]), env)
            continue
        source = item.get("valueFrom") or {}
        if "fieldRef" in source:
            path = str(source["fieldRef"].get("fieldPath", ""))
            value = field_value(meta, path, for_volume=False)
            if value is None:
                problems.add(f"{where}.valueFrom.fieldRef.fieldPath", path, "not served in env")
                continue
            env[name] = value
        elif "resourceFieldRef" in source:
            got = _resource_value(source["resourceFieldRef"], str(container.get("name")), res, params=params,
                                  field=f"{where}.valueFrom.resourceFieldRef", problems=problems)
            if got is not None:
                env[name] = got
        elif "configMapKeyRef" in source:
            value = _config_map_key(source["configMapKeyRef"] or {}, bundle,
                                    f"{where}.valueFrom.configMapKeyRef", problems)
            if value is not None:
                env[name] = value
        elif not source:
            env[name] = ""  # EnvVar.value defaults to ""
        else:
            problems.add(f"{where}.valueFrom", ",".join(source), "not interpreted here")
    return list(env.items())


def _probe(raw: Mapping[str, Any] | None, field: str, problems: Problems) -> Probe | None:
    if raw is None:
        return None
    allowed = frozenset({"exec", "initialDelaySeconds", "periodSeconds", "timeoutSeconds",
                         "failureThreshold", "successThreshold"})
    _unknown(raw, allowed, {}, field, problems)
    command = (raw.get("exec") or {}).get("command")
    if not command:
        problems.add(f"{field}.exec.command", str(command), "only exec probes are emulated")
        return None
    return Probe(
        command=tuple(str(c) for c in command),
        initial_delay_s=int(raw.get("initialDelaySeconds", 0)),
        period_s=int(raw.get("periodSeconds", 10)),
        timeout_s=int(raw.get("timeoutSeconds", 1)),
        failure_threshold=int(raw.get("failureThreshold", 3)),
    )


def _pre_stop(container: Mapping[str, Any], field: str, problems: Problems) -> tuple[str, ...] | None:
    lifecycle = container.get("lifecycle") or {}
    _unknown(lifecycle, frozenset({"preStop"}), {}, f"{field}.lifecycle", problems)
    pre = lifecycle.get("preStop")
    if pre is None:
        return None
    command = (pre.get("exec") or {}).get("command")
    if not command:
        problems.add(f"{field}.lifecycle.preStop", str(pre), "only exec hooks are emulated")
        return None
    return tuple(str(c) for c in command)


@dataclass(frozen=True, slots=True)
class _Security:
    cap_add: tuple[str, ...]
    cap_drop: tuple[str, ...]
    no_new_privileges: bool


def _container_security(container: Mapping[str, Any], field: str, problems: Problems) -> _Security:
    """capabilities and allowPrivilegeEscalation (unset: true, as the kubelet leaves no_new_privs off)."""
    sc = container.get("securityContext") or {}
    _unknown(sc, frozenset({"capabilities", "allowPrivilegeEscalation"}), {}, f"{field}.securityContext",
             problems)
    caps = sc.get("capabilities") or {}
    _unknown(caps, frozenset({"add", "drop"}), {}, f"{field}.securityContext.capabilities", problems)
    add, drop = tuple(str(c) for c in caps.get("add") or ()), tuple(str(c) for c in caps.get("drop") or ())
    allow = sc.get("allowPrivilegeEscalation", True)
    if not isinstance(allow, bool):
        problems.add(f"{field}.securityContext.allowPrivilegeEscalation", str(allow), "must be a boolean")
        allow = True
    # The API server refuses this pair, for this spelling only (validation.go, ValidateSecurityContext).
    # Ref: https://github.com/kubernetes/kubernetes/blob/master/pkg/apis/core/validation/validation.go
    if not allow and "CAP_SYS_ADMIN" in add:
        problems.add(f"{field}.securityContext.allowPrivilegeEscalation", "false",
                     "the API server refuses it beside capabilities.add CAP_SYS_ADMIN")
    return _Security(add, drop, no_new_privileges=not allow)


def _pod_seccomp(pod: Mapping[str, Any], field: str, problems: Problems) -> tuple[str, ...]:
    """The pod's securityContext: only seccompProfile, as Docker security options."""
    sc = pod.get("securityContext") or {}
    _unknown(sc, frozenset({"seccompProfile"}), {}, f"{field}.securityContext", problems)
    profile = sc.get("seccompProfile")
    if profile is None:  # the kubelet's default: Unconfined unless SeccompDefault is on
        return SECCOMP_OPTIONS["Unconfined"]
    _unknown(profile, frozenset({"type"}), {}, f"{field}.securityContext.seccompProfile", problems)
    kind = str(profile.get("type"))
    if kind not in SECCOMP_OPTIONS:
        problems.add(f"{field}.securityContext.seccompProfile.type", kind,
                     f"the emulator runs {' or '.join(SECCOMP_OPTIONS)}")
        return ()
    return SECCOMP_OPTIONS[kind]


def rfc3339_nano(when: datetime) -> str:
    """Go's time.RFC3339Nano, as the kubelet writes config.seen: trailing zeros of the fraction dropped,
    ``Z`` for UTC (the kubelet uses the node's local zone; these hosts and the emulator use UTC).
    Ref: https://pkg.go.dev/time#pkg-constants"""
    utc = when.astimezone(UTC)
    fraction = f"{utc.microsecond:06d}".rstrip("0")
    return utc.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + "Z"


def _revision_hash(template: Mapping[str, Any]) -> str:
    """A stand-in for the StatefulSet controller's controller-revision-hash (stable per template)."""
    return hashlib.sha256(json.dumps(template, sort_keys=True, default=str).encode()).hexdigest()[:10]


@dataclass(frozen=True, slots=True)
class _Shared:
    params: ClusterParams
    bundle: Bundle
    secrets: Mapping[str, Mapping[str, bytes]]


def _statefulset(doc: Document, shared: _Shared, ips: list[str], problems: Problems,
                 ordinals: Sequence[int] | None = None) -> list[PodPlan]:
    """Pods of one StatefulSet: ordinals 0..replicas-1, or the ``ordinals`` given (each takes an IP)."""
    params, bundle = shared.params, shared.bundle
    field = doc.where
    spec = doc.body.get("spec") or {}
    _unknown(spec, STS_FIELDS, {}, f"{field}.spec", problems)
    template = spec.get("template") or {}
    tmeta = template.get("metadata") or {}
    pod = template.get("spec") or {}
    pfield = f"{field}.spec.template.spec"
    _unknown(tmeta, frozenset({"labels", "annotations"}), {}, f"{field}.spec.template.metadata", problems)
    _unknown(pod, POD_FIELDS, POD_IGNORED, pfield, problems)
    for flag in ("automountServiceAccountToken", "enableServiceLinks"):
        if pod.get(flag) is not False:  # the emulator mounts no token and injects no Service env
            problems.add(f"{pfield}.{flag}", str(pod.get(flag)), "must be false (not emulated)")
    template_labels = {str(k): str(v) for k, v in (tmeta.get("labels") or {}).items()}
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    for k, v in selector.items():
        if template_labels.get(k) != v:  # the API server rejects such a StatefulSet
            problems.add(f"{field}.spec.selector.matchLabels.{k}", str(v), "not a template label")
    service = str(spec.get("serviceName", ""))
    if bundle.find("Service", service) is None:
        problems.add(f"{field}.spec.serviceName", service, "no such Service in the manifests")
    containers = pod.get("containers") or []
    if len(containers) != 1:
        problems.add(f"{pfield}.containers", str(len(containers)), "the emulator runs one")
        return []
    container = containers[0]
    cfield = f"{pfield}.containers[0]"
    _unknown(container, CONTAINER_FIELDS, CONTAINER_IGNORED, cfield, problems)
    role = template_labels.get(wk.LABEL_ROLE, "")
    if role not in host_wk.START_ORDER:
        where = f"{field}.spec.template.metadata.labels.{wk.LABEL_ROLE}"
        problems.add(where, role, "no such role")
    replicas = int(spec.get("replicas", 1))
    if role == "worker" and params.workers is not None:
        replicas = params.workers
    policy = spec.get("podManagementPolicy", "OrderedReady")
    if policy not in {"OrderedReady", "Parallel"}:
        problems.add(f"{field}.spec.podManagementPolicy", str(policy), "unknown policy")
    grace = int(pod.get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS))
    prefix = f"{params.name}-"
    sts_name = prefix + doc.name
    res = _resources(container, params, cfield, problems)
    readiness = _probe(container.get("readinessProbe"), f"{cfield}.readinessProbe", problems)
    pre_stop = _pre_stop(container, cfield, problems)
    security = _container_security(container, cfield, problems)
    security_opt = (*_pod_seccomp(pod, pfield, problems), *((NO_NEW_PRIVILEGES,) if security.no_new_privileges else ()))
    revision = f"{sts_name}-{_revision_hash(template)}"
    claim_names = [str((t.get("metadata") or {}).get("name")) for t in spec.get("volumeClaimTemplates") or []]
    cpu_limit, mem_limit, cpu_request = res["limits.cpu"], res["limits.memory"], res["requests.cpu"]

    plans = []
    for ordinal in range(replicas) if ordinals is None else ordinals:
        name = f"{sts_name}-{ordinal}"
        if not ips:
            problems.add("--workers", str(replicas), "more pods than the cluster subnet holds")
            break
        ip = ips.pop(0)
        labels = {**template_labels, wk.LABEL_INSTANCE: params.name,
                  "statefulset.kubernetes.io/pod-name": name, "apps.kubernetes.io/pod-index": str(ordinal),
                  "controller-revision-hash": revision}
        # kubelet records where and when it first saw the pod; they show in the annotations file.
        # Ref: https://github.com/kubernetes/kubernetes/blob/master/pkg/kubelet/types/pod_update.go
        annotations = {**{str(k): str(v) for k, v in (tmeta.get("annotations") or {}).items()},
                       "kubernetes.io/config.seen": rfc3339_nano(params.created),
                       "kubernetes.io/config.source": "api"}
        meta = PodMeta(name=name, namespace=bundle.namespace, uid=str(uuid.uuid5(params.cluster_uid, name)),
                       node_name=params.node_name, pod_ip=ip, host_ip=params.gateway, labels=labels,
                       annotations=annotations)
        env = _env(container, meta, res, params=params, bundle=bundle, field=cfield, problems=problems)
        env_map = dict(env)
        command = container.get("command")
        args = container.get("args")
        ctx = VolumeContext(prefix=prefix, pod=meta, bundle=bundle, secrets=shared.secrets,
                            claim_templates={c: f"{c}-{name}" for c in claim_names},
                            stamp=f"..{params.created:%Y_%m_%d_%H_%M_%S.%f}",
                            memory_limit=None if mem_limit is None else math.ceil(mem_limit))
        vols = plan_volumes(ctx, pod.get("volumes") or [], container.get("volumeMounts") or [], pfield,
                            problems)
        term_log = str(container.get("terminationMessagePath", DEFAULT_TERMINATION_LOG))
        # kubelet binds an empty, world-writable host file there and reads it when the container ends.
        # Ref: https://kubernetes.io/docs/tasks/debug/debug-application/determine-reason-pod-failure/
        term_file = HostFile(termination_log_path(name), mode=0o666)
        term_mount = Mount(MountKind.BIND, term_file.path, term_log, False)
        plans.append(PodPlan(
            name=name,
            statefulset=sts_name,
            ordinal=ordinal,
            role=role,
            namespace=bundle.namespace,
            uid=meta.uid,
            ip=ip,
            image=_image(str(container.get("image", "")), params.flavor),
            aliases=(f"{name}.{prefix}{service}",
                     f"{name}.{prefix}{service}.{bundle.namespace}.{CLUSTER_DOMAIN}"),
            labels=tuple(sorted(labels.items())),
            annotations=tuple(sorted(annotations.items())),
            env=tuple(env),
            entrypoint=None if command is None else tuple(expand(str(c), env_map) for c in command),
            command=None if args is None else tuple(expand(str(a), env_map) for a in args),
            working_dir=container.get("workingDir"),
            mounts=(*vols.mounts, term_mount),
            files=(*vols.files, term_file),
            volumes=vols.volumes,
            nano_cpus=None if cpu_limit is None else math.ceil(cpu_limit * 10**9),
            mem_limit=None if mem_limit is None else math.ceil(mem_limit),
            cpu_shares=max(MIN_SHARES, math.floor((cpu_request or 0) * 1024)),
            cap_add=security.cap_add,
            cap_drop=security.cap_drop,
            security_opt=security_opt,
            readiness=readiness,
            pre_stop=pre_stop,
            stop_timeout_s=grace,
            termination_log=term_log,
            wait_ready=policy == "OrderedReady",
        ))
    return plans


def _role_rank(doc: Document) -> int:
    labels = (((doc.body.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {}
    role = labels.get(wk.LABEL_ROLE)
    return host_wk.START_ORDER.index(role) if role in host_wk.START_ORDER else len(host_wk.START_ORDER)


def plan_cluster(bundle: Bundle, params: ClusterParams,
                 generate: Callable[[int], bytes]) -> tuple[PodPlan, ...]:
    """Every pod of every StatefulSet, in manifest order, each with a fixed IP on the cluster subnet.

    ``generate(n)`` supplies n random bytes for each empty Secret value (once per Secret key).
    """
    validate_params(params.name, params.workers)
    problems = Problems()
    bundle = no_api.configure(bundle)  # no API server here: no ServiceAccount token, no k8s-sync
    secrets = {d.name: resolve_secret(d.body, d.where, generate, problems) for d in bundle.of_kind("Secret")}
    hosts = [str(h) for h in params.subnet.hosts()]
    ips = [h for h in hosts if h != params.gateway]
    shared = _Shared(params, bundle, secrets)
    plans: list[PodPlan] = []
    # The site's directory, database, slurmdbd, controller, workers, login, slurmrestd, whatever order the
    # manifests list them in: helm template sorts objects of one kind by name.
    for doc in sorted(bundle.of_kind("StatefulSet"), key=_role_rank):
        plans.extend(_statefulset(doc, shared, ips, problems))
    for doc in bundle.documents:
        if doc.kind not in INTERPRETED_KINDS and doc.kind not in KINDS_IGNORED:
            problems.add(doc.where, doc.kind, "kind not interpreted by the emulator")
    if problems:
        raise BadInput(dict.fromkeys(problems))  # each pod of a StatefulSet repeats its template's problems
    return tuple(plans)



def plan_pod(bundle: Bundle, params: ClusterParams, statefulset: str, ordinal: int, *, ip: str,
             generate: Callable[[int], bytes]) -> PodPlan:
    """One pod of the StatefulSet named ``statefulset`` (with the cluster prefix) at ``ip``.

    ``ordinal`` may be beyond the replicas (a scale-up); the caller chooses a free ``ip``.
    """
    validate_params(params.name, params.workers)
    if ordinal < 0:
        raise BadInput.one("ordinal", str(ordinal), "must be >= 0")
    doc = next((d for d in bundle.of_kind("StatefulSet") if f"{params.name}-{d.name}" == statefulset), None)
    if doc is None:
        raise BadInput.one("statefulset", statefulset, "no such StatefulSet in the manifests")
    problems = Problems()
    bundle = no_api.configure(bundle)  # no API server here: no ServiceAccount token, no k8s-sync
    secrets = {d.name: resolve_secret(d.body, d.where, generate, problems) for d in bundle.of_kind("Secret")}
    plans = _statefulset(doc, _Shared(params, bundle, secrets), [ip], problems, ordinals=(ordinal,))
    if problems or not plans:
        raise BadInput(dict.fromkeys(problems) or [Problem("statefulset", statefulset, "no pod planned")])
    return plans[0]
