"""topology.conf (tree, block) and topology.yaml per provider, pinned byte for byte.

Each provider's cluster (tests/unit/topokit.py, built from its published label docs) is also pinned as
golden/topology/<provider>/nodes.json, the input the CLI tests read. Regenerate after an intended
change with SLURMPOD_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import paths
import pytest
import topokit

from slurmpod.slurm_version import SlurmVersion
from slurmpod.topology import kube, sync
from slurmpod.topology.model import Format, Provider

GOLDEN = paths.UNIT / "golden" / "topology"
UPDATE = os.environ.get("SLURMPOD_UPDATE_GOLDEN") == "1"
OUTPUTS = {"tree.conf": (Format.TREE, SlurmVersion(24, 11)), "block.conf": (Format.BLOCK, SlurmVersion(24, 11)),
           "block.yaml": (Format.BLOCK, SlurmVersion(26, 5)), "tree.yaml": (Format.TREE, SlurmVersion(26, 5))}


def check(path: Path, text: str) -> None:
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} missing; run with SLURMPOD_UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(encoding="utf-8"), f"{path} changed; SLURMPOD_UPDATE_GOLDEN=1 to accept"


@pytest.mark.parametrize("provider", sorted(topokit.CLUSTERS), ids=sorted(topokit.CLUSTERS))
def test_nodes_fixture_is_pinned(provider: str) -> None:
    check(GOLDEN / provider / "nodes.json", json.dumps(topokit.nodes_doc(provider), indent=1, sort_keys=True) + "\n")


@pytest.mark.parametrize(("provider", "output"), [(p, o) for p in sorted(topokit.CLUSTERS) for o in OUTPUTS],
                         ids=[f"{p}-{o}" for p in sorted(topokit.CLUSTERS) for o in OUTPUTS])
def test_rendering_matches_golden(provider: str, output: str) -> None:
    plugin, version = OUTPUTS[output]
    nodes = kube.parse_nodes(topokit.nodes_doc(provider))
    text, _ = sync.render(nodes, None, sync.Settings(plugin), version)
    check(GOLDEN / provider / output, text)


@pytest.mark.parametrize("provider", sorted(topokit.CLUSTERS), ids=sorted(topokit.CLUSTERS))
def test_auto_detects_the_provider_that_labelled_the_nodes(provider: str) -> None:
    nodes = kube.parse_nodes(topokit.nodes_doc(provider))
    assert sync.layout_provider(nodes) is Provider(provider)


def test_same_input_in_any_order_gives_the_same_bytes() -> None:
    doc = topokit.nodes_doc("gke")
    shuffled = {**doc, "items": list(reversed(doc["items"]))}
    for plugin in (Format.TREE, Format.BLOCK):
        texts = {sync.render(kube.parse_nodes(d), None, sync.Settings(plugin), SlurmVersion(24, 11))[0]
                 for d in (doc, shuffled)}
        assert len(texts) == 1
