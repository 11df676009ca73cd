"""k8s-sync's part of the cluster spec, and the program the controller supervises for it."""

from __future__ import annotations

from pathlib import Path

import podkit
import pytest

from slurmpod.entrypoints import cluster_spec
from slurmpod.entrypoints.cluster_spec import K8sSyncSpec
from slurmpod.errors import BadInput


def test_absent_is_off_with_the_documented_defaults() -> None:
    assert cluster_spec.parse({}).k8s_sync == K8sSyncSpec()
    assert K8sSyncSpec().enabled is False and K8sSyncSpec().restart_pod is False


def test_every_setting_is_read() -> None:
    spec = cluster_spec.parse({"k8sSync": {
        "enabled": True, "intervalSeconds": 2, "notReadyGraceSeconds": 0, "readySettleSeconds": 30,
        "remediation": {"restartPod": True, "replaceNode": True, "maxActions": 0, "perSeconds": 60}}}).k8s_sync
    assert spec == K8sSyncSpec(True, 2, 0, 30, True, True, 0, 60)


@pytest.mark.parametrize(("doc", "field", "value"), [
    ({"enabled": "yes"}, "k8sSync.enabled", "yes"),
    ({"intervalSeconds": 0}, "k8sSync.intervalSeconds", "0"),
    ({"notReadyGraceSeconds": -1}, "k8sSync.notReadyGraceSeconds", "-1"),
    ({"remediation": {"maxActions": "many"}}, "k8sSync.remediation.maxActions", "many"),
    ({"remediation": {"deleteNodes": True}}, "k8sSync.remediation.deleteNodes", "True"),
    ({"watchEverything": True}, "k8sSync.watchEverything", "True"),
], ids=["enabled-not-bool", "interval-zero", "grace-negative", "max-not-int", "unknown-remediation", "unknown-key"])
def test_bad_settings_name_the_field_and_value(doc: dict[str, object], field: str, value: str) -> None:
    with pytest.raises(BadInput) as err:
        cluster_spec.parse({"k8sSync": doc})
    assert field in str(err.value) and value in str(err.value)
    assert err.value.exit_code == 2


@pytest.mark.parametrize("enabled", [True, False])
def test_the_controller_supervises_k8s_sync_only_when_on(tmp_path: Path, enabled: bool) -> None:
    spec = podkit.SPEC_BASIC + f"k8sSync:\n  enabled: {str(enabled).lower()}\n"
    pod = podkit.make_pod(tmp_path, "controller", spec=spec)
    plan = podkit.plan("controller", pod.env("controller", SLURMPOD_CONTROLLER=None))
    progs = {p.name: p for p in plan.programs}
    assert ("k8s-sync" in progs) is enabled
    if enabled:
        assert "daemon k8s-sync" in progs["k8s-sync"].script
