"""deploy/: the Kubernetes manifests validate offline and keep the contract's names and env.

kubernetes-validate ships the Kubernetes JSON schemas inside the wheel (``kubernetes-json-schema/``),
so these checks need no network.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from slurmpod import well_known as wk
from slurmpod.errors import BadInput
from slurmpod_host.cluster import manifests

DEPLOY = manifests.default_dir()
BUNDLE = manifests.load(DEPLOY)
DOCS = BUNDLE.documents
STATEFULSETS = {d.name: d.body for d in BUNDLE.of_kind("StatefulSet")}
# The oldest schema kubernetes-validate ships and the newest: the manifests must hold for both.
K8S_VERSIONS = sorted({kubernetes_validate.utils.all_versions()[0],
                       kubernetes_validate.utils.latest_version()})


def _container(sts: Mapping[str, Any]) -> Mapping[str, Any]:
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    return container  # type: ignore[no-any-return]


def _env(sts: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {e["name"]: e for e in _container(sts).get("env", [])}


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("doc", DOCS, ids=[d.where for d in DOCS])
def test_validates_strictly(doc: manifests.Document, version: str) -> None:
    kubernetes_validate.validate(dict(doc.body), version, strict=True)


def test_schemas_are_local() -> None:
    schemas = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    assert any(schemas.glob("v*-local-strict/statefulset-apps-v1.json"))


def test_bundle_has_every_object() -> None:
    kinds = sorted((d.kind, d.name) for d in DOCS)
    assert kinds == [
        ("ClusterRole", "controller"),
        ("ClusterRoleBinding", "controller"),
        ("ConfigMap", "cluster"),
        ("ConfigMap", "policy"),
        ("NetworkPolicy", "controller"),
        ("NetworkPolicy", "login"),
        ("NetworkPolicy", "worker"),
        ("PersistentVolumeClaim", "home"),
        ("PodDisruptionBudget", "worker"),
        ("PriorityClass", "inference"),
        ("PriorityClass", "training"),
        ("Role", "controller"),
        ("RoleBinding", "controller"),
        ("Service", "login"),
        ("Service", "metrics"),
        ("Service", "slurm"),
        ("ServiceAccount", "controller"),
        ("StatefulSet", "controller"),
        ("StatefulSet", "login"),
        ("StatefulSet", "worker"),
    ]


def test_loader_strips_the_release_prefix_from_names_and_references() -> None:
    """The emulator sees base names; the rendered file has the release's (helm's) names."""
    raw = [d for d in yaml.safe_load_all((DEPLOY / "slurmpod.yaml").read_text()) if d]
    assert {d["metadata"]["name"] for d in raw} == {f"slurmpod-{d.name}" for d in DOCS}
    volumes = {v["name"]: v for v in STATEFULSETS["worker"]["spec"]["template"]["spec"]["volumes"]}
    assert volumes["home"]["persistentVolumeClaim"]["claimName"] == "home"
    assert STATEFULSETS["worker"]["spec"]["template"]["spec"]["priorityClassName"] == "training"
    assert BUNDLE.namespace == "slurmpod"


def test_service_is_headless_and_publishes_unready_pods() -> None:
    svc = BUNDLE.find("Service", "slurm")
    assert svc is not None
    assert svc.body["spec"]["clusterIP"] == "None"
    assert svc.body["spec"]["publishNotReadyAddresses"] is True
    for sts in STATEFULSETS.values():
        assert sts["spec"]["serviceName"] == svc.name


def test_manifests_ship_no_secret() -> None:
    """`kubectl apply -k` must never replace a key Secret the user created with an empty one."""
    assert BUNDLE.of_kind("Secret") == ()
    kust = (DEPLOY / "kustomization.yaml").read_text()
    assert "secretGenerator" not in kust


def test_controller_mounts_the_policy_where_the_plugin_reads_it() -> None:
    sts = STATEFULSETS["controller"]
    mounts = {m["name"]: m for m in _container(sts)["volumeMounts"]}
    volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    assert volumes["policy"]["configMap"]["name"] == "policy"
    assert (mounts["policy"]["mountPath"], mounts["policy"]["readOnly"]) == (str(Path(wk.POLICY_FILE).parent), True)
    cm = BUNDLE.find("ConfigMap", "policy")
    assert cm is not None and Path(wk.POLICY_FILE).name in cm.body["data"]


def test_configmap_holds_the_cluster_spec() -> None:
    cm = BUNDLE.find("ConfigMap", "cluster")
    assert cm is not None
    spec = yaml.safe_load(cm.body["data"]["cluster.yaml"])
    assert spec["auth"] == "munge"
    assert cm.body["data"][wk.CONFIG_MAP_KEY_AUTH] == spec["auth"]  # the two must agree
    assert spec["partitions"][0]["nodesets"] == ["workers"]
    (nodeset,) = spec["nodesets"]
    assert (nodeset["name"], nodeset["feature"], nodeset["statefulSet"]) == ("workers", "workers", "slurmpod-worker")
    assert nodeset["autoscaling"]["enabled"] is False  # the emulator has no API server to scale through


def test_shipped_partitions_are_the_policys_tiers() -> None:
    """Every partition the shipped policy names exists, and their PriorityTiers follow the tier order."""
    cm, policy_cm = BUNDLE.find("ConfigMap", "cluster"), BUNDLE.find("ConfigMap", "policy")
    assert cm is not None and policy_cm is not None
    tiers = {p["name"]: p for p in yaml.safe_load(cm.body["data"]["cluster.yaml"])["partitions"]}
    policy = yaml.safe_load(policy_cm.body["data"]["policy.yaml"])
    ranks = [max(tiers[name]["priorityTier"] for name in tier["partitions"]) for tier in policy["tiers"]]
    assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks), ranks
    assert tiers["preempt"]["preemptMode"] == "REQUEUE"


CONTRACT_FIELD_REFS = {
    wk.ENV_POD_NAME: "metadata.name",
    wk.ENV_POD_NAMESPACE: "metadata.namespace",
    wk.ENV_POD_UID: "metadata.uid",
    wk.ENV_NODE_NAME: "spec.nodeName",
    wk.ENV_POD_IP: "status.podIP",
    wk.ENV_HOST_IP: "status.hostIP",
    wk.ENV_CLUSTER_NAME: f"metadata.labels['{wk.LABEL_INSTANCE}']",
}
CONTRACT_RESOURCE_REFS = {
    wk.ENV_CPU_LIMIT: ("limits.cpu", "1m"),
    wk.ENV_MEMORY_LIMIT: ("limits.memory", "1Mi"),
    wk.ENV_CPU_REQUEST: ("requests.cpu", "1m"),
    wk.ENV_MEMORY_REQUEST: ("requests.memory", "1Mi"),
}


@pytest.mark.parametrize("name", sorted(STATEFULSETS))
def test_env_follows_the_contract(name: str) -> None:
    sts = STATEFULSETS[name]
    env = _env(sts)
    for var, path in CONTRACT_FIELD_REFS.items():
        assert env[var]["valueFrom"]["fieldRef"]["fieldPath"] == path, var
    for var, (resource, divisor) in CONTRACT_RESOURCE_REFS.items():
        assert env[var]["valueFrom"]["resourceFieldRef"] == {"resource": resource, "divisor": divisor}, var
    assert env[wk.ENV_CONTROLLER]["value"] == f"$({wk.ENV_CLUSTER_NAME})-controller-0"
    names = [e["name"] for e in _container(sts)["env"]]
    assert names.index(wk.ENV_CLUSTER_NAME) < names.index(wk.ENV_CONTROLLER)  # $(VAR) sees only earlier vars
    grace = sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert env[wk.ENV_GRACE_SECONDS]["value"] == str(grace)


@pytest.mark.parametrize("name", sorted(STATEFULSETS))
def test_pod_shape(name: str) -> None:
    sts = STATEFULSETS[name]
    pod = sts["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert labels[wk.LABEL_ROLE] == name
    assert sts["spec"]["selector"]["matchLabels"].items() <= labels.items()
    container = _container(sts)
    assert container["image"] == f"slurmpod/{name}:24.11"
    assert container["command"] == ["slurmpod", "entrypoint"]
    assert container["args"] == [name]
    assert container["readinessProbe"]["exec"]["command"] == ["slurmpod", "probe", "ready"]
    assert container["livenessProbe"]["exec"]["command"] == ["slurmpod", "probe", "live"]
    assert container["resources"]["limits"].keys() == {"cpu", "memory"}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert volumes[mounts[wk.PODINFO_DIR]["name"]]["downwardAPI"]["items"] == [
        {"path": wk.PODINFO_LABELS, "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": wk.PODINFO_ANNOTATIONS, "fieldRef": {"fieldPath": "metadata.annotations"}},
    ]
    for path, secret_name in ((wk.MUNGE_KEY_SECRET, wk.SECRET_MUNGE), (wk.SLURM_KEY_SECRET, wk.SECRET_SLURM_KEY)):
        key_dir = str(Path(path).parent)
        secret = volumes[mounts[key_dir]["name"]]["secret"]
        # optional: only the key of the cluster's auth type has to exist
        assert secret == {"secretName": secret_name, "defaultMode": 0o400, "optional": True}
        assert mounts[key_dir]["readOnly"] is True
    auth = _env(sts)[wk.ENV_AUTH]["valueFrom"]
    assert auth == {"configMapKeyRef": {"name": wk.CONFIG_MAP_CLUSTER, "key": wk.CONFIG_MAP_KEY_AUTH}}


def test_worker_specifics() -> None:
    sts = STATEFULSETS["worker"]
    container = _container(sts)
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    assert sts["spec"]["template"]["metadata"]["labels"][wk.LABEL_NODESET] == "workers"
    assert container["lifecycle"]["preStop"]["exec"]["command"] == ["slurmpod", "prestop"]
    assert {"requests", "limits"} <= container["resources"].keys()


@pytest.mark.parametrize("name", ["worker", "login"])
def test_home_is_the_shared_claim(name: str) -> None:
    sts = STATEFULSETS[name]
    volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in _container(sts)["volumeMounts"]}
    assert volumes[mounts["/home"]]["persistentVolumeClaim"] == {"claimName": "home"}


def test_controller_specifics() -> None:
    sts = STATEFULSETS["controller"]
    assert sts["spec"]["replicas"] == 1
    mounts = {m["mountPath"]: m["name"] for m in _container(sts)["volumeMounts"]}
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert mounts[wk.STATE_SAVE_LOCATION] == claim["metadata"]["name"]
    volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    assert volumes[mounts[str(Path(wk.CLUSTER_SPEC_FILE).parent)]]["configMap"] == {"name": "cluster"}


def test_chart_values_pin_the_same_images() -> None:
    values = yaml.safe_load((DEPLOY.parent / "helm" / "slurmpod" / "values.yaml").read_text())
    images = {"controller": values["controller"]["slurmctld"]["image"],
              "worker": values["nodesets"]["workers"]["slurmd"]["image"],
              "login": values["loginsets"]["login"]["login"]["image"]}
    for role, sts in STATEFULSETS.items():
        image = images[role]
        assert f"{image['repository']}:{image['tag']}" == _container(sts)["image"]
        assert image["digest"] == ""


def test_loader_reports_every_bad_document_at_once(tmp_path: Path) -> None:
    (tmp_path / manifests.KUSTOMIZATION).write_text("resources: [a.yaml, b.yaml]\nnamespace: ns\n")
    (tmp_path / "a.yaml").write_text(
        "- not a mapping\n---\nkind: Service\nmetadata: {name: ok}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: ''}\n")
    (tmp_path / "b.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fine}\n")
    with pytest.raises(BadInput) as exc:
        manifests.load(tmp_path)
    assert [(p.field, p.reason) for p in exc.value.problems] == [
        ("a.yaml[0]", "expected a mapping"),
        ("a.yaml[1]", "needs apiVersion, kind, metadata"),
        ("a.yaml[2].metadata.name", "required"),
    ]
