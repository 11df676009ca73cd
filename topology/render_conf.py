"""topology.conf for topology/tree and topology/block, from a Layout: same layout, same bytes.

Every line goes through confvalues.kv_line, the tripwire that refuses a key or value able to start
another key or line. Ref: https://slurm.schedmd.com/topology.conf.html
"""

from __future__ import annotations

from collections.abc import Sequence

from slurmpod import confvalues
from slurmpod.topology import hostlist
from slurmpod.topology.model import Layout

HEADER = "# Written by slurmpod topology from Kubernetes node labels; do not edit.\n"


def tree(layout: Layout) -> str:
    """One SwitchName= line per switch: Switches= for inner ones, Nodes= for leaves (parents first)."""
    lines = []
    for switch in layout.switches:
        pairs = [("SwitchName", switch.name)]
        if switch.switches:
            # Ref: https://slurm.schedmd.com/topology.conf.html#OPT_Switches
            pairs.append(("Switches", hostlist.compress(switch.switches)))
        if switch.nodes:
            # Ref: https://slurm.schedmd.com/topology.conf.html#OPT_Nodes
            pairs.append(("Nodes", hostlist.compress(switch.nodes)))
        lines.append(confvalues.kv_line(pairs))
    return HEADER + "".join(line + "\n" for line in lines)


def block(layout: Layout, sizes: Sequence[int]) -> str:
    """One BlockName= line per block, then BlockSizes= (already validated by blocksizes.validate)."""
    lines = [confvalues.kv_line([("BlockName", b.name), ("Nodes", hostlist.compress(b.nodes))])
             for b in layout.blocks]
    if sizes:
        # Ref: https://slurm.schedmd.com/topology.conf.html#OPT_BlockSizes
        lines.append(confvalues.kv_line([("BlockSizes", ",".join(str(s) for s in sizes))]))
    return HEADER + "".join(line + "\n" for line in lines)
