"""The topology bench runs end to end on a small cluster (the figures themselves are `make bench`'s)."""

from __future__ import annotations

from slurmpod.topology import kube
from slurmpod_host.bench import topology
from slurmpod_host.bench.report import Report


def test_bench_reports_one_figure_per_format() -> None:
    report = Report()
    figures = topology.render_10k_nodes(report, nodes=100, trials=1)
    assert [f.name for f in figures] == [f"topology render {n}, 100 nodes" for n in ("tree", "block", "yaml")]
    assert report.figures == figures and all(len(f.samples) == 1 for f in figures)


def test_synthetic_nodes_are_grouped_in_subblocks() -> None:
    nodes = kube.parse_nodes(topology.synthetic_nodes(40))
    assert len(nodes) == 40
    assert len({n.labels["cloud.google.com/gce-topology-subblock"] for n in nodes}) == 3
