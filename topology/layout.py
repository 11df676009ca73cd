"""Placements -> switches and blocks, with names checked and unplaced nodes handled by the flag.

A node's leaf switch (topology/tree) and its block (topology/block) are the innermost level of its
path. A unit name must mean one thing: the same name at two levels, or under two parents, is bad
input naming the node and the value. Several top-level switches get a common ROOT_SWITCH parent so a
job may span them. Ref: https://slurm.schedmd.com/topology.conf.html (All nodes in the network must be
connected to at least one switch.)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

from slurmpod import confvalues
from slurmpod.errors import BadInput, Problem
from slurmpod.topology import providers
from slurmpod.topology.kube import KubeNode, WorkerPod
from slurmpod.topology.model import ROOT_SWITCH, UNPLACED_UNIT, Block, Layout, Placement, Provider, Switch, Unplaced


def slurm_node_name(name: str, field: str) -> str:
    """A Slurm node name: a host name without a port (no character that a hostlist or config would split)."""
    confvalues.host(field, name)
    if ":" in name:
        raise BadInput.one(field, name, "not a valid node name (no ':')")
    return name


def placements(
    nodes: Sequence[KubeNode], pods: Sequence[WorkerPod] | None, provider: Provider,
    slinky_topology: str | None = None,
) -> tuple[list[Placement], list[str]]:
    """(placed Slurm nodes, unplaced Slurm node names). Slurm nodes are the worker pods when given."""
    problems: list[Problem] = []
    by_name = {node.name: node for node in nodes}
    pairs: list[tuple[str, KubeNode | None]]
    if pods is None:
        pairs = [(node.name, node) for node in nodes]
    else:
        pairs = [(pod.name, by_name.get(pod.node_name)) for pod in pods]
    placed: list[Placement] = []
    unplaced: list[str] = []
    for slurm_name, node in pairs:
        try:
            slurm_node_name(slurm_name, f"node {slurm_name}")
            path = None if node is None else providers.placement_path(node, provider, slinky_topology)
        except BadInput as exc:
            problems.extend(exc.problems)
            continue
        if path is None or not path[0]:
            unplaced.append(slurm_name)
        else:
            placed.append(Placement(slurm_name, path[0], path[1]))
    if problems:
        raise BadInput(problems)
    return placed, unplaced


def build(placed: Iterable[Placement], unplaced: Iterable[str], policy: Unplaced) -> Layout:
    """The sorted layout; BadInput for unplaced nodes under Unplaced.ERROR and for ambiguous names."""
    problems: list[Problem] = []
    rest = sorted(unplaced)
    if rest and policy is Unplaced.ERROR:
        raise BadInput([Problem(f"node {name}", "", "no topology label places this node (--unplaced error)")
                        for name in rest])
    items = sorted(placed, key=lambda p: p.node) + [Placement(n, (UNPLACED_UNIT,), n) for n in rest]
    parent_of: dict[str, str | None] = {}
    depth_of: dict[str, int] = {}
    leaf_nodes: dict[str, list[str]] = {}
    unit_of: list[tuple[str, str]] = []
    for item in items:
        parent: str | None = None
        for depth, unit in enumerate(item.levels):
            if unit in parent_of and (parent_of[unit] != parent or depth_of[unit] != depth):
                problems.append(Problem(f"node {item.node} placement", "/".join(item.levels),
                                        f"unit {unit!r} already sits elsewhere in the topology"))
                break
            parent_of[unit], depth_of[unit] = parent, depth
            parent = unit
        else:
            leaf = item.levels[-1]
            leaf_nodes.setdefault(leaf, []).append(item.node)
            unit_of.append((item.node, leaf))
    parents = set(parent_of.values())
    for leaf in sorted(leaf_nodes):
        if leaf in parents:
            problems.append(Problem("placement", leaf, "unit is both a leaf (holds nodes) and a parent switch"))
    tops = sorted(unit for unit, parent in parent_of.items() if parent is None)
    if len(tops) > 1 and ROOT_SWITCH in parent_of:
        problems.append(Problem("placement", ROOT_SWITCH, "reserved for the switch joining the top-level ones"))
    if problems:
        raise BadInput(problems)
    children: dict[str | None, list[str]] = {}
    for unit, parent in parent_of.items():
        children.setdefault(parent, []).append(unit)
    switches: list[Switch] = []
    if len(tops) > 1:
        switches.append(Switch(ROOT_SWITCH, switches=tuple(tops)))
    queue = deque(tops)
    while queue:  # breadth first: parents before children, siblings by name
        unit = queue.popleft()
        kids = tuple(sorted(children.get(unit, [])))
        switches.append(Switch(unit, switches=kids, nodes=tuple(sorted(leaf_nodes.get(unit, [])))))
        queue.extend(kids)
    blocks = tuple(Block(name, tuple(sorted(nodes))) for name, nodes in sorted(leaf_nodes.items()))
    return Layout(tuple(switches), blocks, tuple(sorted(unit_of)))
