"""Topology rendering at scale: 10,000 synthetic nodes to tree, block and topology.yaml (no Docker).

Each trial starts from the NodeList document, as `slurmpod topology render` does: parse, place,
lay out, render. The figure is the median of the trials; the issue's floor is under 1 s.
"""

from __future__ import annotations

import time
from typing import Any

from slurmpod import well_known as wk
from slurmpod.slurm_version import SlurmVersion
from slurmpod.topology import kube, sync
from slurmpod.topology.model import Format
from slurmpod_host.bench.report import Figure, Report, median

FLOOR_S = 1.0  # floor: rendering 10,000 nodes takes under 1 s
NODES_PER_SUBBLOCK = 16
SUBBLOCKS_PER_BLOCK = 25


def synthetic_nodes(count: int) -> dict[str, Any]:
    """A GKE-labelled NodeList: blocks of sub-blocks of NODES_PER_SUBBLOCK nodes each."""
    items = []
    for i in range(count):
        sub = i // NODES_PER_SUBBLOCK
        block = sub // SUBBLOCKS_PER_BLOCK
        labels = {wk.LABEL_GKE_BLOCK: f"blk{block}", wk.LABEL_GKE_SUBBLOCK: f"blk{block}-sb{sub}",
                  wk.LABEL_GKE_HOST: f"host{i}"}
        items.append({"kind": "Node", "metadata": {"name": f"gpu-{i:05d}", "labels": labels}})
    return {"apiVersion": "v1", "kind": "NodeList", "items": items}


CASES = (
    ("tree", Format.TREE, SlurmVersion(24, 11)),
    ("block", Format.BLOCK, SlurmVersion(24, 11)),
    ("yaml", Format.BLOCK, SlurmVersion(26, 5)),
)


def render_10k_nodes(report: Report | None = None, nodes: int = 10_000, trials: int = 5) -> list[Figure]:
    """One figure per format (median seconds over ``trials``), added to ``report`` when given."""
    doc = synthetic_nodes(nodes)
    figures = []
    for name, plugin, version in CASES:
        samples = []
        for _ in range(trials):
            started = time.perf_counter()
            text, _ = sync.render(kube.parse_nodes(doc), None, sync.Settings(plugin), version)
            samples.append(time.perf_counter() - started)
            if not text:
                raise AssertionError(f"topology {name}: empty rendering")
        value = median(samples)
        figure = Figure(name=f"topology render {name}, {nodes} nodes", unit="s", value=value,
                        floor=f"< {FLOOR_S:g} s", ok=value < FLOOR_S, samples=tuple(samples))
        figures.append(figure)
        if report is not None:
            report.add(figure)
    return figures
