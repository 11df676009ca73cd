"""Pod volumes -> host files, bind mounts and Docker volumes, as kubelet would provide them.

downwardAPI, secret and configMap volumes are written under the cluster state dir in kubelet's
atomic-writer layout (``..<stamp>/`` holds the files, ``..data`` links to it, each top-level name
links through ``..data``) and mounted read-only. PersistentVolumeClaims are Docker named volumes,
mounted without copying the image's files into them (a fresh PV is empty).
Ref: https://kubernetes.io/docs/concepts/storage/volumes/
Ref: https://github.com/kubernetes/kubernetes/blob/master/pkg/volume/util/atomic_writer.go
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slurmpod import quantity
from slurmpod.errors import BadInput
from slurmpod.problems import Problems
from slurmpod_host.cluster.downward import PodMeta, field_value
from slurmpod_host.cluster.manifests import Bundle
from slurmpod_host.cluster.plan import HostFile, Mount, MountKind

DEFAULT_MODE = 0o644  # kubelet's default for secret, configMap and downwardAPI files
MUNGE_KEY_BYTES = 1024  # generated for an empty Secret value (the per-cluster munge key)
# A missing Secret/ConfigMap behind an `optional: true` volume mounts as an empty directory.
# Ref: https://kubernetes.io/docs/concepts/storage/volumes/#secret (optional)
SECRET_FIELDS = frozenset({"secretName", "defaultMode", "items", "optional"})
CONFIG_MAP_FIELDS = frozenset({"name", "defaultMode", "items", "optional"})
HOST_PATH_FIELDS = frozenset({"path", "type"})
# hostPath volumes the emulator mounts from this Docker host: only the cgroup hierarchy, which Slurm's
# cgroup plugins on cgroup v1 nodes need read-write (the chart's `cgroup.access: hostV1`). Anything else
# would let a manifest reach into the machine running the tests.
# Ref: https://kubernetes.io/docs/concepts/storage/volumes/#hostpath
HOST_PATHS = frozenset({"/sys/fs/cgroup"})
HOST_PATH_TYPES = frozenset({"", "Directory"})  # the path must already exist; nothing is created
EMPTY_DIR_FIELDS = frozenset({"medium", "sizeLimit"})
EMPTY_DIR_MEDIA = frozenset({"", "Memory"})  # "": the node's disk. Ref: https://kubernetes.io/docs/concepts/storage/volumes/#emptydir


@dataclass(frozen=True, slots=True)
class VolumeContext:
    prefix: str  # kustomize-like namePrefix, "<cluster>-"
    pod: PodMeta
    bundle: Bundle
    secrets: Mapping[str, Mapping[str, bytes]]  # Secret name (unprefixed) -> key -> bytes
    claim_templates: Mapping[str, str]  # volumeClaimTemplate name -> Docker volume name
    stamp: str  # the atomic writer's timestamped directory, e.g. "..2025_01_01_00_00_00.0"
    memory_limit: int | None = None  # bytes: the pod's memory limit, what kubelet sizes a Memory emptyDir to


@dataclass(frozen=True, slots=True)
class VolumePlan:
    mounts: tuple[Mount, ...]
    files: tuple[HostFile, ...]
    volumes: tuple[str, ...]


def resolve_secret(body: Mapping[str, Any], where: str, generate: Callable[[int], bytes],
                   problems: Problems) -> dict[str, bytes]:
    """A Secret's data as bytes; empty values are generated (``generate(n) -> bytes``)."""
    out: dict[str, bytes] = {}
    for key, value in (body.get("data") or {}).items():
        if value in ("", None):
            out[key] = generate(MUNGE_KEY_BYTES)
            continue
        try:
            out[key] = base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            problems.add(f"{where}.data.{key}", str(value)[:20], "not base64")
    for key, value in (body.get("stringData") or {}).items():
        out[key] = str(value).encode("utf-8")
    return out


def _unknown_keys(spec: Mapping[str, Any], allowed: frozenset[str], field: str, problems: Problems) -> None:
    for key in spec:
        if key not in allowed:
            problems.add(f"{field}.{key}", str(spec[key])[:40], "not interpreted by the emulator")


def _mode(raw: object, field: str, problems: Problems, default: int = DEFAULT_MODE) -> int:
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= 0o777:
        problems.add(field, str(raw), "file mode must be 0..0777 (write it in octal: 0400)")
        return default
    return raw


def _atomic_files(base: str, stamp: str, items: Sequence[tuple[str, bytes, int]]) -> list[HostFile]:
    files = [HostFile(base, directory=True, mode=0o755),
             HostFile(f"{base}/{stamp}", directory=True, mode=0o755)]
    for path, content, mode in items:
        files.append(HostFile(f"{base}/{stamp}/{path}", content=content, mode=mode))
    files.append(HostFile(f"{base}/..data", symlink_to=stamp))
    files.extend(HostFile(f"{base}/{path}", symlink_to=f"..data/{path}") for path, _, _ in items)
    return files


def _keyed_items(
    data: Mapping[str, bytes], spec: Mapping[str, Any], field: str, problems: Problems
) -> list[tuple[str, bytes, int]]:
    """secret/configMap ``items`` (key -> path, mode) or every key, with ``defaultMode``."""
    default = _mode(spec.get("defaultMode"), f"{field}.defaultMode", problems)
    items = spec.get("items")
    if items is None:
        return [(k, v, default) for k, v in sorted(data.items())]
    out = []
    for i, item in enumerate(items):
        key, path = item.get("key"), item.get("path")
        if key not in data:
            if not spec.get("optional"):
                problems.add(f"{field}.items[{i}].key", str(key), "no such key")
            continue
        mode = _mode(item.get("mode"), f"{field}.items[{i}].mode", problems, default)
        out.append((str(path), data[key], mode))
    return out


def _source(
    ctx: VolumeContext, volume: Mapping[str, Any], field: str, problems: Problems
) -> tuple[Mount | None, list[HostFile], list[str]]:
    """The mount source for one pod volume (target filled in by the caller)."""
    name = str(volume.get("name"))
    base = f"pods/{ctx.pod.name}/volumes/{name}"
    kinds = [k for k in volume if k != "name"]
    if len(kinds) != 1:
        problems.add(field, ",".join(kinds), "a volume needs exactly one source")
        return None, [], []
    kind = kinds[0]
    spec = volume[kind] or {}
    bind = Mount(MountKind.BIND, base, "", True)  # kubelet mounts these three read-only
    if kind == "downwardAPI":
        default = _mode(spec.get("defaultMode"), f"{field}.downwardAPI.defaultMode", problems)
        items: list[tuple[str, bytes, int]] = []
        for i, item in enumerate(spec.get("items") or []):
            where = f"{field}.downwardAPI.items[{i}]"
            path = str(item.get("fieldRef", {}).get("fieldPath", ""))
            value = field_value(ctx.pod, path, for_volume=True) if "fieldRef" in item else None
            if value is None or "/" in str(item.get("path")):
                problems.add(where, path or str(item), "the emulator serves metadata.* fieldRefs")
                continue
            mode = _mode(item.get("mode"), where, problems, default)
            items.append((str(item["path"]), value.encode("utf-8"), mode))
        return bind, _atomic_files(base, ctx.stamp, items), []
    if kind == "secret":
        _unknown_keys(spec, SECRET_FIELDS, f"{field}.secret", problems)
        secret = str(spec.get("secretName"))
        if secret not in ctx.secrets:
            if spec.get("optional") is True:  # kubelet mounts an empty volume for a missing optional Secret
                return bind, _atomic_files(base, ctx.stamp, []), []
            problems.add(f"{field}.secret.secretName", secret, "no such Secret in the manifests")
            return None, [], []
        items = _keyed_items(ctx.secrets[secret], spec, f"{field}.secret", problems)
        return bind, _atomic_files(base, ctx.stamp, items), []
    if kind == "configMap":
        _unknown_keys(spec, CONFIG_MAP_FIELDS, f"{field}.configMap", problems)
        doc = ctx.bundle.find("ConfigMap", str(spec.get("name")))
        if doc is None:
            if spec.get("optional") is True:
                return bind, _atomic_files(base, ctx.stamp, []), []
            problems.add(f"{field}.configMap.name", str(spec.get("name")), "no such ConfigMap")
            return None, [], []
        data = {k: str(v).encode("utf-8") for k, v in (doc.body.get("data") or {}).items()}
        data.update({k: base64.b64decode(str(v)) for k, v in (doc.body.get("binaryData") or {}).items()})
        items = _keyed_items(data, spec, f"{field}.configMap", problems)
        return bind, _atomic_files(base, ctx.stamp, items), []
    if kind == "persistentVolumeClaim":
        claim = str(spec.get("claimName"))
        if ctx.bundle.find("PersistentVolumeClaim", claim) is None:
            problems.add(f"{field}.persistentVolumeClaim.claimName", claim, "no such PVC")
            return None, [], []
        volume_name = ctx.prefix + claim
        return Mount(MountKind.VOLUME, volume_name, "", bool(spec.get("readOnly"))), [], [volume_name]
    if kind == "hostPath":
        _unknown_keys(spec, HOST_PATH_FIELDS, f"{field}.hostPath", problems)
        path, kind_of = str(spec.get("path", "")), str(spec.get("type", ""))
        if path not in HOST_PATHS:
            problems.add(f"{field}.hostPath.path", path, f"the emulator mounts only {', '.join(sorted(HOST_PATHS))}")
            return None, [], []
        if kind_of not in HOST_PATH_TYPES:
            problems.add(f"{field}.hostPath.type", kind_of, "the emulator serves Directory (or no type)")
            return None, [], []
        return Mount(MountKind.HOST, path, "", False), [], []
    if kind == "emptyDir":
        _unknown_keys(spec, EMPTY_DIR_FIELDS, f"{field}.emptyDir", problems)
        medium = str(spec.get("medium") or "")
        if medium not in EMPTY_DIR_MEDIA:
            problems.add(f"{field}.emptyDir.medium", medium, "must be empty (the node's disk) or Memory")
            return None, [], []
        size = None
        if spec.get("sizeLimit") not in (None, ""):
            try:
                size = math.ceil(quantity.parse(f"{field}.emptyDir.sizeLimit", spec["sizeLimit"]))
            except BadInput as exc:
                problems.extend(exc.problems)
                return None, [], []
            if size <= 0:
                problems.add(f"{field}.emptyDir.sizeLimit", spec["sizeLimit"], "must be positive")
                return None, [], []
        if medium == "Memory":
            # kubelet sizes the tmpfs to the smaller of sizeLimit and the pod's memory limit.
            # Ref: https://kubernetes.io/docs/reference/kubernetes-api/config-and-storage-resources/volume/#EmptyDirVolumeSource
            sizes = [s for s in (size, ctx.memory_limit) if s]
            return Mount(MountKind.TMPFS, "", "", False, min(sizes) if sizes else None), [], []
        # Ref: https://kubernetes.io/docs/concepts/storage/volumes/#emptydir (a fresh dir, mode 0777)
        return Mount(MountKind.BIND, base, "", False), [HostFile(base, directory=True, mode=0o777)], []
    problems.add(field, kind, "volume type not interpreted by the emulator")
    return None, [], []


def plan_volumes(
    ctx: VolumeContext,
    volumes: Sequence[Mapping[str, Any]],
    volume_mounts: Sequence[Mapping[str, Any]],
    field: str,
    problems: Problems,
) -> VolumePlan:
    """Mounts for a container's ``volumeMounts``, with the files and volumes they need."""
    by_name = {str(v.get("name")): (i, v) for i, v in enumerate(volumes)}
    mounts: list[Mount] = []
    files: list[HostFile] = []
    docker_volumes: list[str] = []
    for i, vm in enumerate(volume_mounts):
        where = f"{field}.containers[0].volumeMounts[{i}]"
        extra = set(vm) - {"name", "mountPath", "readOnly"}
        if extra:
            problems.add(where, ",".join(sorted(extra)), "not interpreted by the emulator")
        name, target = str(vm.get("name")), str(vm.get("mountPath", ""))
        if not target.startswith("/"):
            problems.add(f"{where}.mountPath", target, "must be an absolute path")
            continue
        if name in ctx.claim_templates:
            volume_name = ctx.claim_templates[name]
            mounts.append(Mount(MountKind.VOLUME, volume_name, target, bool(vm.get("readOnly"))))
            docker_volumes.append(volume_name)
            continue
        if name not in by_name:
            problems.add(f"{where}.name", name, "no such volume or volumeClaimTemplate")
            continue
        index, volume = by_name[name]
        source, new_files, new_volumes = _source(ctx, volume, f"{field}.volumes[{index}]", problems)
        if source is None:
            continue
        read_only = source.read_only or bool(vm.get("readOnly"))
        mounts.append(Mount(source.kind, source.source, target, read_only, source.size))
        files.extend(f for f in new_files if f not in files)
        docker_volumes.extend(v for v in new_volumes if v not in docker_volumes)
    _nested_in_read_only(mounts, f"{field}.containers[0].volumeMounts", problems)
    return VolumePlan(tuple(mounts), tuple(files), tuple(dict.fromkeys(docker_volumes)))


def _nested_in_read_only(mounts: Sequence[Mount], field: str, problems: Problems) -> None:
    """The runtime makes each mount point before mounting; inside a read-only volume it cannot
    (runc: "mkdir ...: read-only file system"), so the pod would never start."""
    read_only = [m.target.rstrip("/") for m in mounts if m.read_only]
    for m in mounts:
        for parent in read_only:
            if m.target.startswith(parent + "/"):
                problems.add(f"{field}.mountPath", m.target, f"inside the read-only mount {parent}")
