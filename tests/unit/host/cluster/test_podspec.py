"""The PodSpec interpreter: shipped manifests -> PodPlans (pure; no Docker)."""

from __future__ import annotations

import copy
import ipaddress
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from slurmpod import kubelet_format, podinfo
from slurmpod import well_known as wk
from slurmpod.errors import BadInput
from slurmpod_host.cluster import auth as cluster_auth
from slurmpod_host.cluster import manifests, podspec, state
from slurmpod_host.cluster.plan import Mount, MountKind, PodPlan

# The shipped manifests plus the Secrets a user creates (the munge key, the login host key).
HOST_KEY = b"-----BEGIN OPENSSH PRIVATE KEY-----\n" + b"k" * 64 + b"\n-----END OPENSSH PRIVATE KEY-----\n"
BUNDLE = cluster_auth.configure(manifests.load(manifests.default_dir()), "munge", ssh_host_key=HOST_KEY)
SUBNET = ipaddress.IPv4Network("10.213.9.0/24")
CREATED = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
NODE_CPU, NODE_MEMORY = Fraction(2), Fraction(24 * 2**30)


def _key(n: int) -> bytes:
    return bytes(i % 256 for i in range(n))


def _params(**kw: Any) -> podspec.ClusterParams:
    base: dict[str, Any] = {"name": "demo", "subnet": SUBNET, "cluster_uid": uuid.UUID(int=7),
                            "created": CREATED, "node_cpu": NODE_CPU, "node_memory": NODE_MEMORY}
    return podspec.ClusterParams(**{**base, **kw})


def _plans(bundle: manifests.Bundle = BUNDLE, **kw: Any) -> dict[str, PodPlan]:
    return {p.name: p for p in podspec.plan_cluster(bundle, _params(**kw), _key)}


PLANS = _plans(workers=3)


def test_pods_in_start_order() -> None:
    assert list(PLANS) == ["demo-controller-0", "demo-worker-0", "demo-worker-1", "demo-worker-2",
                           "demo-login-0"]
    assert [p.role for p in PLANS.values()] == ["controller", "worker", "worker", "worker", "login"]


def _site_statefulset(role: str) -> manifests.Document:
    """A directory server a site runs beside slurmpod: its own image, listed after slurmpod's objects."""
    labels = {wk.LABEL_ROLE: role}
    return manifests.Document("site.yaml", {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "slapd"},
        "spec": {"serviceName": "slurm", "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {
                     "automountServiceAccountToken": False, "enableServiceLinks": False,
                     "containers": [{"name": "slapd", "image": "example/slapd:2.6",
                                     "command": ["slapd", "-d", "0"]}]}}}})


def test_a_site_directory_pod_starts_first_from_its_own_image() -> None:
    bundle = manifests.Bundle(BUNDLE.namespace, (*BUNDLE.documents, _site_statefulset("directory")))
    plans = list(podspec.plan_cluster(bundle, _params(flavor="26.05"), _key))
    assert [(p.name, p.role, p.image) for p in plans[:2]] == [
        ("demo-slapd-0", "directory", "example/slapd:2.6"),  # the tag is the site's, not the flavor
        ("demo-controller-0", "controller", "slurmpod/controller:26.05")]
    assert plans[0].entrypoint == ("slapd", "-d", "0")
    with pytest.raises(BadInput) as raised:
        podspec.plan_cluster(manifests.Bundle(BUNDLE.namespace, (*BUNDLE.documents, _site_statefulset("ldap"))),
                             _params(), _key)
    assert "site.yaml:StatefulSet/slapd.spec.template.metadata.labels.slurmpod.io/role='ldap': no such role" in str(
        raised.value)


def test_replicas_from_manifest_when_not_overridden() -> None:
    assert [p.name for p in _plans().values() if p.role == "worker"] == ["demo-worker-0", "demo-worker-1"]


def test_ips_fixed_unique_and_not_the_gateway() -> None:
    ips = [p.ip for p in PLANS.values()]
    assert len(set(ips)) == len(ips)
    assert all(ipaddress.IPv4Address(ip) in SUBNET for ip in ips)
    assert _params().gateway == "10.213.9.1"
    assert "10.213.9.1" not in ips
    assert ips == [p.ip for p in _plans(workers=3).values()]  # deterministic


def test_labels() -> None:
    labels = dict(PLANS["demo-worker-1"].labels)
    assert labels[wk.LABEL_INSTANCE] == "demo"
    assert labels[wk.LABEL_ROLE] == "worker"
    assert labels[wk.LABEL_NODESET] == "workers"
    assert labels["statefulset.kubernetes.io/pod-name"] == "demo-worker-1"
    assert labels["apps.kubernetes.io/pod-index"] == "1"
    assert labels["controller-revision-hash"].startswith("demo-worker-")
    assert list(labels) == sorted(labels)


WORKER_ENV = {
    wk.ENV_POD_NAME: "demo-worker-1",
    wk.ENV_POD_NAMESPACE: "slurmpod",  # kustomization.yaml's namespace
    wk.ENV_POD_UID: str(uuid.uuid5(uuid.UUID(int=7), "demo-worker-1")),
    wk.ENV_NODE_NAME: podspec.EMULATED_NODE_NAME,
    wk.ENV_POD_IP: "10.213.9.4",
    wk.ENV_HOST_IP: "10.213.9.1",
    wk.ENV_CPU_LIMIT: "1000",
    wk.ENV_MEMORY_LIMIT: "1024",
    wk.ENV_CPU_REQUEST: "500",
    wk.ENV_MEMORY_REQUEST: "512",
    wk.ENV_CLUSTER_NAME: "demo",
    wk.ENV_CONTROLLER: "demo-controller-0",  # $(SLURMPOD_CLUSTER_NAME)-controller-0
    wk.ENV_GRACE_SECONDS: "60",
    wk.ENV_LOG_FORMAT: "json",
}


@pytest.mark.parametrize(("var", "value"), sorted(WORKER_ENV.items()), ids=sorted(WORKER_ENV))
def test_worker_env(var: str, value: str) -> None:
    assert PLANS["demo-worker-1"].env_map()[var] == value


def test_login_env_resources() -> None:
    env = PLANS["demo-login-0"].env_map()
    assert (env[wk.ENV_CPU_LIMIT], env[wk.ENV_MEMORY_LIMIT]) == ("500", "512")


def test_docker_limits() -> None:
    worker = PLANS["demo-worker-0"]
    assert worker.nano_cpus == 10**9
    assert worker.mem_limit == 2**30
    assert worker.cpu_shares == 512  # 500m * 1024 / 1000
    assert worker.stop_timeout_s == 60
    assert worker.entrypoint == ("slurmpod", "entrypoint")
    assert worker.command == ("worker",)
    assert worker.readiness is not None
    assert worker.readiness.command == ("slurmpod", "probe", "ready")
    assert worker.pre_stop == ("slurmpod", "prestop")
    assert not worker.wait_ready  # Parallel
    assert PLANS["demo-controller-0"].wait_ready  # OrderedReady


def test_flavor_rewrites_image_tags() -> None:
    plans = _plans(flavor="26.05")
    assert {p.image for p in plans.values()} == {f"slurmpod/{r}:26.05" for r in wk.ROLES}
    assert {p.image for p in _plans().values()} == {f"slurmpod/{r}:24.11" for r in wk.ROLES}


def _mounts(plan: PodPlan) -> dict[str, tuple[MountKind, str, bool]]:
    return {m.target: (m.kind, m.source, m.read_only) for m in plan.mounts}


def test_controller_mounts() -> None:
    mounts = _mounts(PLANS["demo-controller-0"])
    assert mounts[wk.STATE_SAVE_LOCATION] == (MountKind.VOLUME, "statesave-demo-controller-0", False)
    assert mounts["/etc/slurmpod"] == (MountKind.BIND, "pods/demo-controller-0/volumes/cluster-spec", True)
    policy_dir = str(Path(wk.POLICY_FILE).parent)
    assert mounts[policy_dir] == (MountKind.BIND, "pods/demo-controller-0/volumes/policy", True)
    assert PLANS["demo-controller-0"].volumes == ("statesave-demo-controller-0",)


@pytest.mark.parametrize("pod", ["demo-worker-0", "demo-worker-2", "demo-login-0"])
def test_home_is_one_shared_volume(pod: str) -> None:
    assert _mounts(PLANS[pod])["/home"] == (MountKind.VOLUME, "demo-home", False)
    assert PLANS[pod].volumes == ("demo-home",)


@pytest.mark.parametrize("pod", list(PLANS))
def test_every_pod_gets_podinfo_secret_and_termination_log(pod: str) -> None:
    mounts = _mounts(PLANS[pod])
    assert mounts[wk.PODINFO_DIR] == (MountKind.BIND, f"pods/{pod}/volumes/podinfo", True)
    assert mounts["/run/secrets/slurmpod/munge"] == (MountKind.BIND, f"pods/{pod}/volumes/munge-key", True)
    assert mounts[wk.TERMINATION_LOG] == (MountKind.BIND, podspec.termination_log_path(pod), False)
    files = {f.path: f for f in PLANS[pod].files}
    assert files[podspec.termination_log_path(pod)].mode == 0o666


def test_munge_key_one_per_cluster_mode_0400() -> None:
    keys = []
    for plan in PLANS.values():
        (key,) = [f for f in plan.files if f.path.endswith("/munge.key") and f.symlink_to is None]
        assert key.mode == 0o400
        assert len(key.content) == 1024
        keys.append(key.content)
    assert len(set(keys)) == 1
    generated: list[int] = []

    def generate(n: int) -> bytes:
        generated.append(n)
        return b"k" * n

    podspec.plan_cluster(BUNDLE, _params(), generate)
    assert generated == [1024]  # once per empty Secret value (the munge key), not per pod


def test_atomic_writer_layout() -> None:
    files = {f.path: f for f in PLANS["demo-worker-0"].files}
    base = "pods/demo-worker-0/volumes/podinfo"
    stamp = "..2025_01_02_03_04_05.678000"
    assert files[f"{base}/..data"].symlink_to == stamp
    assert files[f"{base}/labels"].symlink_to == "..data/labels"
    assert files[f"{base}/{stamp}/labels"].content.startswith(b'app.kubernetes.io/component="worker"\n')


def test_annotations_include_kubelets() -> None:
    ann = dict(PLANS["demo-worker-0"].annotations)
    assert ann["kubernetes.io/config.source"] == "api"
    assert ann["kubernetes.io/config.seen"] == "2025-01-02T03:04:05.678Z"  # Go's RFC3339Nano, as the kubelet
    assert ann["kubectl.kubernetes.io/default-container"] == "slurmd"


def test_written_files_load_as_podinfo(tmp_path: Path) -> None:
    """What the emulator writes is what the pod-side PodInfo loader accepts (through kubelet's symlinks)."""
    plan = PLANS["demo-worker-2"]
    state.write(tmp_path, plan.files)
    podinfo_dir = tmp_path / f"pods/{plan.name}/volumes/podinfo"
    assert (podinfo_dir / "labels").is_symlink()
    info = podinfo.load(plan.env_map(), podinfo_dir)
    assert info.name == "demo-worker-2"
    assert info.controller == "demo-controller-0"
    assert info.cluster_name == "demo"
    assert info.cpu_limit_millis == 1000
    assert info.memory_limit_mib == 1024
    assert info.grace_seconds == 60
    assert dict(info.labels) == dict(plan.labels)
    assert dict(info.annotations) == dict(plan.annotations)
    key = tmp_path / f"pods/{plan.name}/volumes/munge-key/munge.key"
    assert key.resolve().stat().st_mode & 0o777 == 0o400
    assert not (podinfo_dir / "labels").read_text().endswith("\n")  # FormatMap trims the last newline
    assert kubelet_format.parse((podinfo_dir / "labels").read_text(), "labels") == dict(plan.labels)


# --- Defaults kubelet and the API server apply ---------------------------------------------------

def _edit(edit: Callable[[dict[str, Any]], None], kind: str = "StatefulSet",
          name: str = "worker") -> manifests.Bundle:
    docs = []
    for d in BUNDLE.documents:
        body = copy.deepcopy(dict(d.body))
        if d.kind == kind and d.name == name:
            edit(body)
        docs.append(manifests.Document(d.source, body))
    return manifests.Bundle(BUNDLE.namespace, tuple(docs))


def _worker_container(body: dict[str, Any]) -> dict[str, Any]:
    return body["spec"]["template"]["spec"]["containers"][0]  # type: ignore[no-any-return]


def test_missing_limits_read_as_node_allocatable() -> None:
    bundle = _edit(lambda b: _worker_container(b).pop("resources"))
    plan = _plans(bundle)["demo-worker-0"]
    env = plan.env_map()
    assert env[wk.ENV_CPU_LIMIT] == "2000"
    assert env[wk.ENV_MEMORY_LIMIT] == str(24 * 1024)
    assert env[wk.ENV_CPU_REQUEST] == "0"
    assert plan.nano_cpus is None
    assert plan.mem_limit is None
    assert plan.cpu_shares == podspec.MIN_SHARES


def test_requests_default_to_limits() -> None:
    bundle = _edit(lambda b: _worker_container(b)["resources"].pop("requests"))
    env = _plans(bundle)["demo-worker-0"].env_map()
    assert (env[wk.ENV_CPU_REQUEST], env[wk.ENV_MEMORY_REQUEST]) == ("1000", "1024")


def test_capabilities_and_args_expansion() -> None:
    def edit(b: dict[str, Any]) -> None:
        c = _worker_container(b)
        c["securityContext"] = {"capabilities": {"add": ["SYS_ADMIN"], "drop": ["NET_RAW"]}}
        c["args"] = ["worker", "--node=$(POD_NAME)", "$$(POD_NAME)"]

    plan = _plans(_edit(edit))["demo-worker-0"]
    assert plan.cap_add == ("SYS_ADMIN",)
    assert plan.cap_drop == ("NET_RAW",)
    assert plan.command == ("worker", "--node=demo-worker-0", "$(POD_NAME)")


def test_every_shipped_pod_runs_under_the_default_seccomp_profile_without_new_privileges() -> None:
    """The pod's RuntimeDefault is Docker's default profile (no option); allowPrivilegeEscalation: false is
    Docker's no-new-privileges, which `docker exec` sessions inherit as `kubectl exec` ones do."""
    assert {p.name: p.security_opt for p in PLANS.values()} == {
        name: (podspec.NO_NEW_PRIVILEGES,) for name in PLANS}


@pytest.mark.parametrize(("pod_sc", "container_sc", "expected"), [
    (None, {}, ("seccomp=unconfined",)),  # the kubelet's default: Unconfined
    ({"seccompProfile": {"type": "Unconfined"}}, {"allowPrivilegeEscalation": True}, ("seccomp=unconfined",)),
    ({"seccompProfile": {"type": "RuntimeDefault"}}, {}, ()),
    ({"seccompProfile": {"type": "RuntimeDefault"}},
     {"allowPrivilegeEscalation": False, "capabilities": {"add": ["SYS_ADMIN"]}}, ("no-new-privileges:true",)),
], ids=["unset", "unconfined", "runtime-default", "no-new-privileges-beside-sys-admin"])
def test_seccomp_and_privilege_escalation_become_docker_security_options(
        pod_sc: dict[str, Any] | None, container_sc: dict[str, Any], expected: tuple[str, ...]) -> None:
    def edit(b: dict[str, Any]) -> None:
        pod = b["spec"]["template"]["spec"]
        pod.pop("securityContext", None)
        if pod_sc is not None:
            pod["securityContext"] = pod_sc
        _worker_container(b)["securityContext"] = container_sc

    assert _plans(_edit(edit))["demo-worker-0"].security_opt == expected


def test_empty_dir_volumes() -> None:
    def edit(b: dict[str, Any]) -> None:
        b["spec"]["template"]["spec"]["volumes"].append({"name": "scratch", "emptyDir": {}})
        _worker_container(b)["volumeMounts"].append({"name": "scratch", "mountPath": "/scratch"})

    plan = _plans(_edit(edit))["demo-worker-0"]
    mounts = _mounts(plan)
    assert mounts["/scratch"] == (MountKind.BIND, "pods/demo-worker-0/volumes/scratch", False)
    assert {f.path: f.mode for f in plan.files}["pods/demo-worker-0/volumes/scratch"] == 0o777


def _shm_mount(plan: PodPlan) -> Mount:
    (shm,) = [m for m in plan.mounts if m.target == "/dev/shm"]
    return shm


def test_the_workers_dev_shm_is_a_tmpfs_the_size_of_the_pods_memory_limit() -> None:
    """The chart's memory-backed emptyDir at /dev/shm, sized as kubelet sizes it: no sizeLimit, so the
    worker's 1Gi memory limit, not Docker's 64 MiB."""
    shm = _shm_mount(PLANS["demo-worker-0"])
    assert (shm.kind, shm.size, shm.read_only) == (MountKind.TMPFS, 2**30, False)
    assert "/dev/shm" not in _mounts(PLANS["demo-controller-0"])


def _shm_spec(**spec: Any) -> Callable[[dict[str, Any]], None]:
    def edit(b: dict[str, Any]) -> None:
        (volume,) = [v for v in b["spec"]["template"]["spec"]["volumes"] if v["name"] == "shm"]
        volume["emptyDir"] = spec
    return edit


@pytest.mark.parametrize(("spec", "size"), [
    ({"medium": "Memory", "sizeLimit": "256Mi"}, 256 * 2**20),
    ({"medium": "Memory", "sizeLimit": "4Gi"}, 2**30),  # never past the pod's memory limit
    ({"medium": "Memory", "sizeLimit": "500M"}, 500 * 10**6),
], ids=["below-the-limit", "above-the-limit", "decimal"])
def test_a_memory_empty_dir_is_the_smaller_of_its_size_limit_and_the_pods_memory(spec: dict[str, Any],
                                                                                  size: int) -> None:
    shm = _shm_mount(_plans(_edit(_shm_spec(**spec)))["demo-worker-0"])
    assert (shm.kind, shm.size) == (MountKind.TMPFS, size)


def test_a_memory_empty_dir_without_any_limit_is_the_kernels_default() -> None:
    def edit(b: dict[str, Any]) -> None:
        _worker_container(b).pop("resources")
    shm = _shm_mount(_plans(_edit(edit))["demo-worker-0"])
    assert (shm.kind, shm.size) == (MountKind.TMPFS, None)


@pytest.mark.parametrize(("spec", "field", "value"), [
    ({"medium": "Memory", "sizeLimit": "lots"}, "emptyDir.sizeLimit", "lots"),
    ({"medium": "Memory", "sizeLimit": "-1Gi"}, "emptyDir.sizeLimit", "-1Gi"),
    ({"medium": "HugePages-2Mi"}, "emptyDir.medium", "HugePages-2Mi"),
    ({"medium": "Memory", "size": "1Gi"}, "emptyDir.size", "1Gi"),
], ids=["not-a-quantity", "negative", "medium", "unknown-key"])
def test_a_bad_empty_dir_is_refused_naming_the_field(spec: dict[str, Any], field: str, value: str) -> None:
    with pytest.raises(BadInput) as info:
        _plans(_edit(_shm_spec(**spec)))
    assert any(field in p.field and value in str(p) for p in info.value.problems), info.value.problems


def test_host_path_cgroup_hierarchy_mounts_read_write() -> None:
    """The one hostPath the emulator serves: the cgroup tree, for `cgroup.access: hostV1` workers."""
    def edit(b: dict[str, Any]) -> None:
        b["spec"]["template"]["spec"]["volumes"].append(
            {"name": "cgroup", "hostPath": {"path": "/sys/fs/cgroup", "type": "Directory"}})
        _worker_container(b)["volumeMounts"].append({"name": "cgroup", "mountPath": "/sys/fs/cgroup"})

    plan = _plans(_edit(edit))["demo-worker-0"]
    assert _mounts(plan)["/sys/fs/cgroup"] == (MountKind.HOST, "/sys/fs/cgroup", False)
    assert not any(f.path.endswith("/cgroup") for f in plan.files)


# --- Anything the emulator does not interpret is an error naming the field -----------------------

def _set(path: list[str | int], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(body: dict[str, Any]) -> None:
        node: Any = body
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return edit


POD: list[str | int] = ["spec", "template", "spec"]
CONTAINER: list[str | int] = [*POD, "containers", 0]
REJECTED = [
    ("startupProbe", _set([*CONTAINER, "startupProbe"], {"exec": {"command": ["true"]}}), "startupProbe"),
    ("service-links", _set([*POD, "enableServiceLinks"], True), "enableServiceLinks"),
    ("token", _set([*POD, "automountServiceAccountToken"], True), "automountServiceAccountToken"),
    ("hostPath", _set([*POD, "volumes", 0], {"name": "podinfo", "hostPath": {"path": "/"}}), "hostPath.path"),
    ("hostPath-type", _set([*POD, "volumes", 0], {"name": "podinfo", "hostPath": {"path": "/sys/fs/cgroup",
                                                                                 "type": "DirectoryOrCreate"}}),
     "hostPath.type"),
    ("secretKeyRef", _set([*CONTAINER, "env", 0, "valueFrom"], {"secretKeyRef": {"name": "x", "key": "y"}}),
     "valueFrom"),
    ("bad-quantity", _set([*CONTAINER, "resources", "limits", "cpu"], "1.5Q"), "resources.limits.cpu"),
    ("gpu", _set([*CONTAINER, "resources", "limits", "nvidia.com/gpu"], 1), "nvidia.com/gpu"),
    ("no-secret", _set([*POD, "volumes", 1, "secret"], {"secretName": "nope", "defaultMode": 0o400}),
     "secretName"),
    ("secret-field", _set([*POD, "volumes", 1, "secret", "ownerReferences"], []), "ownerReferences"),
    ("configmap-ref-missing", _set([*CONTAINER, "env", 0, "valueFrom"],
                                   {"configMapKeyRef": {"name": "cluster", "key": "nope"}}), "configMapKeyRef.key"),
    ("configmap-missing", _set([*CONTAINER, "env", 0, "valueFrom"],
                               {"configMapKeyRef": {"name": "nope", "key": "auth"}}), "configMapKeyRef.name"),
    ("two-containers", lambda b: b["spec"]["template"]["spec"]["containers"].append({"name": "x"}),
     "containers"),
    ("selector", _set(["spec", "selector", "matchLabels", "x"], "y"), "matchLabels.x"),
    ("policy", _set(["spec", "podManagementPolicy"], "Sometimes"), "podManagementPolicy"),
    ("subPath", _set([*CONTAINER, "volumeMounts", 0, "subPath"], "x"), "volumeMounts[0]"),
    ("httpGet", _set([*CONTAINER, "readinessProbe"], {"httpGet": {"port": 80}}), "readinessProbe"),
    ("privileged", _set([*CONTAINER, "securityContext"], {"privileged": True}), "privileged"),
    ("seccomp-localhost", _set([*POD, "securityContext"], {"seccompProfile": {"type": "Localhost",
                                                                              "localhostProfile": "x.json"}}),
     "seccompProfile"),
    ("run-as-user", _set([*POD, "securityContext", "runAsUser"], 1000), "securityContext.runAsUser"),
    ("escalation-not-bool", _set([*CONTAINER, "securityContext", "allowPrivilegeEscalation"], "no"),
     "allowPrivilegeEscalation"),
    # the API server's own refusal (ValidateSecurityContext), for the spelling it checks
    ("escalation-beside-cap-sys-admin", _set([*CONTAINER, "securityContext"],
                                             {"allowPrivilegeEscalation": False,
                                              "capabilities": {"add": ["CAP_SYS_ADMIN"]}}),
     "allowPrivilegeEscalation"),
    ("env-fieldref", _set([*CONTAINER, "env", 0, "valueFrom", "fieldRef", "fieldPath"], "metadata.labels"),
     "fieldPath"),
    ("mode", _set([*POD, "volumes", 1, "secret", "defaultMode"], 0o1777), "defaultMode"),
    ("service", _set(["spec", "serviceName"], "other"), "serviceName"),
    # runc cannot create a mount point inside a read-only volume: the pod would never start
    ("mount-in-read-only", _set([*CONTAINER, "volumeMounts", 1, "mountPath"], "/etc/podinfo/munge"),
     "inside the read-only mount /etc/podinfo"),
]


@pytest.mark.parametrize(("edit", "field"), [(e, f) for _, e, f in REJECTED], ids=[i for i, _, _ in REJECTED])
def test_rejects_uninterpreted_fields(edit: Callable[[dict[str, Any]], None], field: str) -> None:
    with pytest.raises(BadInput) as info:
        _plans(_edit(edit))
    assert any(field in str(p) for p in info.value.problems), info.value.problems


def test_reports_every_problem_at_once() -> None:
    def edit(b: dict[str, Any]) -> None:
        _set([*CONTAINER, "startupProbe"], {})(b)
        _set([*POD, "enableServiceLinks"], True)(b)

    with pytest.raises(BadInput) as info:
        _plans(_edit(edit))
    assert len(info.value.problems) >= 2


def test_problems_not_repeated_per_pod() -> None:
    with pytest.raises(BadInput) as info:
        _plans(_edit(_set([*CONTAINER, "startupProbe"], {})), workers=5)
    assert len(info.value.problems) == 1


def test_unknown_kind_rejected() -> None:
    extra = manifests.Document("x.yaml", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})
    bundle = manifests.Bundle(BUNDLE.namespace, (*BUNDLE.documents, extra))
    with pytest.raises(BadInput, match="kind not interpreted"):
        _plans(bundle)


@pytest.mark.parametrize(
    ("name", "workers", "field"),
    [("Bad_Name", 2, "--name"), ("x" * 41, 2, "--name"), ("ok", 0, "--workers"), ("ok", 65, "--workers")],
    ids=["uppercase", "too-long", "zero-workers", "too-many-workers"],
)
def test_params_validated(name: str, workers: int, field: str) -> None:
    with pytest.raises(BadInput, match=field):
        podspec.validate_params(name, workers)


def test_ignored_fields_say_why() -> None:
    assert set(podspec.CONTAINER_IGNORED) == {"ports", "imagePullPolicy", "livenessProbe"}
    assert all(reason for reason in {**podspec.CONTAINER_IGNORED, **podspec.POD_IGNORED}.values())


# --- configMapKeyRef and optional volumes ---------------------------------------------------------

def _env_item(name: str, value_from: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def edit(b: dict[str, Any]) -> None:
        _worker_container(b)["env"].append({"name": name, "valueFrom": value_from})

    return edit


@pytest.mark.parametrize("pod", list(PLANS))
def test_auth_env_from_the_config_map(pod: str) -> None:
    assert PLANS[pod].env_map()[wk.ENV_AUTH] == "munge"


def test_config_map_key_ref_reads_data() -> None:
    def edit(b: dict[str, Any]) -> None:
        b["data"] = {**b["data"], "auth": "slurm", "extra": "x y"}
        b["binaryData"] = {"bin": "AAE="}

    bundle = _edit(edit, "ConfigMap", "cluster")
    docs = {(d.kind, d.name): d for d in bundle.documents}
    body = copy.deepcopy(dict(docs[("StatefulSet", "worker")].body))
    _env_item("EXTRA", {"configMapKeyRef": {"name": "cluster", "key": "extra"}})(body)
    docs[("StatefulSet", "worker")] = manifests.Document("worker.yaml", body)
    env = _plans(manifests.Bundle(bundle.namespace, tuple(docs.values())))["demo-worker-0"].env_map()
    assert (env[wk.ENV_AUTH], env["EXTRA"]) == ("slurm", "x y")
    with pytest.raises(BadInput, match="bin"):  # binaryData is not served to env
        _plans(_edit(_env_item("BIN", {"configMapKeyRef": {"name": "cluster", "key": "bin"}})))


@pytest.mark.parametrize("ref", [{"name": "cluster", "key": "nope", "optional": True},
                                 {"name": "nope", "key": "auth", "optional": True}], ids=["key", "configmap"])
def test_optional_config_map_key_ref_leaves_the_variable_unset(ref: dict[str, Any]) -> None:
    env = _plans(_edit(_env_item("MAYBE", {"configMapKeyRef": ref})))["demo-worker-0"].env_map()
    assert "MAYBE" not in env
    assert wk.ENV_AUTH in env


def test_config_map_key_ref_rejects_unknown_fields() -> None:
    with pytest.raises(BadInput, match=r"configMapKeyRef\.default"):
        _plans(_edit(_env_item("X", {"configMapKeyRef": {"name": "cluster", "key": "auth", "default": "y"}})))


def _volume_files(plan: PodPlan, volume: str) -> dict[str, Any]:
    base = f"pods/{plan.name}/volumes/{volume}"
    return {f.path.removeprefix(base): f for f in plan.files if f.path.startswith(base)}


def test_optional_secret_missing_mounts_an_empty_directory() -> None:
    assert BUNDLE.find("Secret", wk.SECRET_SLURM_KEY) is None  # auth munge: the user made no slurm.key
    plan = _plans(BUNDLE)["demo-login-0"]
    assert _mounts(plan)["/run/secrets/slurmpod/slurm"] == (
        MountKind.BIND, "pods/demo-login-0/volumes/slurm-key", True)
    stamp = "..2025_01_02_03_04_05.678000"
    files = _volume_files(plan, "slurm-key")
    assert sorted(files) == ["", f"/{stamp}", "/..data"]  # kubelet's atomic writer, no payload
    assert files["/..data"].symlink_to == stamp
    assert "/munge.key" in _volume_files(plan, "munge-key")


def test_optional_config_map_volume_missing_mounts_an_empty_directory() -> None:
    def edit(b: dict[str, Any]) -> None:
        b["spec"]["template"]["spec"]["volumes"].append({"name": "extra", "configMap": {"name": "nope",
                                                                                        "optional": True}})
        _worker_container(b)["volumeMounts"].append({"name": "extra", "mountPath": "/etc/extra"})

    plan = _plans(_edit(edit))["demo-worker-0"]
    assert sorted(_volume_files(plan, "extra")) == ["", "/..2025_01_02_03_04_05.678000", "/..data"]


def test_secret_without_data_mounts_an_empty_directory() -> None:
    bundle = _edit(lambda b: b.update(data={}), "Secret", wk.SECRET_MUNGE)
    plan = _plans(bundle)["demo-worker-0"]
    assert "/munge.key" not in _volume_files(plan, "munge-key")
    assert len(_volume_files(plan, "munge-key")) == 3


def test_login_host_key_from_its_secret() -> None:
    """Login pods get the user's ssh host key (0400), so clients keep trusting them across restarts."""
    plan = _plans(BUNDLE)["demo-login-0"]
    (key,) = [f for f in plan.files if f.path.endswith(f"/{wk.SSH_HOST_KEY_FILE}") and f.symlink_to is None]
    assert (key.content, key.mode) == (HOST_KEY, 0o400)
    assert _mounts(plan)[wk.SSH_HOST_KEY_SECRET_DIR][2] is True  # read-only
