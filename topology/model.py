"""The types that cross module boundaries in slurmpod.topology."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Provider(enum.Enum):
    """Where a node's placement comes from. Precedence for `auto` is the order in providers.AUTO_ORDER."""

    GENERIC = "generic"  # slurmpod.io/topology label
    SLINKY = "slinky"  # topology.slinky.slurm.net/spec annotation
    TOPOGRAPH = "topograph"  # network.topology.nvidia.com/*
    GKE = "gke"  # cloud.google.com/gce-topology-*
    EKS = "eks"  # topology.k8s.aws/network-node-layer-N
    COREWEAVE = "coreweave"  # backend.coreweave.cloud/*
    NEBIUS = "nebius"  # topology.nebius.com/*


class Format(enum.Enum):
    """What to render. Ref: https://slurm.schedmd.com/topology.html"""

    TREE = "tree"  # topology.conf for topology/tree
    BLOCK = "block"  # topology.conf for topology/block
    YAML = "yaml"  # topology.yaml (25.05+), one topology of the plugin chosen by `yaml_plugin`


class Unplaced(enum.Enum):
    """What to do with a node no provider places."""

    OWN_BLOCK = "own-block"  # all such nodes share one block / leaf switch named UNPLACED_UNIT
    ERROR = "error"  # bad input naming the nodes


UNPLACED_UNIT = "unplaced"
ROOT_SWITCH = "root"  # joins several top-level switches so jobs may span them (topology/tree)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one Slurm node sits: switch levels outermost first, then the host it runs on."""

    node: str  # the Slurm node name (a worker pod, or the Kubernetes node in DaemonSet mode)
    levels: tuple[str, ...]  # network units, outermost first; the last one is the node's block/leaf
    host: str  # the physical or virtual host (provider's host label, else the Kubernetes node)

    @property
    def path(self) -> tuple[str, ...]:
        return (*self.levels, self.host)


@dataclass(frozen=True, slots=True)
class Switch:
    """One topology/tree switch: child switches or, for a leaf, nodes (sorted)."""

    name: str
    switches: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Block:
    """One topology/block block and its nodes (sorted)."""

    name: str
    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Layout:
    """Everything a renderer needs, already validated and sorted: same input, same bytes."""

    switches: tuple[Switch, ...]  # parents before children, siblings by name
    blocks: tuple[Block, ...]  # by name
    unit_of: tuple[tuple[str, str], ...]  # (node, leaf switch = block), by node

    def nodes(self) -> tuple[str, ...]:
        return tuple(node for node, _ in self.unit_of)
