"""The downward-API env and files the real kubelet gives a worker parse into the same PodInfo the
emulator produces for the same manifest, field by field. What differs by nature (uid, IPs, node) is
checked against the API's own values; the labels and annotations only a real control plane or only the
emulator adds are the ones docs/kubernetes.md lists, and nothing else differs."""

from __future__ import annotations

import dataclasses
import ipaddress
import re
import uuid
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

import pytest
from kubekit import NAMESPACE, RELEASE, Kube, session_values

from slurmpod import podinfo
from slurmpod import well_known as wk
from slurmpod_host.cluster import auth, manifests, podspec
from slurmpod_host.kube import release

NATURE = {"uid", "pod_ip", "host_ip", "node_name", "labels", "annotations"}
# Labels the emulator sets that a 1.20 StatefulSet controller does not (pod-index: 1.28+).
# Ref: https://kubernetes.io/docs/reference/labels-annotations-taints/#apps-kubernetes.io-pod-index
EMULATOR_ONLY_LABELS = {"apps.kubernetes.io/pod-index"}
# Annotations a 1.20 API server adds that the emulator does not: 1.19-1.24 mirror the pod's
# securityContext.seccompProfile into the deprecated annotation, which later releases drop.
# Ref: https://kubernetes.io/docs/tutorials/security/seccomp/
API_SERVER_ONLY_ANNOTATIONS = {"seccomp.security.alpha.kubernetes.io/pod"}
# Values that differ by nature: the controller's own template hash, the kubelet's clock.
DIFFERENT_VALUES = {"controller-revision-hash", "kubernetes.io/config.seen"}
# Written by k8s-sync after the pod starts (the Slurm state), so the kubelet projects it too; no pod
# input reads it.
LIVE_LABELS = {wk.LABEL_SLURM_STATE}
RFC3339_NANO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z")


def _emulated(kube: Kube, pod: str, tmp_path: Path) -> podinfo.PodInfo:
    rendered = release.helm(kube.layout, kube.chart, "template", RELEASE, str(kube.chart.path), "-n", NAMESPACE,
                            *session_values(kube.flavor))
    assert rendered.returncode == 0, rendered.stderr
    src = tmp_path / "manifests"
    src.mkdir()
    (src / "slurmpod.yaml").write_text(rendered.stdout)
    (src / manifests.KUSTOMIZATION).write_text("resources: [slurmpod.yaml]\n")
    bundle = auth.configure(manifests.load(src), "munge", ssh_host_key=b"k")
    params = podspec.ClusterParams(name=RELEASE, subnet=ipaddress.IPv4Network("10.213.9.0/24"),
                                   cluster_uid=uuid.UUID(int=7), created=datetime.now(UTC),
                                   node_cpu=Fraction(2), node_memory=Fraction(2**34))
    (plan,) = [p for p in podspec.plan_cluster(bundle, params, lambda n: b"k" * n) if p.name == pod]
    files = tmp_path / "emulated"
    files.mkdir()
    for f in plan.files:
        if f.path.startswith(f"pods/{pod}/volumes/podinfo/..") and not f.symlink_to and f.content:
            (files / Path(f.path).name).write_bytes(f.content)
    return podinfo.load(dict(plan.env), files)


def _real(kube: Kube, pod: str, tmp_path: Path) -> podinfo.PodInfo:
    env_out = kube.exec(pod, "env", "-0")
    assert env_out.returncode == 0, env_out.stderr
    env = dict(item.split("=", 1) for item in env_out.stdout.split("\0") if "=" in item)
    files = tmp_path / "real"
    files.mkdir()
    for name in ("labels", "annotations"):
        got = kube.exec(pod, "cat", f"/etc/podinfo/{name}")
        assert got.returncode == 0, got.stderr
        lines = [line for line in got.stdout.splitlines(keepends=True)
                 if line.split("=", 1)[0] not in LIVE_LABELS]
        (files / name).write_text("".join(lines))
    # The kubelet's atomic writer: each file is a symlink into ..data, itself a symlink to a stamped dir.
    # Ref: https://github.com/kubernetes/kubernetes/blob/v1.20.2/pkg/volume/util/atomic_writer.go
    link = kube.exec(pod, "readlink", "/etc/podinfo/labels", "/etc/podinfo/..data")
    assert link.stdout.split()[0] == "..data/labels" and link.stdout.split()[1].startswith(".."), link.stdout
    return podinfo.load(env, files)


@pytest.mark.parametrize("role", ["worker", "controller", "login"])
def test_downward_api_parses_into_the_emulators_podinfo(kube: Kube, tmp_path: Path, role: str) -> None:
    pod = {"worker": kube.workers[0], "controller": kube.controller, "login": kube.login}[role]
    real = _real(kube, pod, tmp_path)
    emulated = _emulated(kube, pod, tmp_path)
    for field in dataclasses.fields(podinfo.PodInfo):
        if field.name not in NATURE:
            assert getattr(real, field.name) == getattr(emulated, field.name), field.name
    obj = kube.get("pod", pod)
    assert real.uid == obj["metadata"]["uid"]
    assert real.pod_ip == obj["status"]["podIP"]
    assert real.host_ip == obj["status"]["hostIP"]
    assert real.node_name == obj["spec"]["nodeName"]
    assert set(emulated.labels) - set(real.labels) == EMULATOR_ONLY_LABELS
    assert set(real.labels) - set(emulated.labels) == set()
    assert set(real.annotations) - set(emulated.annotations) == API_SERVER_ONLY_ANNOTATIONS
    assert set(emulated.annotations) - set(real.annotations) == set()
    for key in set(real.labels) & set(emulated.labels) | set(emulated.annotations):
        r = real.labels.get(key, real.annotations.get(key))
        e = emulated.labels.get(key, emulated.annotations.get(key))
        assert key in DIFFERENT_VALUES or r == e, f"{key}: kubelet {r!r}, emulator {e!r}"
    assert RFC3339_NANO.fullmatch(real.annotations["kubernetes.io/config.seen"])
    assert RFC3339_NANO.fullmatch(emulated.annotations["kubernetes.io/config.seen"])
    assert real.labels["controller-revision-hash"] == obj["metadata"]["labels"]["controller-revision-hash"]
    assert real.labels == {k: v for k, v in obj["metadata"]["labels"].items() if k not in LIVE_LABELS}
