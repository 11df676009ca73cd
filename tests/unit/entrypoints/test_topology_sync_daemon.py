"""topology-sync (controller): what it reads from slurmctld, and that it reconfigures only on a change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes.slurm_client import FakeClock, FakeSlurm

from slurmpod import reasons
from slurmpod import well_known as wk
from slurmpod.entrypoints import cluster_spec, topology_sync
from slurmpod.errors import BadInput, TransientError
from slurmpod.nodestate import NodeState
from slurmpod.slurm_version import SlurmVersion
from slurmpod.topology import extra_placements
from slurmpod.topology.model import Provider

V24 = SlurmVersion(24, 11)
V26 = SlurmVersion(26, 5)


def _extra(value: str) -> str:
    return json.dumps({wk.EXTRA_TOPOLOGY_KEY: value})


def _spec(plugin: str, **topology: object) -> cluster_spec.ClusterSpec:
    return cluster_spec.parse({"topologyPlugin": plugin, "topology": topology})


def _target(tmp_path: Path, spec: cluster_spec.ClusterSpec, version: SlurmVersion) -> topology_sync.Target:
    tgt = topology_sync.target(spec, version)
    assert tgt is not None
    return topology_sync.Target(tmp_path / tgt.path.name, tgt.settings, tgt.version)


def _four(slurm: FakeSlurm) -> None:
    for i, block in enumerate(("b1", "b1", "b2", "b2")):
        slurm.add_node(f"w-{i}", extra=_extra(f"{block}/host{i}"))


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("", None),
        ("not json", None),
        ('["a list"]', None),
        ('{"site": "x"}', None),
        (_extra(""), None),
        (_extra("b1/h1"), "b1/h1"),
        (_extra("default:b1"), "default:b1"),
    ],
    ids=["none", "not-json", "not-an-object", "admins-own-extra", "empty", "path", "topo-unit"],
)
def test_placement_of(extra: str, expected: str | None) -> None:
    assert extra_placements.placement_of(NodeState("w-0", "IDLE", extra=extra)) == expected


def test_kube_nodes_label_placed_nodes_and_keep_the_rest_unplaced() -> None:
    nodes = extra_placements.kube_nodes([NodeState("w-1", "IDLE"), NodeState("w-0", "IDLE", extra=_extra("b1/h"))])
    assert [(n.name, dict(n.labels)) for n in nodes] == [("w-0", {wk.LABEL_TOPOLOGY: "b1/h"}), ("w-1", {})]


def test_no_plugin_no_target() -> None:
    assert topology_sync.target(cluster_spec.parse({}), V24) is None


def test_block_on_24_11_is_bad_input() -> None:
    with pytest.raises(BadInput) as err:
        topology_sync.target(_spec("block"), V24)
    assert (err.value.problems[0].field, err.value.problems[0].value) == ("topologyPlugin", "block")


@pytest.mark.parametrize(("version", "name"), [(V24, "topology.conf"), (V26, "topology.yaml")],
                         ids=["24.11-conf", "26.05-yaml"])
def test_the_file_each_version_reads(version: SlurmVersion, name: str) -> None:
    tgt = topology_sync.target(_spec("tree"), version)
    assert tgt is not None
    assert tgt.path == Path(wk.SLURM_ETC) / name
    assert tgt.settings.provider is Provider.GENERIC  # the slurm source carries the generic form


def test_api_source_uses_the_spec_provider() -> None:
    tgt = topology_sync.target(_spec("tree", source="api", provider="gke"), V24)
    assert tgt is not None
    assert tgt.settings.provider is Provider.GKE


@pytest.mark.parametrize(("version", "plugin"), [(V24, "tree"), (V26, "block"), (V26, "tree")],
                         ids=["24.11-tree", "26.05-block", "26.05-tree"])
def test_reconfigures_once_per_change(tmp_path: Path, version: SlurmVersion, plugin: str) -> None:
    slurm = FakeSlurm()
    tgt = _target(tmp_path, _spec(plugin), version)
    tgt.path.write_text(topology_sync.render_now(tgt, None))  # what pod start wrote: no nodes yet
    source = topology_sync.SlurmSource(slurm)
    _four(slurm)
    first = topology_sync.sync_once(slurm, tgt, source)
    assert first.changed
    assert len(slurm.called("reconfigure")) == 1
    text = tgt.path.read_text()
    assert "b1" in text and "b2" in text
    # 24.11 lists every node; from 25.05 placed nodes join by their own Topology= and are not listed.
    assert ("w-[0-1]" in text and "w-[2-3]" in text) is not version.node_topology
    assert not topology_sync.sync_once(slurm, tgt, source).changed  # nothing new: no reconfigure
    assert len(slurm.called("reconfigure")) == 1
    slurm.add_node("w-4", extra=_extra("b3/host4"))  # a pod came
    assert topology_sync.sync_once(slurm, tgt, source).changed
    assert "b3" in tgt.path.read_text()
    del slurm.nodes_by_name["w-4"]  # and went
    assert topology_sync.sync_once(slurm, tgt, source).changed
    assert tgt.path.read_text() == text
    assert len(slurm.called("reconfigure")) == 3


def test_a_failed_reconfigure_is_retried_on_the_next_pass(tmp_path: Path) -> None:
    """slurmctld away when the file changed: the old file is put back, so the next pass reconfigures."""
    slurm = FakeSlurm()
    tgt = _target(tmp_path, _spec("tree"), V24)
    empty = topology_sync.render_now(tgt, None)
    tgt.path.write_text(empty)
    source = topology_sync.SlurmSource(slurm)
    _four(slurm)
    slurm.fail["reconfigure"] = TransientError("reconfigure: Unable to contact slurm controller")
    with pytest.raises(TransientError):
        topology_sync.sync_once(slurm, tgt, source)
    assert tgt.path.read_text() == empty
    del slurm.fail["reconfigure"]
    assert topology_sync.sync_once(slurm, tgt, source).changed
    assert "b1" in tgt.path.read_text()
    assert len(slurm.called("reconfigure")) == 2  # the failed call, then the one that took


def test_24_11_tree_file_for_four_workers(tmp_path: Path) -> None:
    slurm = FakeSlurm()
    _four(slurm)
    tgt = _target(tmp_path, _spec("tree"), V24)
    topology_sync.sync_once(slurm, tgt, topology_sync.SlurmSource(slurm))
    lines = [line for line in tgt.path.read_text().splitlines() if not line.startswith("#")]
    assert lines == ["SwitchName=root Switches=b[1-2]", "SwitchName=b1 Nodes=w-[0-1]", "SwitchName=b2 Nodes=w-[2-3]"]


def test_node_without_placement_goes_to_the_unplaced_block(tmp_path: Path) -> None:
    slurm = FakeSlurm()
    slurm.add_node("w-0", extra=_extra("b1"))
    slurm.add_node("w-9")
    tgt = _target(tmp_path, _spec("tree"), V24)
    topology_sync.sync_once(slurm, tgt, topology_sync.SlurmSource(slurm))
    assert "SwitchName=unplaced Nodes=w-9" in tgt.path.read_text()


def test_bad_placement_keeps_the_file_and_the_loop_goes_on(tmp_path: Path) -> None:
    slurm = FakeSlurm()
    slurm.add_node("w-0", extra=_extra("b1 Nodes=x"))
    tgt = _target(tmp_path, _spec("tree"), V24)
    tgt.path.write_text("kept\n")
    assert topology_sync.run(slurm, tgt, topology_sync.SlurmSource(slurm), 5.0, FakeClock(), passes=2) == 0
    assert tgt.path.read_text() == "kept\n"
    assert not slurm.called("reconfigure")


def test_controller_down_skips_the_pass(tmp_path: Path) -> None:
    slurm = FakeSlurm()
    slurm.fail["nodes"] = TransientError("slurmctld restarting")
    tgt = _target(tmp_path, _spec("tree"), V24)
    clock = FakeClock()
    assert topology_sync.run(slurm, tgt, topology_sync.SlurmSource(slurm), 5.0, clock, passes=3) == 0
    assert not tgt.path.exists()
    assert not slurm.called("reconfigure")


def test_26_05_lists_unplaced_nodes_only(tmp_path: Path) -> None:
    slurm = FakeSlurm()
    slurm.add_node("w-0", extra=_extra("b1"))
    slurm.add_node("w-9")
    tgt = _target(tmp_path, _spec("block"), V26)
    topology_sync.sync_once(slurm, tgt, topology_sync.SlurmSource(slurm))
    text = tgt.path.read_text()
    assert "block: 'b1'\n" in text and "w-0" not in text
    assert "block: unplaced\n        nodes: w-9\n" in text
    assert not tgt.settings.list_placed
    api = topology_sync.target(_spec("block", source="api"), V26)
    assert api is not None and api.settings.list_placed  # API placements: pods register nothing themselves


def test_repair_sets_a_failed_registration_and_lifts_only_that_drain() -> None:
    """26.05.5 drains a node whose Topology= unit was not in topology.yaml yet; once the unit is there
    topology-sync sets the value and lifts that drain. Same value: never re-applied."""
    slurm = FakeSlurm()
    slurm.add_node("w-0", "IDLE", ("DYNAMIC_NORM", "DRAIN"), reasons.TOPOLOGY_FAILED.format("default:b1"),
                   extra=_extra("b1/host0"))
    slurm.add_node("w-1", extra=_extra("b1/host1"), topology="default:b1")  # registered fine
    slurm.add_node("w-2", "IDLE", ("DYNAMIC_NORM", "DRAIN"), "admin: bad cable", extra=_extra("b2/host2"))
    slurm.add_node("w-3")  # no placement
    fixed = topology_sync.repair_registrations(slurm, slurm.nodes())
    assert fixed == ["w-0", "w-2"]
    assert [args for args in slurm.called("resume")] == [("w-0",)]
    assert slurm.nodes_by_name["w-0"].topology == "default:b1"
    assert slurm.nodes_by_name["w-2"].reason == "admin: bad cable"  # someone else's drain stays
    assert topology_sync.repair_registrations(slurm, slurm.nodes()) == []  # nothing re-applied
