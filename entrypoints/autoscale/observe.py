"""One pass's input, read once and parsed into the typed snapshot decide.plan takes.

A nodeset's nodes are its StatefulSet's pods: Slurm node `<statefulSet>-<ordinal>`, the pod's name.
The Scale is the API's own JSON; one without a resourceVersion, or whose replicas are not a count, is
unknown (TransientError), and an unknown is never a cause to act on.
Ref: https://kubernetes.io/docs/reference/kubernetes-api/autoscaling/scale-v1/
Ref: https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/#ordinal-index
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from slurmpod.entrypoints.cluster_spec import AutoscalingSpec, NodeShape, pod_node_name
from slurmpod.errors import TransientError
from slurmpod.nodestate import NodeState

# A pod's ordinal as its name carries it: a decimal number without leading zeros.
_ORDINAL = re.compile(r"0|[1-9][0-9]{0,8}")


@dataclass(frozen=True, slots=True)
class Scale:
    """The StatefulSet's replicas and the resourceVersion a change to them must be made at."""

    replicas: int
    resource_version: str


@dataclass(frozen=True, slots=True)
class NodeSetView:
    name: str
    stateful_set: str
    settings: AutoscalingSpec
    scale: Scale
    nodes: Mapping[int, NodeState]  # the nodeset's Slurm nodes by ordinal (terminating ones above replicas
    # too, and FUTURE placeholders)
    demand: int  # nodes the pending jobs this nodeset could serve ask for
    shape: NodeShape = field(default_factory=NodeShape)  # its placeholders' shape; unknown: it keeps none

    @property
    def replicas(self) -> int:
        return self.scale.replicas

    def node_name(self, ordinal: int) -> str:
        return pod_node_name(self.stateful_set, ordinal)


@dataclass(frozen=True, slots=True)
class Snapshot:
    nodesets: tuple[NodeSetView, ...]
    now: float  # monotonic seconds
    wall: float | None = None  # seconds since the epoch, at the same moment; None: unknown


def scale(doc: Mapping[str, Any], what: str) -> Scale:
    """The Scale document's replicas (absent: 0, as the API omits a zero) and resourceVersion."""
    meta, spec = doc.get("metadata"), doc.get("spec")
    version = meta.get("resourceVersion") if isinstance(meta, dict) else None
    if not isinstance(version, str) or not version:
        raise TransientError(f"{what}: Scale without a resourceVersion")
    replicas = spec.get("replicas", 0) if isinstance(spec, dict) else None
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise TransientError(f"{what}: Scale spec.replicas is not a count: {replicas!r}"[:200])
    return Scale(replicas, version)


def members(stateful_set: str, nodes: Iterable[NodeState]) -> dict[int, NodeState]:
    """The Slurm nodes named `<stateful_set>-<ordinal>`, by ordinal."""
    prefix = f"{stateful_set}-"
    out: dict[int, NodeState] = {}
    for node in nodes:
        if node.name.startswith(prefix) and _ORDINAL.fullmatch(node.name[len(prefix):]):
            out[int(node.name[len(prefix):])] = node
    return out


def demand(wanted: Mapping[str, int], nodeset: str) -> int:
    """The nodeset's demand; a missing or nonsensical one is unknown, never zero."""
    value = wanted.get(nodeset)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TransientError(f"demand of nodeset {nodeset}: unknown ({value!r})"[:200])
    return value
