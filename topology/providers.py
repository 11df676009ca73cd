"""Provider profiles: the labels (or annotation) of one Kubernetes node -> its placement path.

Each profile lists its label keys outermost first. Required keys must all be present for the profile
to place a node; optional keys (the innermost NVLink-domain levels) are used where present. Every value
becomes a Slurm switch/block name, so it goes through confvalues.name: no label can add a line or a
key to topology.conf or a node's registration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from slurmpod import confvalues
from slurmpod import well_known as wk
from slurmpod.errors import BadInput
from slurmpod.topology import annotation
from slurmpod.topology.kube import KubeNode
from slurmpod.topology.model import Provider


@dataclass(frozen=True, slots=True)
class Level:
    key: str
    required: bool = True


@dataclass(frozen=True, slots=True)
class Profile:
    provider: Provider
    levels: tuple[Level, ...]  # outermost first
    host_key: str | None = None  # a label naming the physical host; else the Kubernetes node


PROFILES: dict[Provider, Profile] = {
    # Ref: https://cloud.google.com/kubernetes-engine/docs/how-to/gpu-topology
    Provider.GKE: Profile(Provider.GKE, (Level(wk.LABEL_GKE_BLOCK), Level(wk.LABEL_GKE_SUBBLOCK)), wk.LABEL_GKE_HOST),
    # Layer 1 is the farthest from the instance; instances report three or four layers.
    # Ref: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/how-ec2-instance-topology-works.html
    Provider.EKS: Profile(Provider.EKS, (*(Level(f"{wk.LABEL_EKS_LAYER_PREFIX}{n}") for n in (1, 2, 3)),
                                         Level(f"{wk.LABEL_EKS_LAYER_PREFIX}4", required=False))),
    # CoreWeave's fabric-agnostic backend labels (found in the CoreWeave docs page "InfiniBand and RoCE
    # labels"): fabric = one IB/RoCE fabric, leafgroup = the leaf switches serving a set of nodes.
    # Ref: https://docs.coreweave.com/products/networking/hpc-interconnect/infiniband-roce-labels
    Provider.COREWEAVE: Profile(Provider.COREWEAVE, (Level(wk.LABEL_COREWEAVE_FABRIC),
                                                     Level(wk.LABEL_COREWEAVE_LEAFGROUP))),
    # Ref: https://github.com/NVIDIA/topograph/blob/main/docs/k8s.md
    Provider.TOPOGRAPH: Profile(Provider.TOPOGRAPH, (Level(wk.LABEL_TOPOGRAPH_DATACENTER, required=False),
                                                     Level(wk.LABEL_TOPOGRAPH_SPINE),
                                                     Level(wk.LABEL_TOPOGRAPH_BLOCK),
                                                     Level(wk.LABEL_TOPOGRAPH_ACCELERATOR, required=False))),
    # Ref: https://docs.nebius.com/kubernetes/gpu/topology-aware-scheduling
    Provider.NEBIUS: Profile(Provider.NEBIUS, (Level(wk.LABEL_NEBIUS_CLUSTER),
                                               Level(f"{wk.LABEL_NEBIUS_TIER_PREFIX}2"),
                                               Level(f"{wk.LABEL_NEBIUS_TIER_PREFIX}1"),
                                               Level(f"{wk.LABEL_NEBIUS_TIER_PREFIX}0", required=False))),
}

# `--provider auto`: the first provider that places any node wins, for every node. Explicit choices by
# the admin (the generic label, a Slinky annotation, Topograph) before what a cloud sets by itself.
AUTO_ORDER = (Provider.GENERIC, Provider.SLINKY, Provider.TOPOGRAPH, Provider.GKE, Provider.EKS,
              Provider.COREWEAVE, Provider.NEBIUS)


def _unit(node: str, key: str, value: str) -> str:
    return confvalues.name(f"node {node} label {key}", value)


def _generic(node: KubeNode) -> tuple[tuple[str, ...], str] | None:
    """``slurmpod.io/topology``: ``block1/host3`` (levels then the host), ``block1``, or ``topo:unit``
    (that unit); the forms are those of topology/annotation.py, shared with worker pods."""
    raw = node.labels.get(wk.LABEL_TOPOLOGY)
    if raw is None:
        return None
    value = annotation.parse(f"node {node.name} label {wk.LABEL_TOPOLOGY}", raw)
    return value.levels, value.host or node.name


def _slinky(node: KubeNode, topology: str | None) -> tuple[tuple[str, ...], str] | None:
    """``topo-switch:s1,topo-block:b1``: the unit of the pair named ``topology``, else of the first
    pair (units carry no hierarchy). A node whose annotation lacks that topology is not placed."""
    raw = node.annotations.get(wk.ANNOTATION_SLINKY_TOPOLOGY)
    if raw is None:
        return None
    field = f"node {node.name} annotation {wk.ANNOTATION_SLINKY_TOPOLOGY}"
    pairs = []
    for pair in raw.split(","):
        topo, sep, unit = pair.partition(":")
        if not sep:
            raise BadInput.one(field, raw, "must be topology:unit[,topology:unit...]")
        pairs.append((confvalues.name(field, topo), confvalues.name(field, unit)))
    units = [unit for topo, unit in pairs if topology is None or topo == topology]
    return ((units[0],), node.name) if units else None


def placement_path(node: KubeNode, provider: Provider,
                   slinky_topology: str | None = None) -> tuple[tuple[str, ...], str] | None:
    """(levels outermost first, host) for ``node`` under ``provider``; None if it does not place it.
    ``slinky_topology`` picks the pair of a Slinky annotation (default: its first)."""
    if provider is Provider.GENERIC:
        return _generic(node)
    if provider is Provider.SLINKY:
        return _slinky(node, slinky_topology)
    profile = PROFILES[provider]
    levels: list[str] = []
    for level in profile.levels:
        value = node.labels.get(level.key)
        if value is None:
            if level.required:
                return None
            continue
        levels.append(_unit(node.name, level.key, value))
    host = node.name
    if profile.host_key and profile.host_key in node.labels:
        host = _unit(node.name, profile.host_key, node.labels[profile.host_key])
    return tuple(levels), host


def detect(nodes: Sequence[KubeNode], slinky_topology: str | None = None) -> Provider | None:
    """The first provider in AUTO_ORDER that places at least one node; None when none does."""
    for provider in AUTO_ORDER:
        for node in nodes:
            try:
                if placement_path(node, provider, slinky_topology) is not None:
                    return provider
            except BadInput:  # a malformed value still shows which provider labelled the node
                return provider
    return None
