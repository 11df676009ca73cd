"""Properties of the rendered topology for arbitrary clusters: every node exactly once, valid block
sizes, and no label value that can add a line or a key to topology.conf or topology.yaml."""

from __future__ import annotations

import itertools
import re

import pytest
import topokit
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmpod import well_known as wk
from slurmpod.errors import BadInput
from slurmpod.slurm_version import SlurmVersion
from slurmpod.topology import blocksizes, hostlist, kube, sync
from slurmpod.topology.model import Format, Provider

SETTINGS = settings(max_examples=150, deadline=None)
V24, V26 = SlurmVersion(24, 11), SlurmVersion(26, 5)

# A cluster: each node gets a spine, a block under it (blocks are named after their spine so the
# hierarchy is consistent) and maybe no label at all (unplaced).
CLUSTER = st.lists(
    st.one_of(st.none(), st.tuples(st.integers(0, 2), st.integers(0, 3))),
    min_size=1,
    max_size=40,
)


def _doc(cluster: list[tuple[int, int] | None]) -> dict[str, object]:
    items = []
    for i, place in enumerate(cluster):
        labels = {} if place is None else {wk.LABEL_TOPOLOGY: f"sp{place[0]}/b{place[0]}-{place[1]}/h{i}"}
        items.append(topokit.node(f"node-{i:02d}", labels))
    return topokit.node_list(items)


def _conf_nodes(text: str, key: str) -> list[str]:
    out: list[str] = []
    for line in text.splitlines():
        match = re.search(rf"\b{key}=(\S+)", line)
        if match:
            out.extend(hostlist.expand(match[1]))
    return out


def _yaml_nodes(text: str) -> list[str]:
    out: list[str] = []
    for topo in yaml.safe_load(text):
        entries = topo["tree"]["switches"] if "tree" in topo else topo["block"]["blocks"]
        out.extend(n for e in entries if "nodes" in e for n in hostlist.expand(e["nodes"]))
    return out


@SETTINGS
@given(CLUSTER)
def test_every_node_appears_exactly_once_in_every_format(cluster: list[tuple[int, int] | None]) -> None:
    nodes = kube.parse_nodes(_doc(cluster))
    expected = sorted(n.name for n in nodes)
    settings_ = sync.Settings
    tree, _ = sync.render(nodes, None, settings_(Format.TREE, Provider.GENERIC), V24)
    block, _ = sync.render(nodes, None, settings_(Format.BLOCK, Provider.GENERIC), V24)
    assert sorted(_conf_nodes(tree, "Nodes")) == expected
    assert sorted(_conf_nodes(block, "Nodes")) == expected
    for plugin in (Format.TREE, Format.BLOCK):
        text, values = sync.render(nodes, None, settings_(plugin, Provider.GENERIC), V26)
        assert sorted(_yaml_nodes(text)) == expected
        assert values is not None and sorted(values) == expected


@SETTINGS
@given(CLUSTER)
def test_default_block_sizes_follow_slurms_rules(cluster: list[tuple[int, int] | None]) -> None:
    nodes = kube.parse_nodes(_doc(cluster))
    text, _ = sync.render(nodes, None, sync.Settings(Format.BLOCK, Provider.GENERIC), V24)
    sizes = [int(s) for s in re.findall(r"^BlockSizes=(\S+)$", text, re.M)[0].split(",")]
    counts = [len(hostlist.expand(e)) for e in re.findall(r"^BlockName=\S+ Nodes=(\S+)$", text, re.M)]
    assert blocksizes.validate(sizes, counts) == tuple(sizes)
    assert sizes[0] == min(counts) and all(b == 2 * a for a, b in itertools.pairwise(sizes))


def _gke(subblock: str) -> dict[str, object]:
    return topokit.node_list([topokit.node("node-0", {wk.LABEL_GKE_BLOCK: "blk", wk.LABEL_GKE_SUBBLOCK: subblock}),
                              topokit.node("node-1", {wk.LABEL_GKE_BLOCK: "blk", wk.LABEL_GKE_SUBBLOCK: "sb1"})])


def _check_no_injection(value: str) -> None:
    """``value`` as a GKE sub-block label: refused naming node and label, or the benign shape exactly."""
    for plugin, version in ((Format.TREE, V24), (Format.BLOCK, V24), (Format.BLOCK, V26)):
        settings_ = sync.Settings(plugin, Provider.GKE)
        try:
            text, _ = sync.render(kube.parse_nodes(_gke(value)), None, settings_, version)
        except BadInput as exc:  # refused, naming the node and the label
            assert any(p.field in (f"node node-0 label {wk.LABEL_GKE_SUBBLOCK}", "node node-0 placement")
                       for p in exc.problems)
            continue
        benign, _ = sync.render(kube.parse_nodes(_gke("sb0" if value != "sb0" else "sb2")), None, settings_, version)
        lines, benign_lines = text.splitlines(), benign.splitlines()
        if value == "sb1":  # the same unit as node-1: one block fewer
            assert len(lines) < len(benign_lines)
            continue
        assert len(lines) == len(benign_lines)
        key = r"(?:^|\s)([A-Za-z_]+)[=:]"
        assert [re.findall(key, line) for line in lines] == [re.findall(key, line) for line in benign_lines]
        if version is V26:
            assert sorted(_yaml_nodes(text)) == ["node-0", "node-1"]


@SETTINGS
@given(st.lists(st.integers(1, 64), min_size=1, max_size=4), st.lists(st.integers(1, 64), min_size=1, max_size=6))
def test_validate_accepts_exactly_the_power_of_two_ladders(sizes: list[int], counts: list[int]) -> None:
    base = sizes[0]
    ladder = all(b > a and b % base == 0 and (b // base) & (b // base - 1) == 0
                 for a, b in itertools.pairwise(sizes))
    ok = ladder and base <= min(counts)
    try:
        blocksizes.validate(sizes, counts)
    except BadInput:
        assert not ok
    else:
        assert ok


@SETTINGS
@given(st.text(max_size=40))
def test_no_label_value_adds_a_line_or_a_key(value: str) -> None:
    _check_no_injection(value)


@pytest.mark.parametrize("value", ["blk", "a\nb", "x y", "x=y", "b#1", "root", "unplaced", "1", "true", "a:b"],
                         ids=["parent-name", "newline", "space", "equals", "hash", "root", "unplaced", "number",
                              "yaml-bool", "colon"])
def test_injection_examples(value: str) -> None:
    _check_no_injection(value)
