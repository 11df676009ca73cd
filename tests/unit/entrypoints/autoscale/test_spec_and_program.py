"""The autoscaler's part of the cluster spec (per nodeset `statefulSet` and `autoscaling`), and the
program the controller supervises for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import podkit
import pytest

from slurmpod.entrypoints import cluster_spec
from slurmpod.entrypoints.autoscale import daemon
from slurmpod.entrypoints.cluster_spec import AutoscalingMode, AutoscalingSpec
from slurmpod.errors import BadInput

PART = [{"name": "main", "nodesets": ["gpu"]}]


def _spec(nodeset: dict[str, Any]) -> cluster_spec.ClusterSpec:
    return cluster_spec.parse({"nodesets": [{"name": "gpu", **nodeset}], "partitions": PART})


def test_absent_is_off_with_the_documented_defaults() -> None:
    (ns,) = cluster_spec.parse({}).nodesets
    assert (ns.stateful_set, ns.autoscaling) == ("", AutoscalingSpec())
    assert AutoscalingSpec() == AutoscalingSpec(False, AutoscalingMode.SLURMPOD, 0, 4, 300, 1)
    assert not AutoscalingSpec().by_slurmpod


def test_every_setting_is_read() -> None:
    (ns,) = _spec({"statefulSet": "slurm-worker-gpu", "autoscaling": {
        "enabled": True, "mode": "keda", "minReplicas": 1, "maxReplicas": 16, "idleSeconds": 0, "step": 4}}).nodesets
    assert ns.stateful_set == "slurm-worker-gpu"
    assert ns.autoscaling == AutoscalingSpec(True, AutoscalingMode.KEDA, 1, 16, 0, 4)
    assert not ns.autoscaling.by_slurmpod  # KEDA sets these replicas, not slurmpod


@pytest.mark.parametrize(("nodeset", "field", "value"), [
    ({"autoscaling": {"enabled": "yes"}}, "nodesets[0].autoscaling.enabled", "yes"),
    ({"autoscaling": {"mode": "hpa"}}, "nodesets[0].autoscaling.mode", "hpa"),
    ({"autoscaling": {"minReplicas": 5, "maxReplicas": 2}}, "nodesets[0].autoscaling.minReplicas", "5"),
    ({"autoscaling": {"minReplicas": -1}}, "nodesets[0].autoscaling.minReplicas", "-1"),
    ({"autoscaling": {"maxReplicas": 0}}, "nodesets[0].autoscaling.maxReplicas", "0"),
    ({"autoscaling": {"step": 0}}, "nodesets[0].autoscaling.step", "0"),
    ({"autoscaling": {"idleSeconds": -1}}, "nodesets[0].autoscaling.idleSeconds", "-1"),
    ({"autoscaling": {"idleSecs": 60}}, "nodesets[0].autoscaling.idleSecs", "60"),
    ({"autoscaling": "on"}, "nodesets[0].autoscaling", "on"),
    ({"autoscaling": {"enabled": True}}, "nodesets[0].statefulSet", "needed when autoscaling is enabled"),
    ({"statefulSet": "Slurm_Worker"}, "nodesets[0].statefulSet", "Slurm_Worker"),
    ({"replicas": 3}, "nodesets[0].replicas", "3"),
], ids=["enabled-not-bool", "mode-unknown", "min-above-max", "min-negative", "max-zero", "step-zero",
        "idle-negative", "unknown-key", "not-a-mapping", "enabled-without-statefulset", "statefulset-not-a-label",
        "unknown-nodeset-key"])
def test_bad_settings_name_the_field_and_value(nodeset: dict[str, Any], field: str, value: str) -> None:
    with pytest.raises(BadInput) as err:
        _spec(nodeset)
    assert f"{field}=" in str(err.value) and value in str(err.value)
    assert err.value.exit_code == 2


def test_max_nodes_below_the_autoscaled_nodesets_together_is_refused() -> None:
    """slurmctld refuses a dynamic node past MaxNodeCount: a spec that could never hold them all fails."""
    scaled = {"enabled": True, "maxReplicas": 600}
    nodesets = [{"name": n, "statefulSet": f"slurm-worker-{n}", "autoscaling": scaled} for n in ("gpu", "cpu")]
    raw = {"nodesets": nodesets, "partitions": [{"name": "main", "nodesets": ["gpu", "cpu"]}]}
    with pytest.raises(BadInput) as err:
        cluster_spec.parse(raw)  # 1024 by default, against 1200
    assert "maxNodes='1024'" in str(err.value) and "(1200)" in str(err.value) and err.value.exit_code == 2
    assert cluster_spec.parse({**raw, "maxNodes": 1200}).max_nodes == 1200


def test_every_problem_is_named_at_once() -> None:
    with pytest.raises(BadInput) as err:
        _spec({"autoscaling": {"enabled": True, "minReplicas": 9, "maxReplicas": 3, "step": 0, "idleSeconds": -5}})
    fields = {p.field for p in err.value.problems}
    assert {"nodesets[0].autoscaling.minReplicas", "nodesets[0].autoscaling.step",
            "nodesets[0].autoscaling.idleSeconds", "nodesets[0].statefulSet"} <= fields


def test_two_nodesets_may_not_share_a_statefulset() -> None:
    with pytest.raises(BadInput, match=r"statefulSet.*slurm-worker"):
        cluster_spec.parse({"nodesets": [{"name": "a", "statefulSet": "slurm-worker"},
                                         {"name": "b", "statefulSet": "slurm-worker"}],
                            "partitions": [{"name": "main", "nodesets": ["a", "b"]}]})


def test_only_slurmpod_mode_nodesets_are_managed() -> None:
    spec = cluster_spec.parse({"nodesets": [
        {"name": "a", "statefulSet": "s-worker-a", "autoscaling": {"enabled": True}},
        {"name": "b", "statefulSet": "s-worker-b", "autoscaling": {"enabled": True, "mode": "keda"}},
        {"name": "c", "statefulSet": "s-worker-c", "autoscaling": {"enabled": False}},
        {"name": "d"}], "partitions": [{"name": "main", "nodesets": ["a", "b", "c", "d"]}]})
    assert [ns.name for ns in daemon.managed(spec)] == ["a"]


@pytest.mark.parametrize(("autoscaling", "supervised"), [
    ("{enabled: true}", True), ("{enabled: true, mode: keda}", False), ("{enabled: false}", False), ("null", False)],
    ids=["slurmpod", "keda", "off", "absent"])
def test_the_controller_supervises_autoscale_only_for_slurmpod_mode(tmp_path: Path, autoscaling: str,
                                                                   supervised: bool) -> None:
    spec = podkit.SPEC_BASIC.replace(
        "  - {name: workers, feature: workers}",
        f"  - {{name: workers, feature: workers, statefulSet: slurmpod-worker, autoscaling: {autoscaling}}}")
    pod = podkit.make_pod(tmp_path, "controller", spec=spec)
    plan = podkit.plan("controller", pod.env("controller", SLURMPOD_CONTROLLER=None))
    progs = {p.name: p for p in plan.programs}
    assert ("autoscale" in progs) is supervised
    if supervised:
        assert "daemon autoscale" in progs["autoscale"].script


@pytest.mark.parametrize(("autoscaling", "shape", "kept"), [
    ({"enabled": True, "maxReplicas": 2}, {"cpu": "4", "memory": "8Gi"}, ("slurm-worker-gpu-0", "slurm-worker-gpu-1")),
    ({"enabled": True, "maxReplicas": 2}, {}, ()),  # shape unknown: no placeholder, no record kept
    ({"enabled": True, "mode": "keda", "maxReplicas": 2}, {"cpu": "4", "memory": "8Gi"}, ()),
    ({"enabled": False}, {"cpu": "4", "memory": "8Gi"}, ()),
], ids=["slurmpod-shaped", "slurmpod-unshaped", "keda", "off"])
def test_the_demand_shape_names_the_records_the_autoscaler_keeps(autoscaling: dict[str, Any], shape: dict[str, Any],
                                                                 kept: tuple[str, ...]) -> None:
    spec = _spec({"statefulSet": "slurm-worker-gpu", "autoscaling": autoscaling, "shape": shape})
    assert cluster_spec.demand_shape(spec, spec.nodesets[0]).kept == kept
