"""The sync plan: rewrite and reconfigure only when the topology changed; on 25.05+ move nodes by
their registration value when the units stay the same."""

from __future__ import annotations

import pytest
import topokit

from slurmpod import well_known as wk
from slurmpod.slurm_version import SlurmVersion
from slurmpod.topology import kube, sync
from slurmpod.topology.model import Format

V24, V26 = SlurmVersion(24, 11), SlurmVersion(26, 5)


def _cluster(*blocks: str) -> tuple[kube.KubeNode, ...]:
    """One Kubernetes node per entry, placed in that block under spine sp."""
    return kube.parse_nodes(topokit.node_list(
        [topokit.node(f"n{i}", {wk.LABEL_TOPOLOGY: f"sp/{b}/h{i}"}) for i, b in enumerate(blocks)]))


@pytest.mark.parametrize("plugin", [Format.TREE, Format.BLOCK], ids=["tree", "block"])
def test_24_11_rewrites_and_reconfigures_only_on_change(plugin: Format) -> None:
    settings = sync.Settings(plugin)
    first = sync.plan(None, _cluster("b1", "b1", "b2", "b2"), None, settings, V24)
    assert first.changed and first.action is sync.Action.RECONFIGURE and first.text.count("Nodes=") >= 2
    again = sync.plan(first.text, _cluster("b1", "b1", "b2", "b2"), None, settings, V24)
    assert (again.changed, again.action, again.text) == (False, sync.Action.NONE, first.text)
    moved = sync.plan(first.text, _cluster("b1", "b2", "b2", "b2"), None, settings, V24)
    assert moved.changed and moved.action is sync.Action.RECONFIGURE and moved.text != first.text


def test_26_05_same_units_moves_nodes_by_registration() -> None:
    settings = sync.Settings(Format.BLOCK, block_sizes=(1, 2))
    first = sync.plan(None, _cluster("b1", "b1", "b2", "b2"), None, settings, V26)
    assert first.action is sync.Action.RECONFIGURE
    moved = sync.plan(first.text, _cluster("b1", "b2", "b2", "b2"), None, settings, V26)
    assert moved.changed and moved.action is sync.Action.REGISTER
    assert moved.registrations == (("n1", "default:b2"),)


def test_26_05_new_node_in_a_known_block_registers() -> None:
    settings = sync.Settings(Format.TREE)
    first = sync.plan(None, _cluster("b1", "b2"), None, settings, V26)
    grown = sync.plan(first.text, _cluster("b1", "b2", "b2"), None, settings, V26)
    assert grown.action is sync.Action.REGISTER and grown.registrations == (("n2", "default:b2"),)


@pytest.mark.parametrize(
    ("before", "after"),
    [(("b1", "b2"), ("b1", "b3")), (("b1", "b2", "b2"), ("b1", "b2"))],
    ids=["new-unit", "node-left"],
)
def test_26_05_units_changed_or_node_left_rewrites_yaml(before: tuple[str, ...], after: tuple[str, ...]) -> None:
    settings = sync.Settings(Format.TREE)
    first = sync.plan(None, _cluster(*before), None, settings, V26)
    plan = sync.plan(first.text, _cluster(*after), None, settings, V26)
    assert plan.action is sync.Action.RECONFIGURE and plan.text.startswith("#")


def test_26_05_default_block_sizes_change_rewrites_yaml() -> None:
    settings = sync.Settings(Format.BLOCK)  # default sizes follow the smallest block
    first = sync.plan(None, _cluster("b1", "b1", "b2", "b2"), None, settings, V26)
    plan = sync.plan(first.text, _cluster("b1", "b2", "b2", "b2"), None, settings, V26)
    assert plan.action is sync.Action.RECONFIGURE


def test_a_file_slurmpod_did_not_write_is_replaced() -> None:
    plan = sync.plan("- [not: ours\n", _cluster("b1"), None, sync.Settings(Format.BLOCK), V26)
    assert plan.changed and plan.action is sync.Action.RECONFIGURE
