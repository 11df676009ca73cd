"""A recording fake of ``slurmpod.kube.seam.Kube``: the Nodes and Pods it serves, and every write.

Faults per method, as the real client raises them:
- ``fail[method] = exc``  that method raises exc (an API server that errors, 403, a conflict ...);
- ``down = True``         every call raises TransientError (the API server is stopped, or times out).
Writes are applied to the served documents (labels, conditions, taints, deletions, replicas), so a
second pass sees what the first one wrote, as it would from a real API server. A StatefulSet's replicas
are served as its autoscaling/v1 Scale, and ``set_scale`` at another resourceVersion is a 409 conflict.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from slurmpod.errors import PermanentError, SlurmpodError, TransientError
from slurmpod.kube.seam import Condition, Event, Taint


def node_doc(name: str, *, unschedulable: bool = False, ready: str = "True", since: str = "2026-01-01T00:00:00Z",
             annotations: Mapping[str, str] | None = None, taints: Sequence[Taint] = (),
             resource_version: str = "1") -> dict[str, Any]:
    conditions = [] if not ready else [{"type": "Ready", "status": ready, "lastTransitionTime": since}]
    return {"metadata": {"name": name, "resourceVersion": resource_version, "annotations": dict(annotations or {})},
            "spec": {"unschedulable": unschedulable, "taints": [t.as_json() for t in taints]},
            "status": {"conditions": conditions}}


def pod_doc(name: str, node: str, *, namespace: str = "slurm", uid: str = "", created: str = "2026-01-01T00:00:00Z",
            labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}",
                         "creationTimestamp": created,
                         "labels": {"slurmpod.io/role": "worker", **dict(labels or {})}},
            "spec": {"nodeName": node}, "status": {"conditions": []}}


def scale_doc(name: str, replicas: int, *, namespace: str = "slurm", resource_version: str = "1") -> dict[str, Any]:
    """An autoscaling/v1 Scale as the API serves it: spec.replicas is left out when it is 0 (omitempty)."""
    spec = {"replicas": replicas} if replicas else {}
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": resource_version},
            "spec": spec, "status": {"replicas": replicas}}


def _set_condition(conditions: list[dict[str, Any]], condition: Condition) -> None:
    conditions[:] = [c for c in conditions if c.get("type") != condition.type]
    conditions.append({"type": condition.type, "status": condition.status, "reason": condition.reason,
                       "message": condition.message})


@dataclass
class FakeKube:
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[tuple[str, tuple[object, ...]]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    fail: dict[str, SlurmpodError] = field(default_factory=dict)
    down: bool = False
    node_changes: list[bool] = field(default_factory=list)  # what wait_for_node_change answers, in turn
    scales: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (namespace, name) -> Scale

    def add_node(self, name: str, **kw: Any) -> dict[str, Any]:
        self.nodes[name] = node_doc(name, **kw)
        return self.nodes[name]

    def add_pod(self, name: str, node: str, **kw: Any) -> dict[str, Any]:
        self.pods[name] = pod_doc(name, node, **kw)
        return self.pods[name]

    def add_statefulset(self, name: str, replicas: int, *, namespace: str = "slurm",
                        resource_version: str = "1") -> dict[str, Any]:
        self.scales[(namespace, name)] = scale_doc(name, replicas, namespace=namespace,
                                                   resource_version=resource_version)
        return self.scales[(namespace, name)]

    def replicas(self, name: str, namespace: str = "slurm") -> int:
        return int(self.scales[(namespace, name)]["spec"].get("replicas", 0))

    def scale_by_hand(self, name: str, replicas: int, namespace: str = "slurm") -> None:
        """Someone else (a user, helm) changes the replicas: a new resourceVersion."""
        doc = self.scales[(namespace, name)]
        version = str(int(doc["metadata"]["resourceVersion"]) + 1)
        self.scales[(namespace, name)] = scale_doc(name, replicas, namespace=namespace, resource_version=version)

    def _enter(self, method: str, *args: object) -> None:
        self.calls.append((method, args))
        if self.down:
            raise TransientError(f"Kubernetes API {method}: connection refused")
        if method in self.fail:
            raise self.fail[method]

    def called(self, method: str) -> list[tuple[object, ...]]:
        return [args for name, args in self.calls if name == method]

    @property
    def writes(self) -> list[str]:
        reads = {"list_nodes", "list_pods", "wait_for_node_change", "get_scale"}
        return [name for name, _ in self.calls if name not in reads]

    # --- the seam ---
    def list_nodes(self) -> dict[str, Any]:
        self._enter("list_nodes")
        return {"kind": "NodeList", "metadata": {"resourceVersion": "1"},
                "items": [copy.deepcopy(n) for n in self.nodes.values()]}

    def list_pods(self, namespace: str, selector: str) -> dict[str, Any]:
        self._enter("list_pods", namespace, selector)
        wanted = dict(part.split("=", 1) for part in selector.split(",") if part)
        items = [copy.deepcopy(p) for p in self.pods.values() if p["metadata"]["namespace"] == namespace
                 and all(p["metadata"]["labels"].get(k) == v for k, v in wanted.items())]
        return {"kind": "PodList", "items": items}

    def wait_for_node_change(self, timeout_s: float) -> bool:
        self._enter("wait_for_node_change", timeout_s)
        return self.node_changes.pop(0) if self.node_changes else False

    def _pod(self, namespace: str, name: str) -> dict[str, Any]:
        pod = self.pods.get(name)
        if pod is None or pod["metadata"]["namespace"] != namespace:
            raise PermanentError(f"Kubernetes API: HTTP 404 pod {namespace}/{name}")
        return pod

    def set_pod_labels(self, namespace: str, name: str, labels: Mapping[str, str]) -> None:
        self._enter("set_pod_labels", namespace, name, dict(labels))
        self._pod(namespace, name)["metadata"]["labels"].update(labels)

    def set_pod_condition(self, namespace: str, name: str, condition: Condition) -> None:
        self._enter("set_pod_condition", namespace, name, condition)
        _set_condition(self._pod(namespace, name)["status"]["conditions"], condition)

    def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        self._enter("delete_pod", namespace, name, uid)
        if self._pod(namespace, name)["metadata"]["uid"] != uid:
            raise TransientError("Kubernetes API: HTTP 409 precondition failed: uid")
        del self.pods[name]

    def set_node_taints(self, name: str, taints: Sequence[Taint], resource_version: str) -> None:
        self._enter("set_node_taints", name, tuple(taints), resource_version)
        node = self.nodes[name]
        if node["metadata"]["resourceVersion"] != resource_version:
            raise TransientError("Kubernetes API: HTTP 409 the object has been modified")
        node["spec"]["taints"] = [t.as_json() for t in taints]
        node["metadata"]["resourceVersion"] = str(int(resource_version) + 1)

    def set_node_condition(self, name: str, condition: Condition) -> None:
        self._enter("set_node_condition", name, condition)
        _set_condition(self.nodes[name]["status"]["conditions"], condition)

    def record_event(self, event: Event, source: str) -> None:
        self._enter("record_event", event, source)
        self.events.append(event)

    def get_scale(self, namespace: str, name: str) -> dict[str, Any]:
        self._enter("get_scale", namespace, name)
        doc = self.scales.get((namespace, name))
        if doc is None:
            raise PermanentError(f"Kubernetes API read scale {namespace}/{name}: HTTP 404 Not Found")
        return copy.deepcopy(doc)

    def set_scale(self, namespace: str, name: str, replicas: int, resource_version: str) -> None:
        self._enter("set_scale", namespace, name, replicas, resource_version)
        doc = self.scales.get((namespace, name))
        if doc is None:
            raise PermanentError(f"Kubernetes API scale {namespace}/{name}: HTTP 404 Not Found")
        if doc["metadata"]["resourceVersion"] != resource_version:
            raise TransientError(f"Kubernetes API scale {namespace}/{name}: HTTP 409 Conflict: "
                                 "the object has been modified")
        self.scale_by_hand(name, replicas, namespace)
