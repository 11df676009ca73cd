"""cluster.yaml `topology`: the controller's choice of source, provider, unplaced handling, block sizes."""

from __future__ import annotations

from typing import Any

import pytest

from slurmpod.entrypoints import cluster_spec
from slurmpod.entrypoints.cluster_spec import TopologySource, TopologySpec
from slurmpod.errors import BadInput
from slurmpod.topology.model import Provider, Unplaced


def test_defaults() -> None:
    assert cluster_spec.parse({}).topology == TopologySpec()
    assert cluster_spec.parse({"topology": None}).topology == TopologySpec(
        TopologySource.SLURM, None, Unplaced.OWN_BLOCK, (), None, 10)


def test_full() -> None:
    spec = cluster_spec.parse({"topologyPlugin": "block", "topology": {
        "source": "api", "provider": "eks", "unplaced": "error", "blockSizes": [2, 4, 16],
        "slinkyTopology": "topo-block", "syncIntervalSeconds": 30}})
    assert spec.topology == TopologySpec(TopologySource.API, Provider.EKS, Unplaced.ERROR, (2, 4, 16),
                                         "topo-block", 30)


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"source": "etcd"}, "topology.source"),
        ({"provider": "azure"}, "topology.provider"),
        ({"unplaced": "drop"}, "topology.unplaced"),
        ({"blockSizes": 4}, "topology.blockSizes"),
        ({"blockSizes": [4, 6]}, "topology.blockSizes"),
        ({"blockSizes": [0]}, "topology.blockSizes[0]"),
        ({"slinkyTopology": "a b"}, "topology.slinkyTopology"),
        ({"syncIntervalSeconds": 0}, "topology.syncIntervalSeconds"),
        ({"sync": 5}, "topology.sync"),
        ("tree", "topology"),
    ],
    ids=["source", "provider", "unplaced", "sizes-not-list", "sizes-not-doubling", "size-zero", "slinky-name",
         "interval-zero", "unknown-key", "not-a-mapping"],
)
def test_each_problem_names_its_field(doc: Any, field: str) -> None:
    with pytest.raises(BadInput) as err:
        cluster_spec.parse({"topologyPlugin": "block", "topology": doc})
    assert [p.field for p in err.value.problems] == [field]


def test_all_problems_at_once() -> None:
    with pytest.raises(BadInput) as err:
        cluster_spec.parse({"topology": {"source": "x", "provider": "y", "unplaced": "z"}})
    assert {p.field for p in err.value.problems} == {"topology.source", "topology.provider", "topology.unplaced"}
