"""deploy/helm/slurmpod with the real helm (v4.1.4) and kubectl (v1.35.2) that scripts/bootstrap-host.sh
installs under .tools/bin: lint, render default values and variants, validate every rendered object
offline against the Kubernetes 1.30 and newest schemas, and keep deploy/kubernetes equal to the default
render (one source: what the emulator runs is what a user installs).
"""

from __future__ import annotations

import ipaddress
import subprocess
import uuid
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import helmkit
import kubernetes_validate
import paths
import pytest
import yaml

from slurmpod import well_known as wk
from slurmpod.entrypoints import cluster_spec, render
from slurmpod.errors import BadInput
from slurmpod_host.cluster import auth as cluster_auth
from slurmpod_host.cluster import manifests, podspec

ROOT = paths.REPO
CHART = helmkit.CHART
RENDERED = ROOT / "deploy" / "kubernetes" / "slurmpod.yaml"
RENDERED_ACCOUNTING = ROOT / "deploy" / "kubernetes" / "accounting" / "slurmpod.yaml"
HELM = helmkit.HELM
KUBECTL = ROOT / ".tools" / "bin" / "kubectl"
# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and the newest schema shipped.
K8S_VERSIONS = ["1.30.0", kubernetes_validate.utils.latest_version()]
DIGEST = "sha256:" + "ab" * 32

VARIANTS: dict[str, list[str]] = {
    "default": [],
    "digest": [f"--set=controller.slurmctld.image.digest={DIGEST}",
               f"--set=nodesets.workers.slurmd.image.digest={DIGEST}",
               f"--set=loginsets.login.login.image.digest={DIGEST}"],
    "scaled": ["--set=nodesets.workers.replicas=8",
               "--set=nodesets.gpu.enabled=true", "--set=nodesets.gpu.replicas=4",
               "--set=nodesets.gpu.priorityClass=inference",
               "--set=nodesets.gpu.terminationGracePeriodSeconds=120",
               "--set=nodesets.gpu.slurmd.image.repository=slurmpod/worker",
               "--set=nodesets.gpu.slurmd.image.tag=24.11",
               "--set=nodesets.gpu.disruptionBudget.enabled=true",
               "--set=nodesets.gpu.disruptionBudget.maxUnavailable=2",
               "--set-string=nodesets.gpu.slurmd.env.PMIX_MCA_gds=shmem2\\,hash",
               "--set=nodesets.gpu.slurmd.env.UCX_LOG_LEVEL=warn"],
    "autoscale": ["--set=k8sSync.enabled=false", "--set=nodesets.workers.autoscaling.enabled=true",
                  "--set=nodesets.workers.autoscaling.maxReplicas=8", "--set=nodesets.workers.autoscaling.step=2",
                  "--set=nodesets.gpu.enabled=true", "--set=nodesets.gpu.replicas=4",
                  "--set=nodesets.gpu.priorityClass=inference", "--set=nodesets.gpu.terminationGracePeriodSeconds=120",
                  "--set=nodesets.gpu.slurmd.image.repository=slurmpod/worker",
                  "--set=nodesets.gpu.slurmd.image.tag=24.11", "--set=nodesets.gpu.disruptionBudget.enabled=false",
                  "--set=nodesets.gpu.autoscaling.enabled=true", "--set=nodesets.gpu.autoscaling.mode=keda",
                  "--set=nodesets.gpu.autoscaling.minReplicas=1",
                  "--set=metrics.prometheusAddress=http://prometheus.monitoring:9090"],
    "no-k8s-sync": ["--set=k8sSync.enabled=false", "--set=nodesets.workers.disruptionBudget.maxUnavailable=2"],
    "remediation": ["--set=k8sSync.remediation.restartPod=true", "--set=k8sSync.remediation.replaceNode=true"],
    "policy-lua": ["--set=cluster.policy=lua"],
    "cgroup-v1": ["--set=cluster.cgroups=true", "--set=nodesets.workers.cgroup.access=hostV1",
                  "--set=nodesets.workers.cgroup.acceptNodeRootEquivalent=true"],
    "cgroup-v2": ["--set=cluster.cgroups=true", "--set=nodesets.workers.cgroup.access=delegatedV2"],
    "topology": ["--set=cluster.topologyPlugin=tree", "--set=cluster.topology.source=api",
                 "--set=topology.apiAccess=true", "--set=policy.topology.plugin=tree"],
    "accounting": ["--set=accounting.enabled=true", "--set=restapi.enabled=true",
                   f"--set=accounting.slurmdbd.image.digest={DIGEST}",
                   f"--set=restapi.slurmrestd.image.digest={DIGEST}"],
    "sssd": ["--set=sssd.enabled=true", "--set=sssd.secretName=ldap-sssd", "--set=sssd.caConfigMap=ldap-ca",
             "--set=restapi.enabled=true", "--set=accounting.enabled=true"],
}


_helm, _template = helmkit.helm, helmkit.template


RENDERS = {name: _template(*args) for name, args in VARIANTS.items()}
# Custom resources have no schema in kubernetes-validate: test_helm_metrics.py checks them field by field.
CUSTOM_KINDS = {"ScaledObject", "ServiceMonitor"}
CASES = [(name, i) for name, docs in RENDERS.items() for i in range(len(docs)) if docs[i]["kind"] not in CUSTOM_KINDS]


def _find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


@pytest.mark.parametrize("args", [[], ["--set=accounting.enabled=true", "--set=restapi.enabled=true"]],
                         ids=["default", "accounting-restapi"])
def test_lint_strict(args: list[str]) -> None:
    done = _helm("lint", "--strict", str(CHART), *args)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize(("variant", "index"), CASES,
                         ids=[f"{n}-{RENDERS[n][i]['kind']}-{RENDERS[n][i]['metadata']['name']}" for n, i in CASES])
def test_every_object_validates_strictly(variant: str, index: int, version: str) -> None:
    kubernetes_validate.validate(RENDERS[variant][index], version, strict=True)


def test_deploy_kubernetes_is_the_default_render(tmp_path: Path) -> None:
    """Fails when the chart and the committed manifests drift: run `make manifests` and commit."""
    out, out_acct = tmp_path / "slurmpod.yaml", tmp_path / "accounting.yaml"
    subprocess.run([str(ROOT / "scripts" / "render-manifests.sh"), str(out), str(out_acct)], check=True,
                   timeout=60)
    assert out.read_text() == RENDERED.read_text(), "deploy/kubernetes is stale: run `make manifests`"
    assert out_acct.read_text() == RENDERED_ACCOUNTING.read_text(), \
        "deploy/kubernetes/accounting is stale: run `make manifests`"


def test_accounting_and_restapi_workloads_when_enabled() -> None:
    docs = RENDERS["accounting"]
    images = {n: _find(docs, "StatefulSet", f"slurmpod-{n}")["spec"]["template"]["spec"]["containers"][0]["image"]
              for n in ("db", "accounting", "restapi")}
    assert images == {"db": "slurmpod/accounting:24.11", "accounting": f"slurmpod/accounting@{DIGEST}",
                      "restapi": f"slurmpod/restapi@{DIGEST}"}
    assert _find(docs, "Service", "slurmpod-restapi")["spec"]["ports"][0]["port"] == 6820
    spec = yaml.safe_load(_find(docs, "ConfigMap", "slurmpod-cluster")["data"]["cluster.yaml"])
    assert spec["accounting"]["enabled"] is True and spec["restapi"] == {"enabled": True}
    assert [q["name"] for q in spec["accounting"]["qos"]] == ["low", "urgent"]
    # every user who submits there has an association, and the QoS the accounting tests ask for
    parsed = cluster_spec.parse(spec).accounting
    assert {(a.name, u) for a in parsed.accounts for u in a.users} == {("research", "researcher"),
                                                                      ("inference", "researcher")}
    assert parsed.accounts[0].name == "research" and {"low", "urgent"} <= set(parsed.accounts[0].qos)
    ctl = _find(docs, "StatefulSet", "slurmpod-controller")["spec"]["template"]["spec"]
    secrets = {v["secret"]["secretName"] for v in ctl["volumes"] if "secret" in v}
    assert "slurmpod-jwt-key" in secrets
    db = _find(docs, "StatefulSet", "slurmpod-db")["spec"]["template"]["spec"]
    assert {v["secret"]["secretName"] for v in db["volumes"] if "secret" in v} == {"slurmpod-db-password"}
    # off by default: none of it in the default render
    default = {(d["kind"], d["metadata"]["name"]) for d in RENDERS["default"]}
    assert not default & {("StatefulSet", "slurmpod-db"), ("StatefulSet", "slurmpod-accounting"),
                          ("StatefulSet", "slurmpod-restapi"), ("Service", "slurmpod-restapi")}


def test_kustomization_builds_the_same_objects() -> None:
    done = subprocess.run([str(KUBECTL), "kustomize", str(RENDERED.parent)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    key = lambda d: (d["kind"], d["metadata"]["name"])  # noqa: E731
    assert sorted(map(key, filter(None, yaml.safe_load_all(done.stdout)))) == sorted(map(key, RENDERS["default"]))


def test_digest_wins_over_tag() -> None:
    docs = RENDERS["digest"]
    for sts in ("slurmpod-controller", "slurmpod-worker", "slurmpod-login"):
        (container,) = _find(docs, "StatefulSet", sts)["spec"]["template"]["spec"]["containers"]
        assert container["image"].endswith(f"@{DIGEST}") and ":24.11" not in container["image"]


def test_scaled_nodesets_get_their_own_statefulset_budget_and_slurm_nodeset() -> None:
    docs = RENDERS["scaled"]
    assert _find(docs, "StatefulSet", "slurmpod-worker")["spec"]["replicas"] == 8
    gpu = _find(docs, "StatefulSet", "slurmpod-worker-gpu")
    assert gpu["spec"]["replicas"] == 4
    assert gpu["spec"]["template"]["spec"]["priorityClassName"] == "slurmpod-inference"
    assert gpu["spec"]["template"]["metadata"]["labels"]["slurmpod.io/nodeset"] == "gpu"
    # k8s-sync is on: each nodeset's budget protects its busy workers only, whatever maxUnavailable says.
    pdb = _find(docs, "PodDisruptionBudget", "slurmpod-worker-gpu")["spec"]
    assert pdb["maxUnavailable"] == 0
    assert pdb["selector"]["matchLabels"]["slurmpod.io/slurm-state"] == "allocated"
    assert pdb["selector"]["matchLabels"]["slurmpod.io/nodeset"] == "gpu"
    spec = yaml.safe_load(_find(docs, "ConfigMap", "slurmpod-cluster")["data"]["cluster.yaml"])
    assert [(n["name"], n["feature"], n["statefulSet"]) for n in spec["nodesets"]] == [
        ("gpu", "gpu", "slurmpod-worker-gpu"), ("workers", "workers", "slurmpod-worker")]
    assert not any(n.autoscaling.enabled for n in cluster_spec.parse(spec).nodesets)  # off unless asked


@pytest.mark.parametrize(("args", "max_nodes"), [
    ([], 1024),
    (["--set=nodesets.workers.replicas=2100"], 2100),
    # autoscaled: its maxReplicas counts, not the replicas it starts at
    (["--set=nodesets.workers.autoscaling.enabled=true", "--set=nodesets.workers.autoscaling.maxReplicas=3000"], 3000),
    (["--set=cluster.maxNodes=5000"], 5000),
])
def test_max_node_count_covers_every_nodesets_pods(args: list[str], max_nodes: int) -> None:
    """slurmctld refuses a dynamic node past MaxNodeCount: the chart's spec holds them all."""
    done = _helm("template", "slurmpod", str(CHART), *args)
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    spec = cluster_spec.parse(yaml.safe_load(_find(docs, "ConfigMap", "slurmpod-cluster")["data"]["cluster.yaml"]))
    assert spec.max_nodes == max_nodes
    assert f"MaxNodeCount={max_nodes}\n" in render.slurm_conf(spec, "slurmpod-controller-0")


def test_a_nodesets_slurmd_env_follows_the_charts_own_in_that_nodeset_only() -> None:
    docs = RENDERS["scaled"]
    env_of = {name: _find(docs, "StatefulSet", name)["spec"]["template"]["spec"]["containers"][0]["env"]
              for name in ("slurmpod-worker-gpu", "slurmpod-worker")}
    gpu = [(e["name"], e.get("value")) for e in env_of["slurmpod-worker-gpu"]]
    assert gpu[-2:] == [("PMIX_MCA_gds", "shmem2,hash"), ("UCX_LOG_LEVEL", "warn")]
    assert [n for n, _ in gpu[:-2]] == [e["name"] for e in env_of["slurmpod-worker"]]  # the chart's, first
    assert "PMIX_MCA_gds" not in {e["name"] for e in env_of["slurmpod-worker"]}


def _shm(docs: list[dict[str, Any]], statefulset: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumeMounts at /dev/shm, the volumes they name) of a worker StatefulSet."""
    pod = _find(docs, "StatefulSet", statefulset)["spec"]["template"]["spec"]
    mounts = [m for m in pod["containers"][0]["volumeMounts"] if m["mountPath"] == "/dev/shm"]
    names = {m["name"] for m in mounts}
    return mounts, [v for v in pod["volumes"] if v["name"] in names]


def test_every_nodeset_gets_a_memory_backed_dev_shm_sized_by_its_values() -> None:
    """Not the container runtime's 64 MiB: an emptyDir in memory, the pod's memory limit unless sizeLimit."""
    gpu = [a for a in VARIANTS["scaled"] if ".gpu." in a]
    cpu = [a.replace(".gpu.", ".cpu.") for a in gpu]
    docs = _template(*gpu, "--set=nodesets.gpu.sharedMemory.sizeLimit=64Gi",
                     *cpu, "--set=nodesets.cpu.sharedMemory.enabled=false")
    mounts, volumes = _shm(docs, "slurmpod-worker")
    assert len(mounts) == 1 and volumes == [{"name": mounts[0]["name"], "emptyDir": {"medium": "Memory"}}]
    mounts, volumes = _shm(docs, "slurmpod-worker-gpu")  # a nodeset that does not name sharedMemory gets it too
    assert volumes == [{"name": mounts[0]["name"], "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}}]
    assert _shm(docs, "slurmpod-worker-cpu") == ([], [])
    for kind, name in [("StatefulSet", "slurmpod-controller"), ("StatefulSet", "slurmpod-login")]:
        pod = _find(docs, kind, name)["spec"]["template"]["spec"]
        assert all(m["mountPath"] != "/dev/shm" for m in pod["containers"][0].get("volumeMounts", []))


def test_autoscaling_reaches_the_cluster_spec_and_each_nodeset_names_its_statefulset() -> None:
    docs = RENDERS["autoscale"]
    spec = cluster_spec.parse(yaml.safe_load(_find(docs, "ConfigMap", "slurmpod-cluster")["data"]["cluster.yaml"]))
    by_name = {n.name: n for n in spec.nodesets}
    assert by_name["workers"].autoscaling == cluster_spec.AutoscalingSpec(
        enabled=True, mode=cluster_spec.AutoscalingMode.SLURMPOD, min_replicas=0, max_replicas=8, idle_seconds=300,
        step=2)
    assert by_name["gpu"].autoscaling.mode is cluster_spec.AutoscalingMode.KEDA
    for ns in spec.nodesets:  # the spec names the StatefulSet the chart made for the nodeset
        sts = _find(docs, "StatefulSet", ns.stateful_set)
        assert sts["spec"]["template"]["metadata"]["labels"]["slurmpod.io/nodeset"] == ns.name


@pytest.mark.parametrize("variant", ["autoscale", "default"])
def test_only_a_nodeset_slurmpods_autoscaler_keeps_placeholders_for_claims_them(variant: str) -> None:
    """Its pods delete their placeholder before slurmd starts; any other pod would only wait for the claim."""
    docs = RENDERS[variant]
    spec = cluster_spec.parse(yaml.safe_load(_find(docs, "ConfigMap", "slurmpod-cluster")["data"]["cluster.yaml"]))
    claims = {}
    for ns in spec.nodesets:
        env = _find(docs, "StatefulSet", ns.stateful_set)["spec"]["template"]["spec"]["containers"][0]["env"]
        claims[ns.name] = {e["name"]: e.get("value") for e in env}[wk.ENV_CLAIM_PLACEHOLDER]
    assert claims == {ns.name: "true" if ns.autoscaling.by_slurmpod else "false" for ns in spec.nodesets}
    assert ("true" in claims.values()) is (variant == "autoscale")


def test_an_autoscaled_statefulset_starts_at_min_replicas() -> None:
    """`helm template` has no cluster to look the live count up in: a new StatefulSet starts at minReplicas,
    whatever `replicas` says; a nodeset without autoscaling keeps `replicas`."""
    docs = RENDERS["autoscale"]
    assert _find(docs, "StatefulSet", "slurmpod-worker")["spec"]["replicas"] == 0
    assert _find(docs, "StatefulSet", "slurmpod-worker-gpu")["spec"]["replicas"] == 1
    assert _find(RENDERS["default"], "StatefulSet", "slurmpod-worker")["spec"]["replicas"] == 2


def test_autoscaling_alone_gives_the_controller_its_account_and_only_the_scale_of_its_statefulsets() -> None:
    docs = RENDERS["autoscale"]
    pod = _find(docs, "StatefulSet", "slurmpod-controller")["spec"]["template"]["spec"]
    assert (pod["serviceAccountName"], pod["automountServiceAccountToken"]) == ("slurmpod-controller", True)
    # k8s-sync and the API topology are off: no Nodes, no pods; KEDA's nodeset is KEDA's to scale
    assert _rules_of(docs) == {("Role", "slurmpod", "statefulsets/scale"): ["get", "patch", "update"],
                               ("Role", "slurmpod", "statefulsets"): ["get"]}
    (role,) = [d for d in docs if d["kind"] == "Role"]
    assert [(r["apiGroups"], r["resourceNames"]) for r in role["rules"]] == [(["apps"], ["slurmpod-worker"])] * 2
    assert not [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    controller_policy = _find(docs, "NetworkPolicy", "slurmpod-controller")["spec"]
    assert any({p["port"] for p in rule["ports"]} == {443, 6443} for rule in controller_policy["egress"])
    # KEDA mode alone needs no API access of the controller
    keda = _template("--set=k8sSync.enabled=false", "--set=nodesets.workers.autoscaling.enabled=true",
                     "--set=nodesets.workers.autoscaling.mode=keda",
                     "--set=metrics.prometheusAddress=http://prometheus.monitoring:9090")
    assert not [d for d in keda if d["kind"] in ("ServiceAccount", "Role", "ClusterRole")]
    assert _rules_of(_template("--set=rbac.create=false", "--set=nodesets.workers.autoscaling.enabled=true")) == {}


def test_without_k8s_sync_the_budget_is_max_unavailable_and_the_controller_has_no_api_access() -> None:
    docs = RENDERS["no-k8s-sync"]
    pdb = _find(docs, "PodDisruptionBudget", "slurmpod-worker")["spec"]
    assert pdb["maxUnavailable"] == 2 and "slurmpod.io/slurm-state" not in pdb["selector"]["matchLabels"]
    pod = _find(docs, "StatefulSet", "slurmpod-controller")["spec"]["template"]["spec"]
    assert "serviceAccountName" not in pod and pod["automountServiceAccountToken"] is False
    assert not [d for d in docs if d["kind"] in ("ServiceAccount", "ClusterRole", "Role")]
    spec = yaml.safe_load(_find(docs, "ConfigMap", "slurmpod-cluster")["data"]["cluster.yaml"])
    assert spec["k8sSync"]["enabled"] is False


def test_k8s_sync_settings_reach_the_cluster_spec_and_parse() -> None:
    text = _find(RENDERS["remediation"], "ConfigMap", "slurmpod-cluster")["data"]["cluster.yaml"]
    parsed = cluster_spec.parse(yaml.safe_load(text)).k8s_sync
    assert parsed == cluster_spec.K8sSyncSpec(enabled=True, interval_seconds=5, not_ready_grace_seconds=60,
                                              ready_settle_seconds=10, restart_pod=True, replace_node=True,
                                              max_remediations=3, remediation_window_seconds=3600)


@pytest.mark.parametrize(
    ("args", "spec", "port"),
    [([], cluster_spec.MetricsSpec(enabled=True, poll_seconds=15), 9401),
     (["--set=metrics.pollSeconds=60", "--set=metrics.port=9500"], cluster_spec.MetricsSpec(True, 60), 9500),
     (["--set=metrics.enabled=false"], cluster_spec.MetricsSpec(enabled=False, poll_seconds=15), None)],
    ids=["default", "tuned", "off"],
)
def test_metrics_values_reach_the_cluster_spec_and_the_controller(args: list[str], spec: cluster_spec.MetricsSpec,
                                                                  port: int | None) -> None:
    docs = _template(*args)
    text = _find(docs, "ConfigMap", "slurmpod-cluster")["data"]["cluster.yaml"]
    assert cluster_spec.parse(yaml.safe_load(text)).metrics == spec
    (ctl,) = _find(docs, "StatefulSet", "slurmpod-controller")["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in ctl["ports"]}
    env = {e["name"]: e.get("value") for e in ctl["env"]}
    assert ports.get("metrics") == port
    assert env.get(wk.ENV_EXPORTER_PORT) == (None if port is None else str(port))


def _rules_of(docs: list[dict[str, Any]]) -> dict[tuple[str, str, str], list[str]]:
    """(kind, namespace, resource) -> verbs, over the controller's Roles and ClusterRoles."""
    out = {}
    for d in docs:
        if d["kind"] in ("ClusterRole", "Role") and d["metadata"]["name"].startswith("slurmpod-controller"):
            for rule in d["rules"]:
                for resource in rule["resources"]:
                    out[(d["kind"], d["metadata"].get("namespace", ""), resource)] = rule["verbs"]
    return out


def test_the_controller_rbac_grants_what_its_daemons_use_and_no_more() -> None:
    assert _rules_of(RENDERS["default"]) == {
        ("ClusterRole", "", "nodes"): ["get", "list", "watch"],
        ("Role", "slurmpod", "pods"): ["get", "list", "patch", "watch"],
        ("Role", "slurmpod", "pods/status"): ["patch"],
        ("Role", "slurmpod", "events"): ["create"]}
    assert _rules_of(RENDERS["remediation"]) == {
        ("ClusterRole", "", "nodes"): ["get", "list", "patch", "watch"],
        ("ClusterRole", "", "nodes/status"): ["patch"],
        ("Role", "slurmpod", "pods"): ["delete", "get", "list", "patch", "watch"],
        ("Role", "slurmpod", "pods/status"): ["patch"],
        ("Role", "slurmpod", "events"): ["create"],
        ("Role", "default", "events"): ["create"]}
    assert _rules_of(_template("--set=k8sSync.enabled=false", "--set=topology.apiAccess=true")) == {
        ("ClusterRole", "", "nodes"): ["get", "list", "watch"],
        ("Role", "slurmpod", "pods"): ["get", "list", "watch"]}
    assert _rules_of(_template("--set=rbac.create=false")) == {}
    # with k8s-sync on too, autoscaling adds the scale of its StatefulSets to the same Role
    both = _rules_of(_template("--set=nodesets.workers.autoscaling.enabled=true"))
    assert both == {**_rules_of(RENDERS["default"]),
                    ("Role", "slurmpod", "statefulsets/scale"): ["get", "patch", "update"],
                    ("Role", "slurmpod", "statefulsets"): ["get"]}


def test_policy_lua_reaches_the_cluster_spec() -> None:
    spec = yaml.safe_load(_find(RENDERS["policy-lua"], "ConfigMap", "slurmpod-cluster")["data"]["cluster.yaml"])
    assert spec["policy"] == "lua"


def test_topology_api_access_runs_the_controller_under_its_account() -> None:
    docs = RENDERS["topology"]
    pod = _find(docs, "StatefulSet", "slurmpod-controller")["spec"]["template"]["spec"]
    assert (pod["serviceAccountName"], pod["automountServiceAccountToken"]) == ("slurmpod-controller", True)
    for name in ("slurmpod-worker", "slurmpod-login"):
        assert _find(docs, "StatefulSet", name)["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    spec = yaml.safe_load(_find(docs, "ConfigMap", "slurmpod-cluster")["data"]["cluster.yaml"])
    assert (spec["topologyPlugin"], spec["topology"]) == ("tree", {"source": "api"})


@pytest.mark.parametrize(("variant", "annotated", "host_path"),
                         [("default", False, False), ("cgroup-v1", False, True), ("cgroup-v2", True, False)])
def test_cgroup_access_adds_sys_admin_and_the_access_never_privileged(variant: str, annotated: bool,
                                                                       host_path: bool) -> None:
    """hostV1 mounts the node's cgroup tree; delegatedV2 asks the runtime for the pod's own subtree read-write."""
    docs = RENDERS[variant]
    template = _find(docs, "StatefulSet", "slurmpod-worker")["spec"]["template"]
    (container,) = template["spec"]["containers"]
    security = container["securityContext"]
    assert "privileged" not in security
    for cap in ("SYS_ADMIN", "SYS_NICE"):  # job cgroups; task/affinity's binding of tasks run as the user
        assert (cap in security["capabilities"]["add"]) is (variant != "default"), cap
    assert ("io.kubernetes.cri-o.cgroup2-mount-hierarchy-rw" in template["metadata"]["annotations"]) is annotated
    volumes = {v["name"]: v for v in template["spec"]["volumes"]}
    assert ("cgroup" in volumes) is host_path
    if host_path:
        assert volumes["cgroup"]["hostPath"] == {"path": "/sys/fs/cgroup", "type": "Directory"}
        assert {"name": "cgroup", "mountPath": "/sys/fs/cgroup"} in container["volumeMounts"]
    spec = yaml.safe_load(_find(docs, "ConfigMap", "slurmpod-cluster")["data"]["cluster.yaml"])
    assert spec.get("cgroups", False) is (variant != "default")
    for sts in ("slurmpod-controller", "slurmpod-login"):  # only workers run jobs
        (other,) = _find(docs, "StatefulSet", sts)["spec"]["template"]["spec"]["containers"]
        assert not {"SYS_ADMIN", "SYS_NICE"} & set(other["securityContext"]["capabilities"]["add"])


def test_no_secret_is_rendered_in_any_variant() -> None:
    assert not [d for docs in RENDERS.values() for d in docs if d["kind"] == "Secret"]


@pytest.mark.parametrize(("args", "message"), [
    (["--set=controller.slurmctld.image.digest=latest"], 'controller.slurmctld.image.digest: "latest"'),
    (["--set=nodesets.workers.slurmd.image.tag=", "--set=nodesets.workers.slurmd.image.digest="],
     "nodesets.workers.slurmd.image.tag: must be set"),
    (["--set=cluster.auth=kerberos"], 'cluster.auth: "kerberos"'),
    (["--set=nodesets.workers.priorityClass=urgent"], 'nodesets.workers.priorityClass: "urgent"'),
    (["--set=nodesets.workers.cgroup.access=privileged"], 'nodesets.workers.cgroup.access: "privileged"'),
    (["--set=cluster.cgroups=true"], "nodesets.workers.cgroup.access: none, but cluster.cgroups is true"),
    # node-root-equivalent access only when the values say they accept it
    (["--set=cluster.cgroups=true", "--set=nodesets.workers.cgroup.access=hostV1"],
     "set nodesets.workers.cgroup.acceptNodeRootEquivalent: true"),
    (["--set=cluster.srunPortRange=60001"], 'cluster.srunPortRange: "60001" must be FIRST-LAST'),
    (["--set-string=cluster.requeue.fast=yes"], 'cluster.requeue.fast: "yes" must be true or false'),
    (["--set=healthAgent.metricsPort=65536"], 'healthAgent.metricsPort: "65536" must be a TCP port'),
    (["--set-string=healthAgent.metricsPort=9402 --x"], 'healthAgent.metricsPort: "9402 --x" must be a TCP port'),
    (["--set=loginsets.login.service.type=External"], 'loginsets.login.service.type: "External": must be'),
    (["--set-string=loginsets.login.service.port=22\nx: y"], 'loginsets.login.service.port: "22\\nx: y": must be'),
    (["--set=loginsets.login.service.port=70000"], 'loginsets.login.service.port: "70000": must be'),
    (["--set=loginsets.login.service.nodePort=30022"],
     'loginsets.login.service.nodePort: "30022": a ClusterIP Service has no node port'),
    (["--set=loginsets.login.service.type=NodePort", "--set-string=loginsets.login.service.nodePort=30022"],
     'loginsets.login.service.nodePort: "30022": must be a port number'),
    (["--set=loginsets.login.service.type=NodePort",
      "--set=loginsets.login.service.loadBalancerSourceRanges={10.0.0.0/8}"],
     'loginsets.login.service.loadBalancerSourceRanges: "[10.0.0.0/8]": only a LoadBalancer Service has them'),
    (["--set-string=metrics.enabled=yes"], 'metrics.enabled: "yes": must be true or false'),
    (["--set=metrics.pollSeconds=2"], 'metrics.pollSeconds: "2": must be whole seconds, 5 to 3600'),
    (["--set-string=metrics.pollSeconds=soon"], 'metrics.pollSeconds: "soon": must be whole seconds, 5 to 3600'),
    (["--set=metrics.port=0"], 'metrics.port: "0": must be a whole number, 1 to 65535'),
    (["--set=metrics.port=70000"], 'metrics.port: "70000": must be a whole number, 1 to 65535'),
    (["--set=sssd.enabled=true"], 'sssd.secretName: "": must name the Secret holding sssd.conf'),
    (["--set=sssd.enabled=true", "--set-string=sssd.secretName=ldap\nx: y"], 'sssd.secretName: "ldap\\nx: y"'),
    (["--set=sssd.enabled=true", "--set=sssd.secretName=ldap", "--set=sssd.caConfigMap=CA_Bundle"],
     'sssd.caConfigMap: "CA_Bundle": must be a ConfigMap name'),
    (["--set-string=sssd.enabled=yes"], 'sssd.enabled: "yes": must be true or false'),
    (["--set-string=sssd.mkhomedir=yes"], 'sssd.mkhomedir: "yes": must be true or false'),
    (["--set=sssd.roles={login,db}"], 'sssd.roles: "db": must be login, worker, controller or restapi'),
    (["--set=sssd.roles=login"], 'sssd.roles: "login": must be a list'),
    (["--set=sssd.enabled=true", "--set=sssd.secretName=s", "--set=networkPolicy.directory.ports={389,ldap}"],
     'networkPolicy.directory.ports: "ldap": must be TCP port numbers 1-65535'),
    (["--set=sssd.enabled=true", "--set=sssd.secretName=s", "--set=networkPolicy.directory.ports={65536}"],
     'networkPolicy.directory.ports: "65536": must be TCP port numbers 1-65535'),
    (["--set=nodesets.workers.autoscaling.minReplicas=5", "--set=nodesets.workers.autoscaling.maxReplicas=2"],
     "nodesets.workers.autoscaling.minReplicas: 5: must not exceed maxReplicas (2)"),
    (["--set=nodesets.workers.autoscaling.mode=hpa"],
     'nodesets.workers.autoscaling.mode: "hpa": must be slurmpod or keda'),
    (["--set=nodesets.workers.autoscaling.step=0"],
     'nodesets.workers.autoscaling.step: "0": must be a whole number >= 1'),
    (["--set=nodesets.workers.autoscaling.maxReplicas=0"], 'nodesets.workers.autoscaling.maxReplicas: "0"'),
    (["--set=nodesets.workers.autoscaling.idleSeconds=-1"], 'nodesets.workers.autoscaling.idleSeconds: "-1"'),
    (["--set-string=nodesets.workers.autoscaling.minReplicas=1\nx: y"],
     'nodesets.workers.autoscaling.minReplicas: "1\\nx: y"'),
    (["--set-string=nodesets.workers.autoscaling.enabled=yes"],
     'nodesets.workers.autoscaling.enabled: "yes": must be true or false'),
    # values.schema.json refuses an unknown key before the templates' own check would
    (["--set=nodesets.workers.autoscaling.idleSecs=60"],
     "at '/nodesets/workers/autoscaling': additional properties 'idleSecs' not allowed"),
    (["--set=nodesets.workers.slurmd.env.SLURMPOD_AUTH=slurm"],
     "nodesets.workers.slurmd.env.SLURMPOD_AUTH: set by the chart itself"),
    (["--set=nodesets.workers.slurmd.env.NODE_NAME=x"], "nodesets.workers.slurmd.env.NODE_NAME: set by the chart"),
    (["--set=nodesets.workers.slurmd.env.1X=1"], 'nodesets.workers.slurmd.env: "1X": a name must be'),
    (["--set=nodesets.workers.slurmd.env=x"], 'nodesets.workers.slurmd.env: "x": must be a mapping'),
    (["--set=nodesets.workers.slurmd.env.X[0]=1"], "nodesets.workers.slurmd.env.X: must be a string, number"),
    (["--set-string=nodesets.workers.slurmd.env.X=a\nB=c"],
     'nodesets.workers.slurmd.env.X: "a\\nB=c": no control characters'),
    (["--set=nodesets.workers.sharedMemory.sizeLimit=lots"],
     'nodesets.workers.sharedMemory.sizeLimit: "lots": must be a size'),
    (["--set=nodesets.workers.sharedMemory.sizeLimit=0"], 'nodesets.workers.sharedMemory.sizeLimit: "0"'),
    (["--set-string=nodesets.workers.sharedMemory.sizeLimit=1Gi\nx: y"],
     'nodesets.workers.sharedMemory.sizeLimit: "1Gi\\nx: y"'),
    (["--set-string=nodesets.workers.sharedMemory.enabled=yes"],
     'nodesets.workers.sharedMemory.enabled: "yes": must be true or false'),
    (["--set=nodesets.workers.sharedMemory.size=1Gi"],
     "at '/nodesets/workers/sharedMemory': additional properties 'size' not allowed"),
    # and the templates still refuse them where a user skips the schema
    (["--skip-schema-validation", "--set=nodesets.workers.autoscaling.idleSecs=60"],
     "nodesets.workers.autoscaling.idleSecs: unknown key"),
    (["--skip-schema-validation", "--set=nodesets.workers.sharedMemory.size=1Gi"],
     "nodesets.workers.sharedMemory.size: unknown key"),
    (["--set=nodesets.workers.replicas=-1"], 'nodesets.workers.replicas: "-1": must be a whole number, 0 to 65000'),
    (["--set=nodesets.workers.replicas=70000"], 'nodesets.workers.replicas: "70000"'),
    (["--set-string=nodesets.workers.replicas=2\nkind: Secret"], 'nodesets.workers.replicas: "2\\nkind: Secret"'),
    (["--set-string=loginsets.login.replicas=1\nx: y"], 'loginsets.login.replicas: "1\\nx: y"'),
    (["--set=restapi.enabled=true", "--set=restapi.replicas=1.5"], 'restapi.replicas: "1.5"'),
    (["--set=cluster.maxNodes=0"], 'cluster.maxNodes: "0": must be a whole number, 1 to 65000'),
    (["--set=nodesets.workers.replicas=2000", "--set=cluster.maxNodes=1500"],
     "cluster.maxNodes: 1500: below the nodesets' pods together (2000)"),
    (["--set=nodesets.workers.autoscaling.enabled=true", "--set=nodesets.workers.autoscaling.maxReplicas=70000"],
     "nodesets: 70000 pods together, more than Slurm's 65000 nodes"),
])
def test_bad_values_fail_naming_the_key(args: list[str], message: str) -> None:
    done = _helm("template", "slurmpod", str(CHART), *args)
    assert done.returncode != 0 and message in done.stderr, done.stderr


def _sssd_of(pod: dict[str, Any]) -> tuple[list[str], list[str], list[dict[str, str]]]:
    spec = pod["spec"]["template"]["spec"]
    (c,) = [c for c in spec["containers"] if c["name"] != "health-agent"][:1]
    return ([m["mountPath"] for m in c.get("volumeMounts") or [] if m["name"] in ("sssd-conf", "ldap-ca")],
            [v["name"] for v in spec["volumes"] if v["name"] in ("sssd-conf", "ldap-ca")],
            [e for e in c["env"] if e["name"] == wk.ENV_SSSD_MKHOMEDIR])


def test_sssd_mounts_the_sites_config_and_ca_on_the_roles_that_resolve_users() -> None:
    pods = {d["metadata"]["name"]: d for d in RENDERS["sssd"] if d["kind"] in ("StatefulSet", "Deployment")}
    secret_dir, ca = str(Path(wk.SSSD_CONF_SECRET).parent), wk.SSSD_CA_DIR
    for name in ("slurmpod-login", "slurmpod-worker", "slurmpod-controller", "slurmpod-restapi"):
        mounts, volumes, env = _sssd_of(pods[name])
        assert (mounts, volumes) == ([secret_dir, ca], ["sssd-conf", "ldap-ca"]), name
        assert env == ([{"name": wk.ENV_SSSD_MKHOMEDIR, "value": "true"}] if name in ("slurmpod-login",
                                                                                     "slurmpod-worker") else [])
        (vol,) = [v for v in pods[name]["spec"]["template"]["spec"]["volumes"] if v["name"] == "sssd-conf"]
        # Not optional (a pod never starts without the directory it was asked for), owner-only, one key.
        assert vol["secret"] == {"secretName": "ldap-sssd", "defaultMode": 0o400,
                                 "items": [{"key": "sssd.conf", "path": "sssd.conf"}]}
    for name in ("slurmpod-accounting", "slurmpod-db"):
        assert _sssd_of(pods[name]) == ([], [], []), name
    # Off by default, and on the roles listed only.
    assert all(_sssd_of(d) == ([], [], []) for d in RENDERS["default"] if d["kind"] in ("StatefulSet",
                                                                                       "Deployment"))
    only = {d["metadata"]["name"]: _sssd_of(d)[1] for d in _template(
        "--set=sssd.enabled=true", "--set=sssd.secretName=s", "--set=sssd.roles={login}")
        if d["kind"] in ("StatefulSet", "Deployment")}
    assert only == {"slurmpod-controller": [], "slurmpod-worker": [], "slurmpod-login": ["sssd-conf"]}


def _directory_egress(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Each NetworkPolicy's egress rules that reach the directory's LDAP port."""
    return {d["metadata"]["name"]: [r for r in d["spec"]["egress"] if {"protocol": "TCP", "port": 389} in
                                    r.get("ports", [])] for d in docs if d["kind"] == "NetworkPolicy"}


def test_sssd_pods_and_only_they_may_reach_the_directory() -> None:
    """With NetworkPolicies on, sssd could resolve no one unless its pods' egress allows LDAP and LDAPS."""
    ldap = [{"ports": [{"protocol": "TCP", "port": 389}, {"protocol": "TCP", "port": 636}]}]
    egress = _directory_egress(RENDERS["sssd"])
    assert egress == {"slurmpod-controller": ldap, "slurmpod-worker": ldap, "slurmpod-login": ldap,
                      "slurmpod-restapi": ldap, "slurmpod-accounting": [], "slurmpod-db": []}
    assert not any(_directory_egress(RENDERS["default"]).values())
    peer = {"ipBlock": {"cidr": "10.20.0.0/16"}}
    only = {d["metadata"]["name"]: d["spec"]["egress"][-1] for d in _template(
        "--set=sssd.enabled=true", "--set=sssd.secretName=s", "--set=sssd.roles={login}",
        "--set=networkPolicy.directory.ports={636}", "--set=networkPolicy.directory.to[0].ipBlock.cidr=10.20.0.0/16")
        if d["kind"] == "NetworkPolicy"}
    assert only["slurmpod-login"] == {"ports": [{"protocol": "TCP", "port": 636}], "to": [peer]}
    assert all(636 not in [p["port"] for p in r.get("ports", [])] for n, r in only.items() if n != "slurmpod-login")


def test_the_login_service_reaches_sshd_on_the_login_pods_only() -> None:
    login = _find(RENDERS["default"], "Service", "slurmpod-login")
    assert login["spec"]["type"] == "ClusterIP"
    assert login["spec"]["selector"]["slurmpod.io/role"] == "login"
    assert login["spec"]["ports"] == [{"name": "ssh", "port": 22, "protocol": "TCP", "targetPort": 22}]
    selector = login["spec"]["selector"].items()
    selected = [d["metadata"]["name"] for d in RENDERS["default"] if d["kind"] == "StatefulSet"
                and selector <= d["spec"]["template"]["metadata"]["labels"].items()]
    assert selected == ["slurmpod-login"]


def test_the_login_service_type_node_port_and_source_ranges_follow_values() -> None:
    docs = _template("--set=loginsets.login.service.type=LoadBalancer", "--set=loginsets.login.service.port=2222",
                     "--set=loginsets.login.service.nodePort=30022",
                     "--set=loginsets.login.service.loadBalancerSourceRanges={192.0.2.0/24}",
                     "--set=loginsets.login.service.annotations.service\\.beta\\.kubernetes\\.io/aws-load-balancer-type=nlb")
    spec = _find(docs, "Service", "slurmpod-login")
    assert spec["spec"]["type"] == "LoadBalancer"
    assert spec["spec"]["ports"] == [{"name": "ssh", "port": 2222, "protocol": "TCP", "targetPort": 22,
                                      "nodePort": 30022}]
    assert spec["spec"]["loadBalancerSourceRanges"] == ["192.0.2.0/24"]
    assert spec["metadata"]["annotations"] == {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}


@pytest.mark.parametrize(("args", "fast"), [([], True), (["--set=cluster.requeue.fast=false"], False),
                                            (["--set=cluster.requeue=null"], True)], ids=["default", "off", "null"])
def test_requeue_fast_reaches_the_cluster_spec(args: list[str], fast: bool) -> None:
    done = _helm("template", "slurmpod", str(CHART), *args)
    assert done.returncode == 0, done.stderr
    maps = [d for d in yaml.safe_load_all(done.stdout) if d and d["kind"] == "ConfigMap"
            and d["metadata"]["name"].endswith("-cluster")]
    assert yaml.safe_load(maps[0]["data"]["cluster.yaml"])["requeue"] == {"fast": fast}


def _emulate(tmp_path: Path, variant: str) -> list[str]:
    """Plan the emulated cluster from a render of ``variant``; the reasons of any refusal."""
    out = tmp_path / "slurmpod.yaml"
    out.write_text(yaml.safe_dump_all(RENDERS[variant]))
    (tmp_path / manifests.KUSTOMIZATION).write_text("resources: [slurmpod.yaml]\n")
    bundle = cluster_auth.configure(manifests.load(tmp_path), "munge", ssh_host_key=b"k")
    params = podspec.ClusterParams(name="emu", subnet=ipaddress.IPv4Network("10.213.9.0/24"),
                                   cluster_uid=uuid.UUID(int=7), created=datetime(2025, 1, 2, tzinfo=UTC),
                                   node_cpu=Fraction(2), node_memory=Fraction(2**34))
    try:
        plans = podspec.plan_cluster(bundle, params, lambda n: b"k" * n)
    except BadInput as exc:
        return [f"{p.field}: {p.reason}" for p in exc.problems]
    return [p.name for p in plans]


@pytest.mark.parametrize("variant", ["default", "digest", "scaled", "policy-lua", "accounting", "cgroup-v1",
                                     "cgroup-v2", "no-k8s-sync", "remediation"])
def test_the_emulator_runs_the_render(tmp_path: Path, variant: str) -> None:
    names = _emulate(tmp_path, variant)
    if variant == "accounting":  # database, slurmdbd, controller first; slurmrestd after login
        assert names[:3] == ["emu-db-0", "emu-accounting-0", "emu-controller-0"], names
        assert names[-2:] == ["emu-login-0", "emu-restapi-0"], names
    else:
        assert names[0] == "emu-controller-0" and names[-1] == "emu-login-0", names
    workers = 8 + 4 if variant == "scaled" else 2
    assert len([n for n in names if "-worker-" in n]) == workers


def test_the_emulator_refuses_an_api_token_it_cannot_emulate(tmp_path: Path) -> None:
    """topology.apiAccess mounts a ServiceAccount token the topology sync needs: stated as not emulated,
    never silently dropped (k8s-sync's alone is dropped with k8s-sync: host/cluster/no_api.py)."""
    reasons = _emulate(tmp_path, "topology")
    assert any("controller" in r and "serviceAccountName" in r for r in reasons), reasons
    assert any("controller" in r and "automountServiceAccountToken" in r for r in reasons), reasons


def test_kubernetes_1_20_gets_policy_v1beta1_and_every_port_names_its_protocol() -> None:
    """What a 1.20 API server needs (tests/k8s installs it there): no policy/v1 PodDisruptionBudget, and
    server-side apply (Helm 4's default) refuses a port without protocol."""
    old = _template("--kube-version=1.20.2", "--set=accounting.enabled=true", "--set=restapi.enabled=true")
    assert {d["apiVersion"] for d in old if d["kind"] == "PodDisruptionBudget"} == {"policy/v1beta1"}
    assert {d["apiVersion"] for d in RENDERS["default"] if d["kind"] == "PodDisruptionBudget"} == {"policy/v1"}
    for doc in old:
        if doc["kind"] == "Service":
            assert all(p.get("protocol") == "TCP" for p in doc["spec"]["ports"]), doc["metadata"]["name"]
        pod = ((doc.get("spec") or {}).get("template") or {}).get("spec") or {}
        for c in pod.get("containers", []):
            assert all(p.get("protocol") == "TCP" for p in c.get("ports", [])), (doc["metadata"]["name"], c["name"])
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == ">=1.20.0-0"


def _pods(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d["spec"]["template"]["spec"] for d in docs if d["kind"] == "StatefulSet"}


@pytest.mark.parametrize("variant", ["default", "accounting", "cgroup-v1", "cgroup-v2"])
def test_every_pod_has_the_default_seccomp_profile_and_no_privilege_escalation(variant: str) -> None:
    """Beside SYS_ADMIN too: there no_new_privs keeps a job's setuid binaries from handing it the capability."""
    pods = _pods(RENDERS[variant])
    assert len(pods) == (6 if variant == "accounting" else 3)
    for name, pod in pods.items():
        assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}, name
        for c in pod["containers"]:
            assert c["securityContext"]["allowPrivilegeEscalation"] is False, (name, c["name"])
            # the spelling the API server refuses beside allowPrivilegeEscalation: false
            assert "CAP_SYS_ADMIN" not in c["securityContext"]["capabilities"]["add"], (name, c["name"])


def _policies(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["spec"]["podSelector"]["matchLabels"]["slurmpod.io/role"]: d["spec"]
            for d in docs if d["kind"] == "NetworkPolicy"}


def _rules(spec: dict[str, Any], direction: str) -> set[tuple[str, str, int | None, int | None]]:
    """(peer role or '*', protocol, port, endPort) for every rule of ``direction``: ingress or egress."""
    key = "from" if direction == "ingress" else "to"
    out = set()
    for rule in spec.get(direction) or []:
        peers = [p["podSelector"]["matchLabels"]["slurmpod.io/role"] if "podSelector" in p else p["ipBlock"]["cidr"]
                 for p in rule.get(key) or []] or ["*"]
        for peer in peers:
            for port in rule.get("ports") or [{"protocol": "ANY"}]:
                out.add((peer, port["protocol"], port.get("port"), port.get("endPort")))
    return out


DNS = {("*", "UDP", 53, None), ("*", "TCP", 53, None)}
SRUN = ("TCP", 60001, 63000)


def test_network_policies_allow_exactly_the_ports_the_cluster_uses() -> None:
    """docs/mpi-and-ports.md's table, role by role; anything not listed is refused in both directions."""
    pols = _policies(RENDERS["accounting"])
    assert set(pols) == {"controller", "worker", "login", "accounting", "db", "restapi"}
    assert all(p["policyTypes"] == ["Ingress", "Egress"] for p in pols.values())
    assert _rules(pols["controller"], "ingress") == {(r, "TCP", 6817, None)
                                                     for r in ("worker", "login", "accounting", "restapi")} | {
        ("*", "TCP", 9401, None)}  # slurmpod's exporter, for Prometheus
    assert _rules(pols["controller"], "egress") == DNS | {
        ("worker", "TCP", 6818, None), ("login", *SRUN), ("worker", *SRUN), ("accounting", "TCP", 6819, None),
        ("*", "TCP", 443, None), ("*", "TCP", 6443, None)}  # k8s-sync: the API server
    assert _rules(pols["worker"], "ingress") == {
        ("controller", "TCP", 6818, None), ("login", "TCP", 6818, None), ("login", "TCP", 22, None),
        ("controller", *SRUN), ("worker", "TCP", None, None),  # PMIx: ephemeral ports between workers
        ("*", "TCP", 9402, None)}  # the health agent's live metrics, for Prometheus
    assert _rules(pols["worker"], "egress") == DNS | {
        ("controller", "TCP", 6817, None), ("worker", "TCP", None, None), ("login", *SRUN)}
    assert _rules(pols["login"], "ingress") == {("*", "TCP", 22, None), ("worker", *SRUN), ("controller", *SRUN)}
    assert _rules(pols["login"], "egress") == DNS | {
        ("controller", "TCP", 6817, None), ("worker", "TCP", 6818, None), ("worker", "TCP", 22, None),
        ("accounting", "TCP", 6819, None), ("restapi", "TCP", 6820, None)}
    assert _rules(pols["accounting"], "ingress") == {(r, "TCP", 6819, None) for r in ("controller", "login", "restapi")}
    assert _rules(pols["accounting"], "egress") == DNS | {("db", "TCP", 3306, None), ("controller", "TCP", 6817, None)}
    # MariaDB: slurmdbd only, and it connects nowhere
    assert _rules(pols["db"], "ingress") == {("accounting", "TCP", 3306, None)}
    assert pols["db"]["egress"] == []
    assert _rules(pols["restapi"], "ingress") == {("*", "TCP", 6820, None)}
    assert _rules(pols["restapi"], "egress") == DNS | {("controller", "TCP", 6817, None),
                                                       ("accounting", "TCP", 6819, None)}
    # jobs (worker pods) reach neither slurmdbd, MariaDB nor slurmrestd
    assert not {peer for peer, *_ in _rules(pols["worker"], "egress")} & {"accounting", "db", "restapi"}


def test_network_policies_select_the_release_and_follow_values() -> None:
    default = _policies(RENDERS["default"])
    assert set(default) == {"controller", "worker", "login"}  # on by default; no accounting, no REST
    for spec in default.values():
        assert spec["podSelector"]["matchLabels"]["app.kubernetes.io/instance"] == "slurmpod"
    topo = _policies(RENDERS["topology"])["controller"]
    assert {("*", "TCP", 443, None), ("*", "TCP", 6443, None)} <= _rules(topo, "egress")
    narrowed = _policies(_template("--set=topology.apiAccess=true", "--set=networkPolicy.apiServer.cidrs={10.0.0.1/32}",
                                   "--set=cluster.srunPortRange=61000-61999",
                                   "--set=networkPolicy.loginSshFrom[0].ipBlock.cidr=192.0.2.0/24"))
    assert ("10.0.0.1/32", "TCP", 6443, None) in _rules(narrowed["controller"], "egress")
    assert ("worker", "TCP", 61000, 61999) in _rules(narrowed["login"], "ingress")
    assert ("192.0.2.0/24", "TCP", 22, None) in _rules(narrowed["login"], "ingress")
    scrapers = _policies(_template("--set=healthAgent.metricsPort=9500", "--set=metrics.port=9501",
                                   "--set=networkPolicy.metricsFrom[0].ipBlock.cidr=198.51.100.0/24"))
    assert {r for r in _rules(scrapers["worker"], "ingress") if r[2] in (9402, 9500)} == {
        ("198.51.100.0/24", "TCP", 9500, None)}
    assert {r for r in _rules(scrapers["controller"], "ingress") if r[2] in (9401, 9501)} == {
        ("198.51.100.0/24", "TCP", 9501, None)}
    assert not {r for r in _rules(_policies(_template("--set=metrics.enabled=false"))["controller"], "ingress")
                if r[2] == 9401}
    for off in (["--set=healthAgent.metricsPort=0"], ["--set=healthAgent.enabled=false"]):
        docs = _template(*off)
        assert not {r for r in _rules(_policies(docs)["worker"], "ingress") if r[2] == 9402}
        (worker,) = _find(docs, "StatefulSet", "slurmpod-worker")["spec"]["template"]["spec"]["containers"]
        assert "health-metrics" not in {p["name"] for p in worker["ports"]}
    assert not [d for d in _template("--set=networkPolicy.enabled=false") if d["kind"] == "NetworkPolicy"]


def test_kubernetes_1_20_network_policies_allow_the_srun_range_without_end_port() -> None:
    """1.20 has no endPort and drops the field, which would leave only the range's first port: there the
    range's rules allow every TCP port from those peers."""
    old = _policies(_template("--kube-version=1.20.2"))
    assert ("worker", "TCP", None, None) in _rules(old["login"], "ingress")
    assert not [p for spec in old.values() for d in ("ingress", "egress") for r in spec.get(d) or []
                for p in r.get("ports") or [] if "endPort" in p]
