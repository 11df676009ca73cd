"""The per-node `Topology=` registration value (Slurm 25.05+): ``TOPOLOGY:UNIT``.

A dynamic node names the unit it joins (its block, or its leaf switch) in the topology of that name
in topology.yaml; it is the same ``topo:unit`` form Slinky's annotation carries and that
entrypoints/nodespec.py passes to `slurmd --conf`. Slurm 24.11 takes no such value: None there.
Ref: https://slurm.schedmd.com/topology.yaml.html ; https://slurm.schedmd.com/slurm.conf.html#OPT_Topology
"""

from __future__ import annotations

from slurmpod import confvalues
from slurmpod.slurm_version import SlurmVersion
from slurmpod.topology.model import Layout
from slurmpod.topology.render_yaml import DEFAULT_NAME


def values(layout: Layout, version: SlurmVersion, name: str = DEFAULT_NAME) -> dict[str, str] | None:
    """Slurm node -> its `Topology=` value, or None when this Slurm version takes none."""
    if not version.node_topology:
        return None
    topo = confvalues.name("topology name", name)
    return {node: f"{topo}:{unit}" for node, unit in layout.unit_of}
