"""The generic placement value: ``slurmpod.io/topology`` on a Kubernetes node or a worker pod.

Two forms, both accepted wherever the value is read (a node's label, a worker pod's label or annotation,
Slinky's SLINKY_TOPOLOGY env):
- a path, outermost unit first, then the host: ``spine1/block1/host3``; one element is the unit only
  (``block1``), in the default topology;
- ``topo:unit``, the form of a Slurm 25.05+ node's `Topology=` value (and of Slinky's annotation):
  the unit ``unit`` of the topology named ``topo``.
Every part is a Slurm name (confvalues.name), so no value can add a key or a line to Slurm config.
Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_Topology ; https://slurm.schedmd.com/topology.yaml.html
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmpod import confvalues
from slurmpod.topology.render_yaml import DEFAULT_NAME


@dataclass(frozen=True, slots=True)
class Value:
    topology: str  # the topology the unit belongs to (DEFAULT_NAME for the path form)
    levels: tuple[str, ...]  # units, outermost first; the last is the node's block / leaf switch
    host: str | None  # the host named by the path form, else None

    @property
    def registration(self) -> str:
        """The `Topology=` registration value: ``topo:unit`` of the innermost unit."""
        return f"{self.topology}:{self.levels[-1]}"


def parse(field: str, raw: str) -> Value:
    """``a/b/host``, ``unit`` or ``topo:unit`` -> Value; BadInput naming ``field`` and the bad part."""
    text = raw.strip()
    if ":" in text:
        topo, _, unit = text.partition(":")
        return Value(confvalues.name(field, topo), (confvalues.name(field, unit),), None)
    parts = tuple(confvalues.name(field, part) for part in text.split("/"))
    if len(parts) == 1:
        return Value(DEFAULT_NAME, parts, None)
    return Value(DEFAULT_NAME, parts[:-1], parts[-1])
