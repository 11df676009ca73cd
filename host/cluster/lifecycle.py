"""Pod lifecycle on an emulated cluster, always through the manifests: plan, start, delete, replace.

A pod is planned from the StatefulSet template `cluster up` applied (slurmpod_host.cluster.applied), with an
optional PodPatch applied to that template first: the pod a StatefulSet would make after
`kubectl edit statefulset` (limits, annotations, env, command/args). The patch is for that pod only;
the saved template is not changed, so a later plan without a patch gives the original pod back.
Each new pod is a new pod object: a fresh metadata.uid, kubelet's config.seen and volume files.

Deletion follows kubelet: run the container's preStop hook bounded by the grace period, then SIGTERM,
wait for what is left of the grace period (at least 2 s), SIGKILL, remove the container.
Ref: https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination
Ref: https://kubernetes.io/docs/concepts/containers/container-lifecycle-hooks/
"""

from __future__ import annotations

import copy
import dataclasses
import ipaddress
import json
import logging
import math
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import docker

from slurmpod import quantity
from slurmpod.errors import BadInput, PermanentError
from slurmpod.problems import Problems
from slurmpod_host.cluster import applied, netenforce, netpolicy, podspec, publish, runtime, services, state
from slurmpod_host.cluster import well_known as host_wk
from slurmpod_host.cluster.manifests import Bundle, Document
from slurmpod_host.cluster.plan import PodPlan

log = logging.getLogger(__name__)

# kubelet never gives a container less than this after the preStop hook.
# Ref: https://github.com/kubernetes/kubernetes/blob/master/pkg/kubelet/kuberuntime/kuberuntime_container.go
# (minimumGracePeriodInSeconds)
MIN_GRACE_S = 2.0
POD_FILES = "pods"  # per-pod host files live under <state dir>/pods/<pod>/ (see volumes.py, podspec.py)


@dataclass(frozen=True, slots=True)
class PodPatch:
    """An edit of the pod template's first container (what `kubectl edit statefulset` would change)."""

    cpu_limit: str | None = None  # Kubernetes quantity for resources.limits.cpu, e.g. "1", "500m"
    memory_limit: str | None = None  # e.g. "1Gi"
    annotations: Mapping[str, str] | None = None  # merged into the pod template's annotations
    env: Mapping[str, str] | None = None  # container env values set/overridden (plain `value:`)
    command: tuple[str, ...] | None = None  # container `command` override
    args: tuple[str, ...] | None = None  # container `args` override
    read_only_mounts: tuple[str, ...] = ()  # mountPaths whose volumeMount gets `readOnly: true`
    # The container's env is `env` alone (a pod another operator built, e.g. Slinky's), not merged.
    env_exact: bool = False
    # Drop the template's `command`, so the image's ENTRYPOINT runs with `args` (Slinky sets args only).
    image_entrypoint: bool = False
    # mountPath -> new mountPath, or None to drop that volumeMount (Slinky mounts the key elsewhere).
    move_mounts: Mapping[str, str | None] | None = None
    # Capabilities added to the container's securityContext (`cgroup.access: hostV1`, which the chart takes only
    # with `cgroup.acceptNodeRootEquivalent: true`, adds SYS_ADMIN, SYS_NICE).
    cap_add: tuple[str, ...] = ()
    # mountPath -> hostPath: a hostPath volume mounted read-write (the emulator serves /sys/fs/cgroup only).
    host_paths: Mapping[str, str] | None = None


def _check_limit(res: Mapping[str, Any], key: str, limit: str, field: str, problems: Problems) -> None:
    try:
        value = quantity.parse(f"{field}.limits.{key}", limit)
    except BadInput as exc:
        problems.extend(exc.problems)
        return
    request = (res.get("requests") or {}).get(key)
    # The API server rejects a request above its limit.
    # Ref: https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#requests-and-limits
    if request is not None and quantity.parse(f"{field}.requests.{key}", request) > value:
        problems.add(f"{field}.limits.{key}", limit, f"below requests.{key} {request}")


def patch_template(body: Mapping[str, Any], patch: PodPatch) -> dict[str, Any]:
    """A copy of StatefulSet ``body`` with ``patch`` applied to its pod template; BadInput on a bad patch."""
    out: dict[str, Any] = copy.deepcopy(dict(body))
    template = out.setdefault("spec", {}).setdefault("template", {})
    containers = template.setdefault("spec", {}).get("containers") or []
    if not containers:
        raise BadInput.one("spec.template.spec.containers", "[]", "no container to patch")
    container = containers[0]
    field = "spec.template.spec.containers[0].resources"
    problems = Problems()
    res = container.setdefault("resources", {})
    for key, limit in (("cpu", patch.cpu_limit), ("memory", patch.memory_limit)):
        if limit is not None:
            _check_limit(res, key, limit, field, problems)
            res.setdefault("limits", {})[key] = limit
    problems.raise_if_any()
    if patch.annotations:
        meta = template.setdefault("metadata", {})
        meta["annotations"] = {**(meta.get("annotations") or {}), **{str(k): str(v)
                                                                     for k, v in patch.annotations.items()}}
    if patch.env_exact:
        container["env"] = [{"name": str(k), "value": str(v)} for k, v in (patch.env or {}).items()]
    elif patch.env:
        env = list(container.get("env") or [])
        for name, value in patch.env.items():
            item = {"name": str(name), "value": str(value)}
            index = next((i for i, e in enumerate(env) if e.get("name") == name), None)
            if index is None:
                env.append(item)
            else:
                env[index] = item  # in place: $(VAR) expansion depends on the order
        container["env"] = env
    if patch.image_entrypoint:
        container.pop("command", None)
    if patch.command is not None:
        container["command"] = list(patch.command)
    if patch.args is not None:
        container["args"] = list(patch.args)
    mounts = container.get("volumeMounts") or []
    for old, new in (patch.move_mounts or {}).items():
        if not any(m.get("mountPath") == old for m in mounts):
            raise BadInput.one("spec.template.spec.containers[0].volumeMounts", old, "no volume mounted there")
        mounts = [m if m.get("mountPath") != old else {**m, "mountPath": new} for m in mounts if
                  m.get("mountPath") != old or new is not None]
        container["volumeMounts"] = mounts
    if patch.cap_add:
        caps = container.setdefault("securityContext", {}).setdefault("capabilities", {})
        caps["add"] = [*(caps.get("add") or []), *(c for c in patch.cap_add if c not in (caps.get("add") or []))]
    for i, (target, source) in enumerate(sorted((patch.host_paths or {}).items())):
        volume = f"patch-host-path-{i}"
        template["spec"].setdefault("volumes", []).append({"name": volume, "hostPath": {"path": source}})
        mounts = [*mounts, {"name": volume, "mountPath": target}]
        container["volumeMounts"] = mounts
    for path in patch.read_only_mounts:
        found = [m for m in mounts if m.get("mountPath") == path]
        if not found:
            raise BadInput.one("spec.template.spec.containers[0].volumeMounts", path, "no volume mounted there")
        for m in found:
            m["readOnly"] = True
    return out


def choose_ip(subnet: ipaddress.IPv4Network, gateway: str, pod: str, planned: Mapping[str, str],
              in_use: Mapping[str, str]) -> str:
    """An IP for ``pod``: the one `up` planned for it (or it has now) when no other pod holds it, else
    the lowest address that no other pod holds or was planned for.

    ``planned``: pod -> IP from `up`'s plan; ``in_use``: pod -> IP of every pod container that exists.
    """
    others_use = {ip for name, ip in in_use.items() if name != pod and ip}
    for candidate in (planned.get(pod), in_use.get(pod)):
        if candidate and candidate not in others_use:
            return candidate
    reserved = others_use | {ip for name, ip in planned.items() if name != pod} | {gateway}
    for host in subnet.hosts():
        if str(host) not in reserved:
            return str(host)
    raise PermanentError(f"no free address left in {subnet} for pod {pod}")


def _no_generate(n: int) -> bytes:
    raise PermanentError("saved Secret has an empty value; recreate the cluster")


def _statefulset_doc(bundle: Bundle, cluster: str, statefulset: str) -> Document:
    """The StatefulSet named ``statefulset``, with or without the cluster prefix."""
    for doc in bundle.of_kind("StatefulSet"):
        if statefulset in (doc.name, f"{cluster}-{doc.name}"):
            return doc
    names = ", ".join(d.name for d in bundle.of_kind("StatefulSet"))
    raise BadInput.one("statefulset", statefulset, f"no such StatefulSet (have: {names})")


def split_pod_name(bundle: Bundle, cluster: str, pod: str) -> tuple[str, int]:
    """(StatefulSet with prefix, ordinal) of ``pod`` (`<cluster>-<statefulset>-<ordinal>`)."""
    base, _, ordinal = pod.rpartition("-")
    for doc in bundle.of_kind("StatefulSet"):
        if base == f"{cluster}-{doc.name}" and ordinal.isdigit():
            return base, int(ordinal)
    raise BadInput.one("pod", pod, f"not a pod of a StatefulSet of cluster {cluster!r}")


def _root(cluster: str) -> Path:
    return state.state_dir(cluster)


def plan_pod(client: Any, cluster: str, statefulset: str, ordinal: int,
             patch: PodPatch = PodPatch()) -> PodPlan:
    """The pod ``<cluster>-<statefulset>-<ordinal>`` from the applied template with ``patch``.

    ``ordinal`` may be beyond the replicas (scale-up): the pod gets a free IP on the cluster network.
    """
    saved = applied.load(_root(cluster))
    params, bundle = saved.params, saved.bundle
    doc = _statefulset_doc(bundle, cluster, statefulset)
    patched = Document(doc.source, patch_template(doc.body, patch))
    patched_bundle = Bundle(bundle.namespace, tuple(patched if d is doc else d for d in bundle.documents))
    sts = f"{cluster}-{doc.name}"
    pod = f"{sts}-{ordinal}"
    planned = {p.name: p.ip for p in podspec.plan_cluster(bundle, params, _no_generate)}
    in_use = {s.name: s.ip for s in runtime.statuses(client, cluster, _root(cluster))}
    ip = choose_ip(params.subnet, params.gateway, pod, planned, in_use)
    # A new pod object: fresh metadata.uid and kubelet's config.seen (and atomic-writer stamp).
    fresh = dataclasses.replace(params, cluster_uid=uuid.uuid4(), created=datetime.now(UTC))
    return podspec.plan_pod(patched_bundle, fresh, sts, ordinal, ip=ip, generate=_no_generate)


def _exists(client: Any, pod: str) -> bool:
    try:
        client.api.inspect_container(pod)
    except docker.errors.NotFound:
        return False
    return True


def start_pod(client: Any, cluster: str, plan: PodPlan) -> None:
    """Write the pod's volume files, create its missing volumes, create and start it (no waiting)."""
    root = _root(cluster)
    params = applied.load(root).params
    if _exists(client, plan.name):
        raise PermanentError(f"pod {plan.name} exists; delete it first")
    state.remove(root / POD_FILES / plan.name)  # a new pod: no files of its predecessor
    state.write(root, plan.files)
    for volume in plan.volumes:
        try:
            client.volumes.get(volume)
        except docker.errors.NotFound:  # a volumeClaimTemplate of a new ordinal: a new PVC
            client.volumes.create(name=volume, labels={host_wk.DOCKER_LABEL_CLUSTER: cluster})
    if params.enforce_network_policy:
        enforce_policies(client, cluster, plan)
    _follow_published(client, cluster, plan)
    runtime.create_pod(client, plan, params, root)
    client.api.start(plan.name)
    log.info("started pod", extra={"ctx": {"pod": plan.name, "ip": plan.ip}})


def _follow_published(client: Any, cluster: str, plan: PodPlan) -> None:
    """Send the Service ports published to ``plan``'s pod to its address, saved for later pod operations."""
    root = _root(cluster)
    saved = applied.load(root)
    moved = services.repoint(saved.params.published, plan.name, plan.ip)
    if moved == saved.params.published:
        return
    params = dataclasses.replace(saved.params, published=moved)
    applied.save(root, applied.Applied(params, saved.bundle))
    publish.apply_cluster(client, params)


def policy_members(client: Any, cluster: str, new: PodPlan | None = None) -> list[netpolicy.Member]:
    """Every pod of the cluster as NetworkPolicies see it (labels from its StatefulSet's template), with
    ``new`` (about to start) in place of any pod of its name."""
    saved = applied.load(_root(cluster))
    members = [] if new is None else [netpolicy.Member.of(new)]
    for st in runtime.statuses(client, cluster, _root(cluster)):
        if (new is not None and st.name == new.name) or not st.ip:
            continue
        sts, ordinal = split_pod_name(saved.bundle, cluster, st.name)
        plan = podspec.plan_pod(saved.bundle, saved.params, sts, ordinal, ip=st.ip, generate=_no_generate)
        members.append(netpolicy.Member.of(plan))
    return members


def enforce_policies(client: Any, cluster: str, new: PodPlan | None = None) -> netpolicy.RuleSet:
    """Reload the cluster's NetworkPolicy rules for the pods it has (and ``new``): a pod started on another
    address (a scale-up) is a peer the other pods' rules must name."""
    saved = applied.load(_root(cluster))
    return netenforce.enforce(client, saved.params, saved.bundle, policy_members(client, cluster, new))


def _pre_stop(labels: Mapping[str, str]) -> list[str] | None:
    raw = labels.get(runtime.LABEL_PRE_STOP)
    if not raw:
        return None
    command = (json.loads(raw).get("exec") or {}).get("command")
    return [str(c) for c in command] if command else None


def delete_pod(client: Any, cluster: str, pod: str, *, run_prestop: bool = True,
               grace_s: float | None = None) -> float:
    """Delete ``pod`` as kubelet would; returns the seconds its preStop hook took (0 if not run).

    ``grace_s`` overrides terminationGracePeriodSeconds; 0 kills at once without the hook
    (`kubectl delete --grace-period=0 --force`).
    """
    try:
        info = client.api.inspect_container(pod)
    except docker.errors.NotFound:
        raise PermanentError(f"no pod {pod} in cluster {cluster!r}") from None
    labels = (info.get("Config") or {}).get("Labels") or {}
    if labels.get(host_wk.DOCKER_LABEL_CLUSTER) != cluster:
        raise PermanentError(f"container {pod} is not a pod of cluster {cluster!r}")
    grace = grace_s if grace_s is not None else float(
        labels.get(runtime.LABEL_GRACE) or (info.get("Config") or {}).get("StopTimeout")
        or podspec.DEFAULT_GRACE_SECONDS)
    running = bool((info.get("State") or {}).get("Running"))
    hook = _pre_stop(labels)
    hook_s = 0.0
    if run_prestop and hook and running and grace > 0:
        started = time.monotonic()
        result = runtime.exec_in(client, pod, hook, timeout_s=max(1, math.ceil(grace)))
        hook_s = time.monotonic() - started
        output = (result.stdout + result.stderr).strip()[-300:]
        log.info("preStop hook ran", extra={"ctx": {"pod": pod, "exit": result.code,
                                                    "seconds": round(hook_s, 2), "output": output}})
    if running:
        # Docker's stop is kubelet's kill: SIGTERM, wait, SIGKILL.
        remaining = 0 if grace == 0 else max(MIN_GRACE_S, grace - hook_s)
        client.api.stop(pod, timeout=math.ceil(remaining))
    client.api.remove_container(pod, force=True)
    state.remove(_root(cluster) / POD_FILES / pod)
    return hook_s


def replace_pod(client: Any, cluster: str, pod: str, patch: PodPatch = PodPatch(), *,
                run_prestop: bool = True) -> PodPlan:
    """Delete ``pod`` (when it exists) and start a new pod of the same name from the template + ``patch``.

    The plan is made (and the patch validated) before anything is deleted.
    """
    bundle = applied.load(_root(cluster)).bundle
    sts, ordinal = split_pod_name(bundle, cluster, pod)
    plan = plan_pod(client, cluster, sts, ordinal, patch)
    if _exists(client, pod):
        delete_pod(client, cluster, pod, run_prestop=run_prestop)
    start_pod(client, cluster, plan)
    return plan


def set_config_map(cluster: str, name: str, data: Mapping[str, str]) -> dict[str, str]:
    """`kubectl edit configmap NAME`: replace its ``data`` in the applied objects; returns the old data.

    Pods made afterwards mount the new data; running pods keep theirs (kubelet would refresh their
    files within a minute, but slurmpod reads its config only at pod start, so a restart is needed
    either way). ``name`` is the manifest's name, without the cluster prefix.
    """
    root = _root(cluster)
    saved = applied.load(root)
    doc = saved.bundle.find("ConfigMap", name)
    if doc is None:
        raise BadInput.one("configmap", name, "no such ConfigMap in the applied manifests")
    old = {str(k): str(v) for k, v in (doc.body.get("data") or {}).items()}
    body = {**copy.deepcopy(dict(doc.body)), "data": {str(k): str(v) for k, v in data.items()}}
    edited = Document(doc.source, body)
    bundle = Bundle(saved.bundle.namespace, tuple(edited if d is doc else d for d in saved.bundle.documents))
    applied.save(root, applied.Applied(saved.params, bundle))
    return old
