"""Rendered files pinned byte for byte by golden files in tests/unit/golden/.

Regenerate after an intended change with
    SLURMPOD_UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/entrypoints/test_golden.py
(the rewritten cases fail), review the diff, and rerun without it. The slurmpod version in headers is
replaced by VERSION so releases do not churn them.
"""

from __future__ import annotations

import random
from pathlib import Path

import podkit
import pytest
import yaml
from golden import check_golden
from podkit import Machine

from slurmpod import hardware, podinfo
from slurmpod import well_known as wk
from slurmpod.entrypoints import cluster_spec, nodespec, programs, render, start, topology_sync
from slurmpod.hardware import Gpu
from slurmpod.nodestate import NodeState
from slurmpod.slurm_version import SlurmVersion
from slurmpod.topology import extra_placements, kube

SPECS = {
    "basic": podkit.SPEC_BASIC,
    "preempt-topology-cgroups": podkit.SPEC_PREEMPT,
    "auth-slurm": podkit.SPEC_BASIC.replace("auth: munge", "auth: slurm"),
    "policy-slurmpod": podkit.SPEC_BASIC + "policy: slurmpod\n",
    "policy-lua": podkit.SPEC_BASIC + "policy: lua\n",
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_slurm_conf(name: str) -> None:
    spec = cluster_spec.parse(yaml.safe_load(SPECS[name]))
    text = render.slurm_conf(spec, podkit.CONTROLLER)
    check_golden(f"slurm.conf.{name}", text)
    assert render.slurm_conf(spec, podkit.CONTROLLER) == text


def test_slurm_conf_on_26_05() -> None:
    """The one difference by version: the requeued job's hold is requeue_delay, not cred_expire."""
    spec = cluster_spec.parse(yaml.safe_load(SPECS["basic"]))
    text = render.slurm_conf(spec, podkit.CONTROLLER, version=SlurmVersion(26, 5))
    check_golden("slurm.conf.basic-26.05", text)


def test_cgroup_conf() -> None:
    check_golden("cgroup.conf", render.cgroup_conf())


def _plan(tmp_path: Path, role: str) -> start.StartPlan:
    spec = podkit.SPEC_PREEMPT if role == "controller" else podkit.SPEC_BASIC
    pod = podkit.make_pod(tmp_path, role, Machine(sockets=2, cores_per_socket=4, threads_per_core=2), spec)
    env = pod.env(role, SLURMPOD_RUN_DIR=wk.RUN_DIR, SLURMPOD_GRACE_SECONDS="60")
    return podkit.plan(role, env)  # plan only: nothing is written


@pytest.mark.parametrize("role", wk.ROLES)
def test_supervisord_conf(tmp_path: Path, role: str) -> None:
    plan = _plan(tmp_path, role)
    check_golden(f"supervisord.{role}.conf", plan.supervisord_conf)
    assert _plan(tmp_path / "again", role).supervisord_conf == plan.supervisord_conf


def test_supervisord_conf_ignores_program_order() -> None:
    progs = [
        programs.munged(),
        programs.slurmctld("munge"),
        programs.sshd(),
        programs.slurmpod_task("node-reaper", ["daemon", "node-reaper"], restart="true"),
    ]
    expected = render.supervisord_conf("controller", progs, 10)
    for seed in range(5):
        shuffled = progs[:]
        random.Random(seed).shuffle(shuffled)
        assert render.supervisord_conf("controller", shuffled, 10) == expected


def _worker(tmp_path: Path, gpus: tuple[Gpu, ...] = ()) -> nodespec.NodeSpec:
    """A 2-socket hyperthreaded worker limited to 10 CPUs and 48 GiB, on Slurm 25.05 with a topology unit."""
    root = podkit.write_machine(
        tmp_path / "hw", Machine(sockets=2, cores_per_socket=8, threads_per_core=2, mem_mib=128 * 1024)
    )
    podkit.write_podinfo(
        tmp_path / "podinfo",
        podkit.worker_labels("h100"),
        {wk.ANNOTATION_FEATURES: "nvlink,ib-ndr", wk.ANNOTATION_WEIGHT: "10"},
    )
    env = {
        wk.ENV_POD_NAME: "gpu-farm-worker-3",
        wk.ENV_CONTROLLER: "gpu-farm-controller-0",
        wk.ENV_CPU_LIMIT: "10000",
        wk.ENV_MEMORY_LIMIT: str(48 * 1024),
        wk.ENV_SLINKY_TOPOLOGY: "block2",
    }
    pod = podinfo.load(env, tmp_path / "podinfo")
    return nodespec.build(pod, hardware.probe(root, gpus), SlurmVersion(25, 5))


def test_worker_conf_string_and_static_line(tmp_path: Path) -> None:
    node = _worker(tmp_path)
    check_golden("worker.conf", node.conf_string() + "\n")
    check_golden("worker.static", node.node_line() + "\n")


GPUS = (
    Gpu(
        index=0,
        minor=0,
        uuid="GPU-5d3f1a2b-0000-4c1e-9f00-000000000000",
        name="NVIDIA H100 80GB HBM3",
        cpu_affinity=tuple(range(0, 8)) + tuple(range(16, 24)),
    ),
    Gpu(
        index=1,
        minor=1,
        uuid="GPU-5d3f1a2b-0001-4c1e-9f00-000000000001",
        name="NVIDIA H100 80GB HBM3",
        cpu_affinity=tuple(range(8, 16)) + tuple(range(24, 32)),
    ),
)


def test_gres_conf_two_gpus(tmp_path: Path) -> None:
    node = _worker(tmp_path, GPUS)
    check_golden("gres.conf.2gpu", node.gres_conf())
    check_golden("worker-2gpu.conf", node.conf_string() + "\n")


def test_run_scripts(tmp_path: Path) -> None:
    conf = _worker(tmp_path).conf_string()
    scripts = [
        programs.munged(),
        programs.slurmctld("munge"),
        programs.slurmctld("slurm"),
        programs.slurmd("munge", "gpu-farm-controller-0", conf, claim=True),
        programs.slurmd("slurm", "gpu-farm-controller-0", conf),
        programs.sackd("munge", "gpu-farm-controller-0:7817"),
        programs.sackd("slurm", "gpu-farm-controller-0"),
        programs.sshd(),
        programs.slurmpod_task("node-reaper", ["daemon", "node-reaper", "--node-timeout", "300"], restart="true"),
    ]
    text = "".join(
        f"=== {p.name} (priority {p.priority}, user {p.user}, restart {p.restart})\n{p.script}" for p in scripts
    )
    check_golden("run-scripts.sh.txt", text)


class _Registered:
    """Four workers in two blocks as slurmctld reports them (their `slurmd --extra` placements)."""

    def __init__(self, count: int) -> None:
        self.count = count

    def read(self) -> tuple[tuple[kube.KubeNode, ...], None]:
        states = [NodeState(f"gpu-farm-worker-{i}", "IDLE",
                            extra=f'{{"{wk.EXTRA_TOPOLOGY_KEY}": "b{i // 2 + 1}/host{i}"}}')
                  for i in range(self.count)]
        return extra_placements.kube_nodes(states), None


@pytest.mark.parametrize(("version", "plugin", "workers"), [
    ("24.11", "tree", 0), ("24.11", "tree", 4), ("26.05", "block", 0), ("26.05", "block", 4),
    ("26.05", "tree", 4),
], ids=["24.11-tree-start", "24.11-tree-4", "26.05-block-start", "26.05-block-4", "26.05-tree-4"])
def test_controller_topology(version: str, plugin: str, workers: int) -> None:
    """What the controller writes at start (no worker registered yet) and once four have registered."""
    spec = cluster_spec.parse({"topologyPlugin": plugin})
    tgt = topology_sync.target(spec, SlurmVersion.parse(version))
    assert tgt is not None
    text = topology_sync.render_now(tgt, _Registered(workers) if workers else None)
    check_golden(f"topology.{version}-{plugin}-{workers}w.{tgt.path.name.rsplit('.', 1)[1]}", text)
