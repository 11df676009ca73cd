"""`kubectl get nodes -o json` / `kubectl get pods -o json` documents -> nodes and worker pods.

Only what topology needs is kept: names, labels, annotations, and for pods the node they run on.
Ref: https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/node-v1/
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slurmpod import confvalues
from slurmpod import well_known as wk
from slurmpod.problems import Problems


@dataclass(frozen=True, slots=True)
class KubeNode:
    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class WorkerPod:
    name: str  # the Slurm node name
    node_name: str  # spec.nodeName: the Kubernetes node it was scheduled to


def _strings(problems: Problems, path: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return value  # the common case, checked without the collector's per-key bookkeeping
    doc = problems.mapping(path, value)
    out = {}
    for key, item in sorted(doc.items()):
        if problems.typed(f"{path}.{key}", item, str, "a string") is not None:
            out[key] = item
    return out


def _items(problems: Problems, source: str, doc: Any, kind: str) -> list[tuple[str, dict[str, Any]]]:
    top = problems.mapping(source, doc)
    if top.get("kind") not in (f"{kind}List", "List"):
        problems.add(f"{source}.kind", top.get("kind"), f"must be {kind}List or List (kubectl get ... -o json)")
        return []
    return list(problems.mappings(f"{source}.items", top.get("items", [])))


def parse_nodes(doc: Any, source: str = "nodes") -> tuple[KubeNode, ...]:
    """The nodes of a NodeList, sorted by name; BadInput naming every malformed field."""
    problems = Problems()
    nodes: dict[str, KubeNode] = {}
    for where, item in _items(problems, source, doc, "Node"):
        meta = item.get("metadata")
        if not isinstance(meta, dict):
            problems.add(f"{where}.metadata", meta, "must be a mapping")
            continue
        name = problems.typed(f"{where}.metadata.name", meta.get("name"), str, "a string")
        if name is None:
            continue
        labels = _strings(problems, f"node {name} labels", meta.get("labels"))
        annotations = _strings(problems, f"node {name} annotations", meta.get("annotations"))
        if name in nodes:
            problems.add(f"{where}.metadata.name", name, "node listed twice")
        nodes[name] = KubeNode(name, labels, annotations)
    problems.raise_if_any()
    return tuple(nodes[name] for name in sorted(nodes))


def parse_worker_pods(doc: Any, source: str = "pods") -> tuple[WorkerPod, ...]:
    """Worker pods (label slurmpod.io/role=worker) that are scheduled, sorted by name."""
    problems = Problems()
    pods: dict[str, WorkerPod] = {}
    for where, item in _items(problems, source, doc, "Pod"):
        meta = problems.mapping(f"{where}.metadata", item.get("metadata"))
        labels = _strings(problems, f"{where}.metadata.labels", meta.get("labels"))
        if labels.get(wk.LABEL_ROLE) != "worker":
            continue
        name = problems.field(f"{where}.metadata.name", meta.get("name"), confvalues.node_name)
        spec = problems.mapping(f"{where}.spec", item.get("spec", {}))
        node_name = spec.get("nodeName")
        if name is None or not node_name:  # not scheduled yet: not a Slurm node yet
            continue
        if problems.typed(f"pod {name} spec.nodeName", node_name, str, "a string") is None:
            continue
        if name in pods:
            problems.add(f"{where}.metadata.name", name, "pod listed twice")
        pods[name] = WorkerPod(name, node_name)
    problems.raise_if_any()
    return tuple(pods[name] for name in sorted(pods))
