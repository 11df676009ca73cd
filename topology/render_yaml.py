"""topology.yaml (Slurm 25.05+): one topology, tree or block, from a Layout.

The file is a list of topologies, each starting with `topology:` (its name), then `cluster_default`,
then exactly one of `tree` (switches: switch, children, nodes) or `block` (block_sizes; blocks: block,
nodes). Written by hand, not by a YAML library, so the key order Slurm requires and the bytes are
fixed; every value is a validated name or hostlist, so none needs quoting.
Ref: https://slurm.schedmd.com/topology.yaml.html
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from slurmpod import confvalues
from slurmpod.topology import hostlist
from slurmpod.topology.model import UNPLACED_UNIT, Block, Format, Layout

HEADER = "# Written by slurmpod topology from Kubernetes node labels; do not edit.\n"
DEFAULT_NAME = "default"  # the name nodespec gives a bare Topology= unit (entrypoints/nodespec.py)


# Plain scalars YAML would read as a number, boolean or null: those are single-quoted.
# Ref: https://yaml.org/type/ (int, float, bool, null in YAML 1.1, which libyaml-based readers use)
_NOT_A_STRING = re.compile(r"[-+.0-9_eExXoObB:]+|(?i:y|n|yes|no|true|false|on|off|null|~|[-+]?\.inf|\.nan)")


def _value(text: str) -> str:
    """A scalar that YAML reads back as the same string; a tripwire for anything that is no plain name."""
    if not text or any(c in text for c in ":#'\"{}&*!|>%@`\n\r\t ") or text[0] in "-?[],":
        raise ValueError(f"value {text!r} would need YAML escaping")
    return f"'{text}'" if _NOT_A_STRING.fullmatch(text) else text


def render(layout: Layout, plugin: Format, sizes: Sequence[int] = (), *, name: str = DEFAULT_NAME,
           with_nodes: bool = True, listed: Collection[str] | None = None) -> str:
    """topology.yaml for ``plugin`` (TREE or BLOCK). ``with_nodes=False`` writes the units only: nodes
    then join them through their `Topology=` registration value (dynamic topology). ``listed`` limits
    the nodes written to those (the rest join by registration); None writes every node."""

    def shown(nodes: Sequence[str]) -> tuple[str, ...]:
        if not with_nodes:
            return ()
        return tuple(nodes) if listed is None else tuple(n for n in nodes if n in listed)

    topo = _value(confvalues.name("topology name", name))
    out = [HEADER, f"- topology: {topo}\n", "  cluster_default: true\n"]
    if plugin is Format.TREE:
        out.append("  tree:\n    switches:\n")
        for switch in layout.switches:
            out.append(f"      - switch: {_value(switch.name)}\n")
            if switch.switches:
                out.append(f"        children: {_value(hostlist.compress(switch.switches))}\n")
            if shown(switch.nodes):
                out.append(f"        nodes: {_value(hostlist.compress(shown(switch.nodes)))}\n")
    elif plugin is Format.BLOCK:
        out.append("  block:\n")
        blocks = layout.blocks
        if not blocks:
            # No node placed yet (a controller starting before any worker): Debian's slurmctld 26.05.5
            # exits on a block topology without blocks ("fatal: No blocks configured"), and on blocks
            # without nodes unless block_sizes is set. One empty block of base size 1 keeps it up.
            blocks, sizes = (Block(UNPLACED_UNIT, ()),), (1,)
        if sizes:
            out.append("    block_sizes:\n" + "".join(f"      - {int(s)}\n" for s in sizes))
        out.append("    blocks:\n")
        for b in blocks:
            out.append(f"      - block: {_value(b.name)}\n")
            if shown(b.nodes):
                out.append(f"        nodes: {_value(hostlist.compress(shown(b.nodes)))}\n")
    else:
        raise ValueError(f"topology.yaml holds a tree or a block topology, not {plugin}")
    return "".join(out)
