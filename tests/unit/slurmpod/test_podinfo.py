"""PodInfo from the downward-API environment and files: what a valid pod yields, and that every problem
is reported at once (single-field refusals run through the real command in test_corpus.py)."""

from __future__ import annotations

from pathlib import Path

import podkit
import pytest

from slurmpod import podinfo
from slurmpod import well_known as wk
from slurmpod.errors import BadInput


def test_valid_worker(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path)
    env = pod.env(SLURMPOD_CPU_LIMIT="4000", SLURMPOD_MEMORY_LIMIT="16384", SLURMPOD_GRACE_SECONDS="90")
    info = podinfo.load(env, pod.podinfo)
    assert info.name == podkit.POD
    assert info.namespace == "default"
    assert info.uid == "0b7c7a4e-2f5e-4d3a-9a55-3f1b2c7d9e10"
    assert info.node_name == "k8s-node-1"
    assert info.pod_ip == "10.244.1.7"
    assert info.host_ip == "192.168.49.2"
    assert info.cluster_name == "slurmpod"
    assert info.controller == podkit.CONTROLLER
    assert info.cpu_limit_millis == 4000
    assert info.memory_limit_mib == 16384
    assert info.grace_seconds == 90
    assert info.topology == ""
    assert info.labels[wk.LABEL_NODESET] == "workers"
    assert info.annotations == {"kubectl.kubernetes.io/default-container": "worker"}


def test_minimal_env_defaults(tmp_path: Path) -> None:
    info = podinfo.load({wk.ENV_POD_NAME: "w-0", wk.ENV_CONTROLLER: "ctl"}, tmp_path)
    assert (info.namespace, info.cluster_name) == ("default", "slurmpod")
    assert info.cpu_limit_millis is None
    assert info.memory_limit_mib is None
    assert info.grace_seconds == podinfo.DEFAULT_GRACE_SECONDS
    assert (info.pod_ip, info.host_ip) == ("", "")
    assert dict(info.labels) == {} and dict(info.annotations) == {}  # no files: empty maps


def test_controller_needs_no_controller_address(tmp_path: Path) -> None:
    info = podinfo.load({wk.ENV_POD_NAME: "slurmpod-controller-0"}, tmp_path, require_controller=False)
    assert info.controller == ""
    with pytest.raises(BadInput, match="SLURMPOD_CONTROLLER"):
        podinfo.load({wk.ENV_POD_NAME: "slurmpod-worker-0"}, tmp_path)


def test_ipv6_pod_ip_normalised(tmp_path: Path) -> None:
    env = {wk.ENV_POD_NAME: "w-0", wk.ENV_CONTROLLER: "ctl", wk.ENV_POD_IP: "FD00:0:0::7"}
    assert podinfo.load(env, tmp_path).pod_ip == "fd00::7"


@pytest.mark.parametrize(
    ("env", "cpu", "mem"),
    [
        ({"POD_CPUS": "3", "POD_MEMORY": "2048"}, 3000, 2048),
        ({"POD_CPUS": "3", wk.ENV_CPU_LIMIT: "1500"}, 1500, None),
        ({"POD_MEMORY": "2048", wk.ENV_MEMORY_LIMIT: "1024"}, None, 1024),
        (
            {wk.ENV_CPU_LIMIT: str(podinfo.MAX_CPU_MILLIS), wk.ENV_MEMORY_LIMIT: str(podinfo.MAX_MEMORY_MIB)},
            podinfo.MAX_CPU_MILLIS,
            podinfo.MAX_MEMORY_MIB,
        ),
    ],
    ids=["slinky-only", "downward-api-cpu-wins", "downward-api-memory-wins", "at-the-maximum"],
)
def test_limits(tmp_path: Path, env: dict[str, str], cpu: int | None, mem: int | None) -> None:
    info = podinfo.load({wk.ENV_POD_NAME: "w-0", wk.ENV_CONTROLLER: "ctl", **env}, tmp_path)
    assert (info.cpu_limit_millis, info.memory_limit_mib) == (cpu, mem)


@pytest.mark.parametrize(
    ("env_value", "label", "expected"),
    [
        ("block1:host3", None, "block1:host3"),
        (None, "rack7", "rack7"),
        ("  b2  ", "rack7", "b2"),
        ("", "rack7", "rack7"),
        ("   ", None, ""),
        (None, None, ""),
    ],
    ids=["slinky-env", "label", "env-wins-and-is-stripped", "empty-env-falls-back", "blank", "neither"],
)
def test_topology_source(tmp_path: Path, env_value: str | None, label: str | None, expected: str) -> None:
    podkit.write_podinfo(tmp_path, {wk.LABEL_TOPOLOGY: label} if label is not None else {})
    env = {wk.ENV_POD_NAME: "w-0", wk.ENV_CONTROLLER: "ctl"}
    if env_value is not None:
        env[wk.ENV_SLINKY_TOPOLOGY] = env_value
    assert podinfo.load(env, tmp_path).topology == expected


def test_every_problem_reported_at_once(tmp_path: Path) -> None:
    (tmp_path / wk.PODINFO_LABELS).write_text("broken\n")
    env = {
        wk.ENV_POD_NAME: "Bad_Name",
        wk.ENV_CPU_LIMIT: "-1",
        wk.ENV_MEMORY_LIMIT: "lots",
        wk.ENV_POD_IP: "1.2.3",
        wk.ENV_CLUSTER_NAME: "a b",
        wk.ENV_GRACE_SECONDS: "0",
    }
    with pytest.raises(BadInput) as err:
        podinfo.load(env, tmp_path)
    fields = {p.field for p in err.value.problems}
    assert fields == {
        wk.ENV_POD_NAME,
        wk.ENV_CPU_LIMIT,
        wk.ENV_MEMORY_LIMIT,
        wk.ENV_POD_IP,
        wk.ENV_CLUSTER_NAME,
        wk.ENV_GRACE_SECONDS,
        wk.ENV_CONTROLLER,
        f"{tmp_path / wk.PODINFO_LABELS}:1",
    }
    values = {p.field: p.value for p in err.value.problems}
    assert values[wk.ENV_POD_NAME] == "Bad_Name"
    assert values[wk.ENV_MEMORY_LIMIT] == "lots"


def test_podinfo_file_not_utf8(tmp_path: Path) -> None:
    (tmp_path / wk.PODINFO_ANNOTATIONS).write_bytes(b'a="\xff"\n')
    with pytest.raises(BadInput, match="cannot read"):
        podinfo.load({wk.ENV_POD_NAME: "w-0", wk.ENV_CONTROLLER: "ctl"}, tmp_path)


def test_podinfo_is_immutable(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path)
    info = podinfo.load(pod.env(), pod.podinfo)
    with pytest.raises(TypeError):
        info.labels["x"] = "y"  # type: ignore[index]
    with pytest.raises(AttributeError):
        info.name = "other"  # type: ignore[misc]


def test_read_env_file(tmp_path: Path) -> None:
    f = tmp_path / "pod.env"
    f.write_text("# a comment\n\nPOD_NAME=w-0\n  SLURMPOD_CPU_LIMIT=2000\nEMPTY=\nWITH_EQ=a=b\n")
    assert podinfo.read_env_file(f) == {"POD_NAME": "w-0", "SLURMPOD_CPU_LIMIT": "2000", "EMPTY": "", "WITH_EQ": "a=b"}


def test_read_env_file_reports_every_bad_line(tmp_path: Path) -> None:
    f = tmp_path / "pod.env"
    f.write_text("OK=1\nnot a pair\n=value\n")
    with pytest.raises(BadInput) as err:
        podinfo.read_env_file(f)
    assert [p.field for p in err.value.problems] == [f"{f}:2", f"{f}:3"]
