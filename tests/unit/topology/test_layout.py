"""Provider precedence, unplaced nodes, unit names that would mean two things, registration values."""

from __future__ import annotations

from pathlib import Path

import podkit
import pytest
import topokit
from podkit import Machine

from slurmpod import hardware, podinfo
from slurmpod import well_known as wk
from slurmpod.entrypoints import nodespec
from slurmpod.errors import BadInput
from slurmpod.slurm_version import SlurmVersion
from slurmpod.topology import kube, layout, node_topology, providers
from slurmpod.topology.model import ROOT_SWITCH, Placement, Provider, Unplaced


def _nodes(*items: dict[str, object]) -> tuple[kube.KubeNode, ...]:
    return kube.parse_nodes(topokit.node_list(list(items)))


GKE = {wk.LABEL_GKE_BLOCK: "b1", wk.LABEL_GKE_SUBBLOCK: "sb1"}
TOPOGRAPH = {wk.LABEL_TOPOGRAPH_SPINE: "s2", wk.LABEL_TOPOGRAPH_BLOCK: "s1"}


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({**GKE, **TOPOGRAPH}, Provider.TOPOGRAPH),  # an admin's tool before what the cloud sets
        ({**GKE, wk.LABEL_TOPOLOGY: "x/y"}, Provider.GENERIC),  # slurmpod's own label first of all
        (GKE, Provider.GKE),
        ({wk.LABEL_GKE_BLOCK: "b1"}, None),  # a required level missing: GKE does not place it
    ],
    ids=["topograph-over-gke", "generic-over-all", "gke", "incomplete"],
)
def test_auto_precedence(labels: dict[str, str], expected: Provider | None) -> None:
    assert providers.detect(_nodes(topokit.node("n0", labels))) is expected


def test_optional_inner_level_used_where_present() -> None:
    nodes = _nodes(topokit.node("n0", {**TOPOGRAPH, wk.LABEL_TOPOGRAPH_ACCELERATOR: "nvl1"}),
                   topokit.node("n1", TOPOGRAPH))
    assert [providers.placement_path(n, Provider.TOPOGRAPH) for n in nodes] == [
        (("s2", "s1", "nvl1"), "n0"), (("s2", "s1"), "n1")]


@pytest.mark.parametrize(("value", "levels", "host"), [("b1/h3", ("b1",), "h3"), ("b1", ("b1",), "n0"),
                                                       ("sp/b1/h3", ("sp", "b1"), "h3"), ("default:b1", ("b1",), "n0")],
                         ids=["block-host", "block-only", "spine-block-host", "nodespec-topo-unit"])
def test_generic_label_is_levels_then_host(value: str, levels: tuple[str, ...], host: str) -> None:
    (node,) = _nodes(topokit.node("n0", {wk.LABEL_TOPOLOGY: value}))
    assert providers.placement_path(node, Provider.GENERIC) == (levels, host)


def test_gke_host_label_is_the_host() -> None:
    (node,) = _nodes(topokit.node("n0", {**GKE, wk.LABEL_GKE_HOST: "h9"}))
    assert providers.placement_path(node, Provider.GKE) == (("b1", "sb1"), "h9")


def test_unplaced_nodes_share_one_block_or_fail() -> None:
    placed = [Placement("n0", ("b1",), "n0")]
    lay = layout.build(placed, ["n2", "n1"], Unplaced.OWN_BLOCK)
    assert [(b.name, b.nodes) for b in lay.blocks] == [("b1", ("n0",)), ("unplaced", ("n1", "n2"))]
    assert lay.switches[0].name == ROOT_SWITCH and lay.switches[0].switches == ("b1", "unplaced")
    with pytest.raises(BadInput) as err:
        layout.build(placed, ["n2", "n1"], Unplaced.ERROR)
    assert [p.field for p in err.value.problems] == ["node n1", "node n2"]


@pytest.mark.parametrize(
    "placements",
    [
        [Placement("n0", ("sp1", "b1"), "n0"), Placement("n1", ("sp2", "b1"), "n1")],  # two parents
        [Placement("n0", ("sp1", "b1"), "n0"), Placement("n1", ("b1",), "n1")],  # two depths
        [Placement("n0", ("sp1", "b1"), "n0"), Placement("n1", ("sp1",), "n1")],  # leaf and parent
    ],
    ids=["two-parents", "two-depths", "leaf-and-parent"],
)
def test_a_unit_name_means_one_thing(placements: list[Placement]) -> None:
    with pytest.raises(BadInput, match=r"b1|sp1"):
        layout.build(placements, [], Unplaced.ERROR)


def test_pod_on_an_unknown_node_is_unplaced() -> None:
    nodes = _nodes(topokit.node("k0", GKE))
    pods = kube.parse_worker_pods(topokit.pod_list([topokit.pod("w-0", "k0"), topokit.pod("w-1", "gone")]))
    placed, unplaced = layout.placements(nodes, pods, Provider.GKE)
    assert placed == [Placement("w-0", ("b1", "sb1"), "k0")] and unplaced == ["w-1"]


@pytest.mark.parametrize(("version", "expected"), [("24.11", None), ("25.05", {"n0": "default:b1"}),
                                                   ("26.05", {"n0": "default:b1"})],
                         ids=["24.11-none", "25.05", "26.05"])
def test_registration_value_only_where_slurm_takes_it(version: str, expected: dict[str, str] | None) -> None:
    lay = layout.build([Placement("n0", ("sp", "b1"), "n0")], [], Unplaced.ERROR)
    assert node_topology.values(lay, SlurmVersion.parse(version)) == expected


def test_registration_value_is_what_a_worker_registers_with(tmp_path: Path) -> None:
    """The value, handed to the pod as Slinky's env (downward API), reaches slurmd's Topology= unchanged."""
    lay = layout.build([Placement("n0", ("sp", "b1"), "n0")], [], Unplaced.ERROR)
    values = node_topology.values(lay, SlurmVersion(26, 5))
    assert values is not None
    podkit.write_podinfo(tmp_path / "podinfo", podkit.worker_labels(), None)
    env = {wk.ENV_POD_NAME: podkit.POD, wk.ENV_CONTROLLER: podkit.CONTROLLER, wk.ENV_SLINKY_TOPOLOGY: values["n0"]}
    pod = podinfo.load(env, tmp_path / "podinfo")
    spec = nodespec.build(pod, hardware.probe(podkit.write_machine(tmp_path / "hw", Machine())), SlurmVersion(26, 5),
                          None)
    assert spec.topology == "default:b1" and "Topology=default:b1" in spec.conf_string()


@pytest.mark.parametrize(("topology", "expected"), [(None, (("s1",), "n0")), ("topo-block", (("b1",), "n0")),
                                                    ("topo-ring", None)],
                         ids=["first-pair", "named-pair", "absent-pair"])
def test_slinky_annotation_pair_choice(topology: str | None, expected: tuple[tuple[str, ...], str] | None) -> None:
    (node,) = _nodes(topokit.node("n0", annotations={wk.ANNOTATION_SLINKY_TOPOLOGY: "topo-switch:s1,topo-block:b1"}))
    assert providers.placement_path(node, Provider.SLINKY, topology) == expected
