"""Keeping the topology current as worker pods come and go, as pure code the controller calls.

Given what was rendered last time and the current nodes and pods, `plan` says whether anything
changed and what to do about it:
- Slurm 24.11: write topology.conf and `scontrol reconfigure` — only when the text changed.
- Slurm 25.05+ (26.05): topology.yaml holds the units. When the units are the same and only nodes
  moved, nodes take their unit from their `Topology=` registration value (REGISTER: update only the
  nodes listed); when units appear or go, rewrite topology.yaml and reconfigure.
Ref: https://slurm.schedmd.com/topology.html ; https://slurm.schedmd.com/topology.yaml.html
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from slurmpod.errors import BadInput
from slurmpod.slurm_version import SlurmVersion
from slurmpod.topology import blocksizes, hostlist, kube, layout, node_topology, providers, render_conf, render_yaml
from slurmpod.topology.model import Format, Provider, Unplaced


class Action(enum.Enum):
    NONE = "none"  # nothing changed
    RECONFIGURE = "reconfigure"  # write `text` (topology.conf or topology.yaml), then scontrol reconfigure
    # Same units: write `text` (kept for the next restart; no reconfigure needed) and give the listed
    # nodes their new Topology= value.
    REGISTER = "register"


@dataclass(frozen=True, slots=True)
class Settings:
    plugin: Format  # TREE or BLOCK: the plugin the cluster spec chose
    provider: Provider | None = None  # None: auto
    unplaced: Unplaced = Unplaced.OWN_BLOCK
    block_sizes: tuple[int, ...] = ()  # empty: blocksizes.default
    slinky_topology: str | None = None  # which pair of a Slinky annotation; None: the first
    # topology.yaml: list placed nodes too (a file for static nodes); False when each placed node
    # registers its own Topology= (the controller's slurm source on 25.05+)
    list_placed: bool = True


@dataclass(frozen=True, slots=True)
class Plan:
    changed: bool
    action: Action
    text: str  # the new topology.conf (24.11) or topology.yaml (25.05+)
    registrations: tuple[tuple[str, str], ...] = ()  # (node, Topology= value) to apply, for REGISTER


def render(nodes: Sequence[kube.KubeNode], pods: Sequence[kube.WorkerPod] | None, settings: Settings,
           version: SlurmVersion) -> tuple[str, dict[str, str] | None]:
    """The file text for this Slurm version, and the nodes' registration values (None before 25.05)."""
    provider = settings.provider or layout_provider(nodes, settings.slinky_topology)
    placed, unplaced = layout.placements(nodes, pods, provider, settings.slinky_topology)
    lay = layout.build(placed, unplaced, settings.unplaced)
    counts = [len(b.nodes) for b in lay.blocks]
    sizes = (blocksizes.validate(settings.block_sizes, counts) if settings.block_sizes
             else blocksizes.default(counts)) if settings.plugin is Format.BLOCK else ()
    if version.node_topology:
        # Without list_placed, a placed node registers its own `Topology=` (entrypoints/nodespec.py) and
        # joins its unit by it; the file lists only the units and the unplaced nodes. Listing a placed
        # node as well makes slurmctld re-apply the same block to it, which drops it from the aggregate
        # bitmap: block-aware placement then silently stops for it (reported for 25.11.3 to 26.05.3,
        # "topology_p_add_rm_node() ... no-op path"; scontrol show topology still looks right).
        listed = None if settings.list_placed else frozenset(unplaced)
        text = render_yaml.render(lay, settings.plugin, sizes, listed=listed)
        return text, node_topology.values(lay, version)
    if settings.plugin is Format.TREE:
        return render_conf.tree(lay), None
    return render_conf.block(lay, sizes), None


def layout_provider(nodes: Sequence[kube.KubeNode], slinky_topology: str | None = None) -> Provider:
    """`auto`: the detected provider; the generic label when no provider places any node."""
    return providers.detect(nodes, slinky_topology) or Provider.GENERIC


def _strip_nodes(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _strip_nodes(v) for k, v in doc.items() if k != "nodes"}
    if isinstance(doc, list):
        return [_strip_nodes(v) for v in doc]
    return doc


def _skeleton_and_members(text: str) -> tuple[Any, dict[str, str]]:
    """A topology.yaml slurmpod rendered without its node lists, and node -> unit."""
    doc: Any = yaml.safe_load(text) or []
    members: dict[str, str] = {}
    for topo in doc:
        entries = topo["tree"]["switches"] if "tree" in topo else topo["block"]["blocks"]
        for entry in entries:
            unit = str(entry.get("switch", entry.get("block")))
            for node in hostlist.expand(str(entry["nodes"])) if entry.get("nodes") else []:
                members[node] = unit
    return _strip_nodes(doc), members


def plan(previous: str | None, nodes: Sequence[kube.KubeNode], pods: Sequence[kube.WorkerPod] | None,
         settings: Settings, version: SlurmVersion) -> Plan:
    """What to do now, given the last text written (None: nothing written yet)."""
    text, values = render(nodes, pods, settings, version)
    if previous == text:
        return Plan(False, Action.NONE, text)
    if values is None or previous is None:
        return Plan(True, Action.RECONFIGURE, text)
    try:
        old_units, old_members = _skeleton_and_members(previous)
    except (yaml.YAMLError, KeyError, TypeError, AttributeError, BadInput):
        return Plan(True, Action.RECONFIGURE, text)  # not a file slurmpod wrote: replace it
    new_units, new_members = _skeleton_and_members(text)
    if old_units != new_units or set(old_members) - set(new_members):
        return Plan(True, Action.RECONFIGURE, text)  # units changed, or a node left: rewrite the file
    moved = tuple((node, values[node]) for node, unit in sorted(new_members.items()) if old_members.get(node) != unit)
    return Plan(True, Action.REGISTER, text, moved)
