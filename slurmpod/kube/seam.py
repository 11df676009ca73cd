"""The Kube protocol: what slurmpod reads from and writes to the API server, and the objects it writes.

Reads return the API's own JSON documents (what `kubectl get -o json` prints), so one parser per
caller reads both a live API and a saved file. Writes take typed objects, and each touches only the
fields slurmpod owns: one label, one condition type, one taint key.
Every method raises TransientError when the API server did not answer in time or answered 429/5xx,
PermanentError when it refused (403, 404, 409 on a precondition, 422).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class Condition:
    """A pod or node status condition. Ref: https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-conditions"""

    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str  # CamelCase, machine-readable
    message: str


@dataclass(frozen=True, slots=True)
class Taint:
    """Ref: https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/"""

    key: str
    value: str
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute

    def as_json(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "effect": self.effect}


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The object an Event is about: a Pod (with its namespace) or a Node (namespace "")."""

    kind: str
    name: str
    namespace: str = ""
    uid: str = ""


@dataclass(frozen=True, slots=True)
class Event:
    """A core/v1 Event. Ref: https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/event-v1/"""

    about: ObjectRef
    reason: str  # CamelCase
    message: str
    type: str = "Normal"  # Normal | Warning


class Kube(Protocol):
    def list_nodes(self) -> dict[str, Any]:
        """The NodeList document."""
        ...

    def list_pods(self, namespace: str, selector: str) -> dict[str, Any]:
        """The PodList document of ``namespace``'s pods matching the label ``selector``."""
        ...

    def wait_for_node_change(self, timeout_s: float) -> bool:
        """Block until a Node is added, changed or deleted (True) or ``timeout_s`` passes (False)."""
        ...

    def set_pod_labels(self, namespace: str, name: str, labels: Mapping[str, str]) -> None: ...

    def set_pod_condition(self, namespace: str, name: str, condition: Condition) -> None: ...

    def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        """Delete the pod only while it is still the one with ``uid`` (a replacement is never deleted)."""
        ...

    def set_node_taints(self, name: str, taints: Sequence[Taint], resource_version: str) -> None:
        """Replace the node's taint list, only if the node is still at ``resource_version``."""
        ...

    def set_node_condition(self, name: str, condition: Condition) -> None: ...

    def record_event(self, event: Event, source: str) -> None: ...

    def get_scale(self, namespace: str, name: str) -> dict[str, Any]:
        """The autoscaling/v1 Scale document of StatefulSet ``namespace/name``: spec.replicas (absent when
        0), status.replicas, metadata.resourceVersion (the StatefulSet's).
        Ref: https://kubernetes.io/docs/reference/kubernetes-api/autoscaling/scale-v1/"""
        ...

    def set_scale(self, namespace: str, name: str, replicas: int, resource_version: str) -> None:
        """Set the StatefulSet's replicas through its scale subresource, only if it is still at
        ``resource_version``: a change made meanwhile (a user, helm, another scaler) is a conflict (409,
        TransientError) and nothing is changed."""
        ...
