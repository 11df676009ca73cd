"""Placements as slurmctld knows them: each worker registered its pod's placement in `slurmd --extra`.

The controller's topology-sync turns the node records of `scontrol show nodes --json` into one
pseudo Kubernetes node per Slurm node, labelled with that placement, so the generic provider places it
(and a node registered without one is unplaced). This needs no API access, so it works the same in a
real cluster and in the emulator, which has no API server.
Ref: https://slurm.schedmd.com/extra_constraints.html#SECTION_NODE-EXTRA-DATA
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from slurmpod import well_known as wk
from slurmpod.nodestate import NodeState
from slurmpod.topology.kube import KubeNode


def placement_of(node: NodeState) -> str | None:
    """The placement a worker registered; None when its Extra is empty, not JSON, or has no such key
    (an admin's own Extra data is left alone)."""
    if not node.extra:
        return None
    try:
        doc = json.loads(node.extra)
    except ValueError:
        return None
    value = doc.get(wk.EXTRA_TOPOLOGY_KEY) if isinstance(doc, dict) else None
    return value if isinstance(value, str) and value.strip() else None


def kube_nodes(nodes: Iterable[NodeState]) -> tuple[KubeNode, ...]:
    """Every node slurmctld knows, by name, labelled with its registered placement where it has one."""
    out = []
    for node in sorted(nodes, key=lambda n: n.name):
        placement = placement_of(node)
        out.append(KubeNode(node.name, {wk.LABEL_TOPOLOGY: placement} if placement else {}, {}))
    return tuple(out)
