"""NodeSpec semantics: the host's shape is registered, and what the pod may not use is kept from jobs with
CoreSpecCount / MemSpecLimit. Each case goes env + fake machine tree -> PodInfo -> probe -> build.

Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_CoreSpecCount
Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_MemSpecLimit
"""

from __future__ import annotations

import json
from pathlib import Path

import podkit
import pytest
from podkit import Machine

from slurmpod import hardware, podinfo
from slurmpod import well_known as wk
from slurmpod.entrypoints import nodespec
from slurmpod.errors import BadInput
from slurmpod.hardware import Gpu, Hardware
from slurmpod.slurm_version import SlurmVersion

V24 = SlurmVersion(24, 11)
V25 = SlurmVersion(25, 5)
V26 = SlurmVersion(26, 5)
GIB = 1 << 30
TWO_CPUS = Machine()


def _node(
    tmp_path: Path,
    machine: Machine = TWO_CPUS,
    version: SlurmVersion = V24,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **env: str,
) -> nodespec.NodeSpec:
    root = tmp_path / "pod"
    podkit.write_podinfo(root / "podinfo", podkit.worker_labels() if labels is None else labels, annotations)
    hw_root = podkit.write_machine(root / "hw", machine)
    base = {wk.ENV_POD_NAME: podkit.POD, wk.ENV_CONTROLLER: podkit.CONTROLLER}
    pod = podinfo.load({**base, **env}, root / "podinfo")
    return nodespec.build(pod, hardware.probe(hw_root), version, env.get(wk.ENV_NODESET) or None)


def _conf(spec: nodespec.NodeSpec) -> dict[str, str]:
    pairs = [token.split("=", 1) for token in spec.conf_string().split()]
    return {k: v for k, v in pairs}


def test_one_of_two_cpus(tmp_path: Path) -> None:
    conf = _conf(_node(tmp_path, Machine(cores_per_socket=2), SLURMPOD_CPU_LIMIT="1000"))
    assert conf["CPUs"] == "2"
    assert conf["CoreSpecCount"] == "1"
    assert "MemSpecLimit" not in conf


def test_half_the_memory(tmp_path: Path) -> None:
    conf = _conf(_node(tmp_path, Machine(mem_mib=8192), SLURMPOD_MEMORY_LIMIT="4096"))
    assert conf["RealMemory"] == "8192"
    assert conf["MemSpecLimit"] == "4096"  # host - limit
    assert "CoreSpecCount" not in conf


def test_no_limits_no_spec_keys(tmp_path: Path) -> None:
    conf = _conf(_node(tmp_path, Machine(sockets=2, cores_per_socket=4, threads_per_core=2, mem_mib=65536)))
    assert conf == {
        "CPUs": "16",
        "Boards": "1",
        "SocketsPerBoard": "2",
        "CoresPerSocket": "4",
        "ThreadsPerCore": "2",
        "RealMemory": "65536",
        "Features": "workers",
    }


def test_limits_at_or_above_the_host_reserve_nothing(tmp_path: Path) -> None:
    conf = _conf(
        _node(
            tmp_path,
            Machine(cores_per_socket=2, mem_mib=8192),
            SLURMPOD_CPU_LIMIT="64000",
            SLURMPOD_MEMORY_LIMIT="100000",
        )
    )
    assert "CoreSpecCount" not in conf and "MemSpecLimit" not in conf


def test_changing_limits_changes_values(tmp_path: Path) -> None:
    """NodeSpec is computed fresh from each PodInfo: nothing carries over from an earlier build."""
    machine = Machine(cores_per_socket=8, mem_mib=32768)
    first = _conf(_node(tmp_path / "a", machine, SLURMPOD_CPU_LIMIT="2000", SLURMPOD_MEMORY_LIMIT="8192"))
    second = _conf(_node(tmp_path / "b", machine, SLURMPOD_CPU_LIMIT="6000", SLURMPOD_MEMORY_LIMIT="30000"))
    third = _conf(_node(tmp_path / "c", machine))
    assert (first["CoreSpecCount"], first["MemSpecLimit"]) == ("6", "24576")
    assert (second["CoreSpecCount"], second["MemSpecLimit"]) == ("2", "2768")
    assert "CoreSpecCount" not in third and "MemSpecLimit" not in third


@pytest.mark.parametrize(
    ("limit", "core_spec"),
    [("16000", None), ("15000", None), ("14000", "1"), ("5000", "5"), ("2000", "7"), ("1000", "7"), ("500", "7")],
    ids=["all", "15-cpus-one-thread-short", "14-cpus", "5-cpus", "2-cpus-one-core", "1-cpu", "half-cpu"],
)
def test_hyperthreaded_two_sockets(tmp_path: Path, limit: str, core_spec: str | None) -> None:
    """2 sockets x 4 cores x 2 threads: whole cores are kept back, rounding the pod's CPUs up to cores."""
    conf = _conf(_node(tmp_path, Machine(sockets=2, cores_per_socket=4, threads_per_core=2), SLURMPOD_CPU_LIMIT=limit))
    assert (conf["CPUs"], conf["SocketsPerBoard"], conf["CoresPerSocket"], conf["ThreadsPerCore"]) == (
        "16",
        "2",
        "4",
        "2",
    )
    assert conf.get("CoreSpecCount") == core_spec


@pytest.mark.parametrize(
    ("machine", "core_spec", "mem_spec"),
    [
        (
            Machine(cores_per_socket=4, mem_mib=8192, cgroup="v2", cpu_quota_us=100_000, mem_limit_bytes=2 * GIB),
            "3",
            "6144",
        ),
        (
            Machine(cores_per_socket=4, mem_mib=8192, cgroup="v1", cpu_quota_us=300_000, mem_limit_bytes=6 * GIB),
            "1",
            "2048",
        ),
        (Machine(cores_per_socket=4, mem_mib=8192, cgroup="v1"), None, None),
        (Machine(cores_per_socket=4, mem_mib=8192, cgroup="v2"), None, None),
    ],
    ids=["v2-quota", "v1-quota", "v1-unlimited", "v2-max"],
)
def test_cgroup_quota_applied(tmp_path: Path, machine: Machine, core_spec: str | None, mem_spec: str | None) -> None:
    conf = _conf(_node(tmp_path, machine))
    assert (conf.get("CoreSpecCount"), conf.get("MemSpecLimit")) == (core_spec, mem_spec)


def test_tightest_of_env_and_cgroup_wins(tmp_path: Path) -> None:
    machine = Machine(cores_per_socket=8, mem_mib=8192, cgroup="v2", cpu_quota_us=400_000, mem_limit_bytes=GIB)
    conf = _conf(_node(tmp_path, machine, SLURMPOD_CPU_LIMIT="2000", SLURMPOD_MEMORY_LIMIT="4096"))
    assert (conf["CoreSpecCount"], conf["MemSpecLimit"]) == ("6", "7168")


def test_cpuset_restriction(tmp_path: Path) -> None:
    conf = _conf(_node(tmp_path, Machine(cores_per_socket=8, allowed="0-2")))
    assert (conf["CPUs"], conf["CoreSpecCount"]) == ("8", "5")


def test_slinky_env(tmp_path: Path) -> None:
    conf = _conf(_node(tmp_path, Machine(cores_per_socket=4, mem_mib=8192), POD_CPUS="1", POD_MEMORY="1024"))
    assert (conf["CoreSpecCount"], conf["MemSpecLimit"]) == ("3", "7168")


@pytest.mark.parametrize(
    ("version", "env", "label", "expected"),
    [
        (V25, "", None, None),
        (V25, "   ", None, None),
        (V25, None, "", None),
        (V24, "block1", None, None),
        (V24, "tree:s1", "rack3", None),
        (V25, "block1", None, "default:block1"),
        (V25, "topo-net:s1", None, "topo-net:s1"),
        (V26, None, "rack3", "default:rack3"),
        (V26, "blk:b7", "rack3", "blk:b7"),
        (V26, None, "block1/host3", "default:block1"),
        (V25, "spine1/block1/host3", None, "default:block1"),
        (V24, "spine1/block1/host3", None, None),
    ],
    ids=[
        "25.05-empty-env",
        "25.05-blank-env",
        "25.05-empty-label",
        "24.11-never",
        "24.11-never-named",
        "25.05-default-unit",
        "25.05-named",
        "26.05-label",
        "26.05-env-over-label",
        "26.05-label-path",
        "25.05-env-path-innermost-unit",
        "24.11-path-never",
    ],
)
def test_topology(
    tmp_path: Path, version: SlurmVersion, env: str | None, label: str | None, expected: str | None
) -> None:
    labels = podkit.worker_labels()
    if label is not None:
        labels[wk.LABEL_TOPOLOGY] = label
    if env is None:
        spec = _node(tmp_path, version=version, labels=labels)
    else:
        spec = _node(tmp_path, version=version, labels=labels, SLINKY_TOPOLOGY=env)
    assert spec.topology == expected
    conf = spec.conf_string()
    if expected is None:
        assert "Topology" not in conf
    else:
        assert conf.endswith(f" Topology={expected}")


def test_features_weight_and_nodeset(tmp_path: Path) -> None:
    spec = _node(
        tmp_path, annotations={wk.ANNOTATION_FEATURES: " h100 , nvlink,workers,, ib-ndr ", wk.ANNOTATION_WEIGHT: " 50 "}
    )
    assert spec.features == ("workers", "h100", "nvlink", "ib-ndr")
    assert _conf(spec)["Features"] == "workers,h100,nvlink,ib-ndr"
    assert _conf(spec)["Weight"] == "50"


def test_nodeset_env_overrides_label(tmp_path: Path) -> None:
    spec = _node(tmp_path, SLURMPOD_NODESET="gpu-pool")
    assert spec.features == ("gpu-pool",)


def test_no_nodeset_no_features(tmp_path: Path) -> None:
    spec = _node(tmp_path, labels={wk.LABEL_ROLE: "worker"})
    assert "Features" not in spec.conf_string()
    assert spec.weight is None


def test_every_problem_at_once(tmp_path: Path) -> None:
    with pytest.raises(BadInput) as err:
        _node(
            tmp_path,
            version=V25,
            labels={wk.LABEL_NODESET: "a b"},
            annotations={wk.ANNOTATION_FEATURES: "ok,x&y", wk.ANNOTATION_WEIGHT: "heavy"},
            SLINKY_TOPOLOGY="t:u:v",
        )
    assert {p.value for p in err.value.problems} == {"a b", "x&y", "heavy", "u:v"}


def test_static_line_and_conf_string(tmp_path: Path) -> None:
    spec = _node(tmp_path, Machine(cores_per_socket=2, mem_mib=4096), SLURMPOD_CPU_LIMIT="1000")
    assert spec.conf_string() == (
        "CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 "
        "RealMemory=4096 CoreSpecCount=1 Features=workers"
    )
    assert spec.node_line() == f"NodeName={podkit.POD} {spec.conf_string()} State=UNKNOWN"


def _gpu_host(gpus: tuple[Gpu, ...]) -> Hardware:
    return Hardware(
        cpus=16,
        sockets=2,
        cores_per_socket=8,
        threads_per_core=1,
        allowed_cpus=tuple(range(16)),
        cgroup_cpu_millis=None,
        memory_mib=65536,
        cgroup_memory_mib=None,
        gpus=gpus,
    )


def test_gres(tmp_path: Path) -> None:
    gpus = (
        Gpu(0, 0, "GPU-aaaa", "NVIDIA H100", (0, 1, 2, 3, 4, 5, 6, 7)),
        Gpu(1, 3, "GPU-bbbb", "NVIDIA H100", (8, 10, 11, 12)),
        Gpu(2, 4, "GPU-cccc", "NVIDIA H100", ()),
    )
    pod = podinfo.load({wk.ENV_POD_NAME: "gpu-0", wk.ENV_CONTROLLER: "ctl"}, tmp_path)
    spec = nodespec.build(pod, _gpu_host(gpus), V24)
    assert _conf(spec)["Gres"] == "gpu:3"
    assert spec.gres_conf() == (
        "NodeName=gpu-0 Name=gpu File=/dev/nvidia0 Cores=0-7\n"
        "NodeName=gpu-0 Name=gpu File=/dev/nvidia3 Cores=8,10-12\n"
        "NodeName=gpu-0 Name=gpu File=/dev/nvidia4\n"
    )


def test_no_gpus_no_gres(tmp_path: Path) -> None:
    pod = podinfo.load({wk.ENV_POD_NAME: "cpu-0", wk.ENV_CONTROLLER: "ctl"}, tmp_path)
    spec = nodespec.build(pod, _gpu_host(()), V24)
    assert "Gres" not in spec.conf_string()
    assert spec.gres_conf() == ""


@pytest.mark.parametrize("version", [V24, V26], ids=["24.11", "26.05"])
@pytest.mark.parametrize("source", ["annotation", "label", "env"])
def test_placement_reaches_slurmd_extra(tmp_path: Path, version: SlurmVersion, source: str) -> None:
    """The pod's placement, in any form, reaches slurmctld as `slurmd --extra` JSON on every version."""
    labels, annotations, env = podkit.worker_labels(), {}, {}
    if source == "annotation":
        annotations[wk.ANNOTATION_TOPOLOGY] = "block1/host3"
    elif source == "label":
        labels[wk.LABEL_TOPOLOGY] = "block1/host3"
    else:
        env["SLINKY_TOPOLOGY"] = "block1/host3"
    spec = _node(tmp_path, version=version, labels=labels, annotations=annotations, **env)
    assert spec.extra is not None
    assert json.loads(spec.extra) == {wk.EXTRA_TOPOLOGY_KEY: "block1/host3"}
    assert (spec.topology is not None) is version.node_topology


@pytest.mark.parametrize("bad", ["block 1/host3", "b1//h3", "b1/h3\nNodeName=x", "topo:", "a:b:c"],
                         ids=["space", "empty-part", "newline", "empty-unit", "two-colons"])
def test_bad_placement_is_bad_input_on_every_version(tmp_path: Path, bad: str) -> None:
    labels = podkit.worker_labels()
    labels[wk.LABEL_TOPOLOGY] = bad
    for version in (V24, V26):
        with pytest.raises(BadInput) as err:
            _node(tmp_path, version=version, labels=labels)
        assert wk.LABEL_TOPOLOGY in err.value.problems[0].field


def test_no_placement_no_extra(tmp_path: Path) -> None:
    spec = _node(tmp_path, version=V26)
    assert spec.extra is None
