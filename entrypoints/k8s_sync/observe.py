"""One pass's input, read once and parsed into typed snapshots that decide.plan takes.

Kubernetes documents are the API's own JSON (slurmpod.kube.seam); a field that is missing or of the
wrong type reads as "unknown", and an unknown is never a cause to act on.
Ref: https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/node-v1/
Ref: https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slurmpod import well_known as wk
from slurmpod.kube.seam import Condition, Taint
from slurmpod.nodestate import NodeState

# The cordon reasons k8s-sync reads, ours first. Slinky's slurm-operator reads the second the same way.
# Ref: https://github.com/SlinkyProject/slurm-operator (docs: node-cordon-reason)
CORDON_REASON_ANNOTATIONS = (wk.ANNOTATION_CORDON_REASON, wk.ANNOTATION_SLINKY_CORDON_REASON)


@dataclass(frozen=True, slots=True)
class Ready:
    """The node's Ready condition: status "True", "False", "Unknown", or "" when the node has none."""

    status: str
    since: float  # lastTransitionTime, seconds since the epoch; 0 when unknown


@dataclass(frozen=True, slots=True)
class KubeNode:
    name: str
    resource_version: str
    unschedulable: bool  # cordoned
    ready: Ready
    cordon_reason: str
    taints: tuple[Taint, ...]
    conditions: Mapping[str, Condition]


@dataclass(frozen=True, slots=True)
class WorkerPod:
    namespace: str
    name: str  # also its Slurm node's name
    uid: str
    node_name: str  # spec.nodeName: "" while unscheduled
    created: float  # creationTimestamp, seconds since the epoch
    deleting: bool  # deletionTimestamp set
    labels: Mapping[str, str]
    conditions: Mapping[str, Condition]


@dataclass(frozen=True, slots=True)
class Snapshot:
    nodes: Mapping[str, KubeNode]
    pods: tuple[WorkerPod, ...]
    slurm: Mapping[str, NodeState]
    now: float


def timestamp(value: object) -> float:
    """An RFC 3339 time of the API (``2026-12-02T04:00:00Z``) as epoch seconds; 0 when absent or garbled."""
    if not isinstance(value, str) or not value:
        return 0.0
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _map(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _strings(value: object) -> dict[str, str]:
    return {k: v for k, v in _map(value).items() if isinstance(k, str) and isinstance(v, str)}


def _conditions(value: object) -> dict[str, Condition]:
    out: dict[str, Condition] = {}
    for item in value if isinstance(value, list) else []:
        c = _map(item)
        kind = c.get("type")
        if isinstance(kind, str):
            out[kind] = Condition(kind, str(c.get("status") or ""), str(c.get("reason") or ""),
                                  str(c.get("message") or ""))
    return out


def _ready(status: Mapping[str, Any]) -> Ready:
    for item in status.get("conditions") or []:
        c = _map(item)
        if c.get("type") == "Ready":
            return Ready(str(c.get("status") or ""), timestamp(c.get("lastTransitionTime")))
    return Ready("", 0.0)


def _taints(value: object) -> tuple[Taint, ...]:
    out = []
    for item in value if isinstance(value, list) else []:
        t = _map(item)
        if isinstance(t.get("key"), str) and isinstance(t.get("effect"), str):
            out.append(Taint(t["key"], str(t.get("value") or ""), t["effect"]))
    return tuple(out)


def nodes(doc: Mapping[str, Any]) -> dict[str, KubeNode]:
    out: dict[str, KubeNode] = {}
    for item in doc.get("items") or []:
        meta, spec, status = (_map(_map(item).get(k)) for k in ("metadata", "spec", "status"))
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            continue
        annotations = _strings(meta.get("annotations"))
        why = next((annotations[a] for a in CORDON_REASON_ANNOTATIONS if annotations.get(a, "").strip()), "")
        out[name] = KubeNode(name, str(meta.get("resourceVersion") or ""), spec.get("unschedulable") is True,
                             _ready(status), why, _taints(spec.get("taints")), _conditions(status.get("conditions")))
    return out


def pods(doc: Mapping[str, Any]) -> tuple[WorkerPod, ...]:
    out = []
    for item in doc.get("items") or []:
        meta, spec, status = (_map(_map(item).get(k)) for k in ("metadata", "spec", "status"))
        name, namespace, uid = meta.get("name"), meta.get("namespace"), meta.get("uid")
        if not all(isinstance(v, str) and v for v in (name, namespace, uid)):
            continue
        node_name = spec.get("nodeName")
        out.append(WorkerPod(str(namespace), str(name), str(uid), node_name if isinstance(node_name, str) else "",
                             timestamp(meta.get("creationTimestamp")), bool(meta.get("deletionTimestamp")),
                             _strings(meta.get("labels")), _conditions(status.get("conditions"))))
    return tuple(sorted(out, key=lambda p: p.name))
