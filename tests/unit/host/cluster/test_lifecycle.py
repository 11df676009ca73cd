"""Pod lifecycle, the pure parts: template patches, IP choice, pod names, the applied-objects file."""

from __future__ import annotations

import base64
import dataclasses
import ipaddress
import stat
import uuid
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from slurmpod import well_known as wk
from slurmpod.errors import BadInput
from slurmpod_host.cluster import applied, manifests, podspec
from slurmpod_host.cluster import auth as cluster_auth
from slurmpod_host.cluster.lifecycle import PodPatch, choose_ip, patch_template, split_pod_name
from slurmpod_host.cluster.services import Published

BUNDLE = manifests.load(manifests.default_dir())
SUBNET = ipaddress.IPv4Network("10.213.9.0/24")
PARAMS = podspec.ClusterParams(name="demo", subnet=SUBNET, cluster_uid=uuid.UUID(int=7),
                               created=datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
                               node_cpu=Fraction(2), node_memory=Fraction(24 * 2**30), flavor="24.11",
                               workers=3)
WORKER = BUNDLE.find("StatefulSet", "worker")
assert WORKER is not None


def _key(n: int) -> bytes:
    return bytes(i % 256 for i in range(n))


def _container(body: Any) -> Any:
    return body["spec"]["template"]["spec"]["containers"][0]


def _env(body: Any) -> dict[str, Any]:
    return {e["name"]: e for e in _container(body)["env"]}


def test_empty_patch_changes_nothing_and_input_is_not_mutated() -> None:
    before = repr(WORKER.body)
    assert patch_template(WORKER.body, PodPatch()) == WORKER.body
    patch_template(WORKER.body, PodPatch(cpu_limit="2", annotations={"a": "b"}, env={"X": "1"}, args=("x",)))
    assert repr(WORKER.body) == before


def test_limits_annotations_env_command_args() -> None:
    patch = PodPatch(cpu_limit="2", memory_limit="12Gi", annotations={wk.ANNOTATION_FEATURES: "ib,a100"},
                     env={"SLINKY_TOPOLOGY": "", "SLURMPOD_GRACE_SECONDS": "5"},
                     command=("bash", "-c"), args=("exec sleep 1",))
    body = patch_template(WORKER.body, patch)
    c = _container(body)
    assert c["resources"]["limits"] == {"cpu": "2", "memory": "12Gi"}
    assert c["resources"]["requests"] == _container(WORKER.body)["resources"]["requests"]
    annotations = body["spec"]["template"]["metadata"]["annotations"]
    assert annotations[wk.ANNOTATION_FEATURES] == "ib,a100"
    assert "kubectl.kubernetes.io/default-container" in annotations  # merged, not replaced
    names = [e["name"] for e in c["env"]]
    old_names = [e["name"] for e in _container(WORKER.body)["env"]]
    assert names == [*old_names, "SLINKY_TOPOLOGY"]  # an override keeps its place; new ones append
    assert _env(body)["SLURMPOD_GRACE_SECONDS"] == {"name": "SLURMPOD_GRACE_SECONDS", "value": "5"}
    assert (c["command"], c["args"]) == (["bash", "-c"], ["exec sleep 1"])


def test_capabilities_and_host_path_added() -> None:
    before = repr(WORKER.body)
    body = patch_template(WORKER.body, PodPatch(cap_add=("SYS_ADMIN", "CHOWN"),
                                                host_paths={"/sys/fs/cgroup": "/sys/fs/cgroup"}))
    c = _container(body)
    old_add = _container(WORKER.body)["securityContext"]["capabilities"]["add"]
    assert c["securityContext"]["capabilities"]["add"] == [*old_add, "SYS_ADMIN"]  # CHOWN was there already
    volume = body["spec"]["template"]["spec"]["volumes"][-1]
    assert volume["hostPath"] == {"path": "/sys/fs/cgroup"}
    assert c["volumeMounts"][-1] == {"name": volume["name"], "mountPath": "/sys/fs/cgroup"}
    assert repr(WORKER.body) == before


def test_env_override_replaces_value_from() -> None:
    body = patch_template(WORKER.body, PodPatch(env={"POD_IP": "10.0.0.9"}))
    assert _env(body)["POD_IP"] == {"name": "POD_IP", "value": "10.0.0.9"}


@pytest.mark.parametrize(
    ("patch", "field"),
    [(PodPatch(cpu_limit="two"), "limits.cpu"), (PodPatch(memory_limit="1Gb"), "limits.memory"),
     (PodPatch(cpu_limit="100m"), "limits.cpu"), (PodPatch(memory_limit="256Mi"), "limits.memory")],
    ids=["cpu-not-quantity", "memory-not-quantity", "cpu-below-request", "memory-below-request"],
)
def test_bad_limits_name_the_field(patch: PodPatch, field: str) -> None:
    with pytest.raises(BadInput) as err:
        patch_template(WORKER.body, patch)
    assert any(p.field.endswith(field) for p in err.value.problems), err.value


PLANNED = {"c-controller-0": "10.213.9.2", "c-worker-0": "10.213.9.3", "c-worker-1": "10.213.9.4",
           "c-login-0": "10.213.9.5"}


@pytest.mark.parametrize(
    ("pod", "in_use", "expected"),
    [
        ("c-worker-1", PLANNED, "10.213.9.4"),  # replacing a pod: its own planned IP
        ("c-worker-1", {}, "10.213.9.4"),  # recreating a deleted pod
        ("c-worker-2", PLANNED, "10.213.9.6"),  # scale-up: first address nobody holds or was planned for
        ("c-worker-2", {"c-controller-0": "10.213.9.2"}, "10.213.9.6"),  # planned IPs stay reserved
        ("c-worker-3", {**PLANNED, "c-worker-2": "10.213.9.6"}, "10.213.9.7"),
        ("c-worker-2", {**PLANNED, "c-worker-2": "10.213.9.40"}, "10.213.9.40"),  # keeps the IP it has
        ("c-worker-1", {"c-worker-9": "10.213.9.4"}, "10.213.9.6"),  # someone took it: a free one
    ],
    ids=["own-planned", "deleted", "scale-up", "reserved", "next-free", "keeps-current", "taken"],
)
def test_choose_ip(pod: str, in_use: dict[str, str], expected: str) -> None:
    assert choose_ip(SUBNET, "10.213.9.1", pod, PLANNED, in_use) == expected


def test_choose_ip_full_subnet() -> None:
    tiny = ipaddress.IPv4Network("10.213.9.0/30")  # hosts .1 (gateway) and .2
    with pytest.raises(Exception, match="no free address"):
        choose_ip(tiny, "10.213.9.1", "c-worker-5", {}, {"c-worker-0": "10.213.9.2"})


@pytest.mark.parametrize(
    ("pod", "expected"),
    [("demo-worker-0", ("demo-worker", 0)), ("demo-worker-12", ("demo-worker", 12)),
     ("demo-controller-0", ("demo-controller", 0))],
)
def test_split_pod_name(pod: str, expected: tuple[str, int]) -> None:
    assert split_pod_name(BUNDLE, "demo", pod) == expected


@pytest.mark.parametrize("pod", ["demo-worker", "demo-worker-x", "other-worker-0", "demo-gpu-0"])
def test_split_pod_name_rejects(pod: str) -> None:
    with pytest.raises(BadInput):
        split_pod_name(BUNDLE, "demo", pod)


def test_plan_pod_equals_the_cluster_plan_for_an_existing_ordinal() -> None:
    resolved = applied.resolve_secrets(BUNDLE, _key)
    plans = {p.name: p for p in podspec.plan_cluster(resolved, PARAMS, _key)}
    one = podspec.plan_pod(resolved, PARAMS, "demo-worker", 1, ip=plans["demo-worker-1"].ip, generate=_key)
    assert one == plans["demo-worker-1"]


def test_plan_pod_beyond_replicas_with_patch() -> None:
    body = patch_template(WORKER.body, PodPatch(cpu_limit="2", memory_limit="12Gi",
                                                annotations={wk.ANNOTATION_FEATURES: "ib"}))
    bundle = manifests.Bundle(BUNDLE.namespace, tuple(manifests.Document(d.source, body) if d is WORKER else d
                                                      for d in BUNDLE.documents))
    plan = podspec.plan_pod(bundle, PARAMS, "demo-worker", 7, ip="10.213.9.77", generate=_key)
    env = plan.env_map()
    assert (plan.name, plan.ordinal, plan.ip) == ("demo-worker-7", 7, "10.213.9.77")
    assert env["POD_IP"] == "10.213.9.77"
    assert (env[wk.ENV_CPU_LIMIT], env[wk.ENV_MEMORY_LIMIT]) == ("2000", str(12 * 1024))
    assert (plan.nano_cpus, plan.mem_limit) == (2 * 10**9, 12 * 2**30)
    assert dict(plan.annotations)[wk.ANNOTATION_FEATURES] == "ib"
    assert plan.pre_stop == ("slurmpod", "prestop")


def test_plan_pod_unknown_statefulset() -> None:
    with pytest.raises(BadInput, match="statefulset"):
        podspec.plan_pod(BUNDLE, PARAMS, "demo-gpu", 0, ip="10.213.9.9", generate=_key)


def test_resolve_secrets_generates_once_and_keeps_values() -> None:
    calls: list[int] = []

    def gen(n: int) -> bytes:
        calls.append(n)
        return b"k" * n

    resolved = applied.resolve_secrets(cluster_auth.configure(BUNDLE, "munge"), gen)
    secret = resolved.find("Secret", "munge")
    assert secret is not None
    assert base64.b64decode(secret.body["data"]["munge.key"]) == b"k" * 1024
    assert calls == [1024]  # the slurm.key Secret has no data with auth munge
    podspec.plan_cluster(resolved, PARAMS, lambda n: pytest.fail("nothing left to generate"))


def test_applied_round_trip(tmp_path: Path) -> None:
    params = dataclasses.replace(PARAMS, published=(Published("login", "ssh", "demo-login-0", "10.213.9.7", 22,
                                                              40022),))
    saved = applied.Applied(params, applied.resolve_secrets(BUNDLE, _key))
    applied.save(tmp_path, saved)
    assert stat.S_IMODE((tmp_path / applied.FILE).stat().st_mode) == 0o600
    loaded = applied.load(tmp_path)
    assert loaded.params == params
    assert loaded.bundle == saved.bundle
    assert podspec.plan_cluster(loaded.bundle, loaded.params, _key) == \
        podspec.plan_cluster(saved.bundle, params, _key)


def test_applied_missing_or_garbage(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="cluster up"):
        applied.load(tmp_path)
    (tmp_path / applied.FILE).write_text("{}", encoding="utf-8")
    with pytest.raises(BadInput):
        applied.load(tmp_path)


def test_a_pod_built_like_slinkys_exact_env_and_moved_mounts() -> None:
    """What tests/cluster/test_slinky.py starts: the operator's env alone, the key under /etc/slurm, no podinfo."""
    patch = PodPatch(env={"POD_CPUS": "1"}, env_exact=True, image_entrypoint=True, args=("-Z",),
                     move_mounts={"/run/secrets/slurmpod/slurm": "/etc/slurm", wk.PODINFO_DIR: None})
    c = _container(patch_template(WORKER.body, patch))
    assert c["env"] == [{"name": "POD_CPUS", "value": "1"}]
    assert "command" not in c and c["args"] == ["-Z"]
    paths = [m["mountPath"] for m in c["volumeMounts"]]
    assert "/etc/slurm" in paths and wk.PODINFO_DIR not in paths and "/run/secrets/slurmpod/slurm" not in paths
    with pytest.raises(BadInput):
        patch_template(WORKER.body, PodPatch(move_mounts={"/nowhere": None}))
