"""Builders for the pod-start unit tests: a fake machine, downwardAPI files, secrets and an environment.

Everything lives under a directory the test owns (``tmp_path``); nothing touches the host's /etc or /run.
The fake machine tree mirrors what ``slurmpod.hardware.probe`` reads:
Ref: https://docs.kernel.org/admin-guide/cputopology.html (sys/devices/system/cpu)
Ref: https://docs.kernel.org/admin-guide/cgroup-v2.html (cpu.max, memory.max)
Ref: https://docs.kernel.org/admin-guide/cgroup-v1/memory.html (memory.limit_in_bytes)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from slurmpod import kubelet_format
from slurmpod import well_known as wk
from slurmpod.entrypoints import slinky, start

KEY_BYTES = 1024  # what `mungekey` makes
POD = "slurmpod-worker-0"
CONTROLLER = "slurmpod-controller-0"


@dataclass(frozen=True, slots=True)
class Machine:
    """The shape of a fake host and the cgroup limits of the fake container on it."""

    sockets: int = 1
    cores_per_socket: int = 2
    threads_per_core: int = 1
    mem_mib: int = 8192
    allowed: str | None = None  # Cpus_allowed_list; None = every online CPU
    cgroup: str = "none"  # none | v1 | v2
    cpu_quota_us: int | None = None  # None = unlimited (v1 -1, v2 "max")
    cpu_period_us: int = 100_000
    mem_limit_bytes: int | None = None  # None = unlimited
    topology_files: bool = True

    @property
    def cpus(self) -> int:
        return self.sockets * self.cores_per_socket * self.threads_per_core


def write_machine(root: Path, m: Machine = Machine()) -> Path:
    """A sysfs/procfs tree under ``root``. CPUs are numbered the Linux way for SMT: thread t of core c
    on socket s is cpu (t * sockets * cores + s * cores + c)."""
    cpu_dir = root / "sys/devices/system/cpu"
    cpu_dir.mkdir(parents=True, exist_ok=True)
    (cpu_dir / "online").write_text(f"0-{m.cpus - 1}\n" if m.cpus > 1 else "0\n")
    if m.topology_files:
        per_thread = m.sockets * m.cores_per_socket
        for cpu in range(m.cpus):
            socket, core = divmod(cpu % per_thread, m.cores_per_socket)
            topo = cpu_dir / f"cpu{cpu}/topology"
            topo.mkdir(parents=True, exist_ok=True)
            (topo / "physical_package_id").write_text(f"{socket}\n")
            (topo / "core_id").write_text(f"{core}\n")
    proc = root / "proc/self"
    proc.mkdir(parents=True, exist_ok=True)
    (root / "proc/meminfo").write_text(
        f"MemTotal:       {m.mem_mib * 1024} kB\nMemFree:        {m.mem_mib * 512} kB\n"
        f"MemAvailable:   {m.mem_mib * 768} kB\n"
    )
    allowed = m.allowed if m.allowed is not None else (f"0-{m.cpus - 1}" if m.cpus > 1 else "0")
    (proc / "status").write_text(
        f"Name:\tslurmd\nState:\tS (sleeping)\nCpus_allowed:\tff\nCpus_allowed_list:\t{allowed}\n"
        "Mems_allowed_list:\t0\n"
    )
    cg = root / "sys/fs/cgroup"
    if m.cgroup == "v2":
        cg.mkdir(parents=True, exist_ok=True)
        quota = "max" if m.cpu_quota_us is None else str(m.cpu_quota_us)
        (cg / "cpu.max").write_text(f"{quota} {m.cpu_period_us}\n")
        (cg / "memory.max").write_text("max\n" if m.mem_limit_bytes is None else f"{m.mem_limit_bytes}\n")
    elif m.cgroup == "v1":
        cpu_cg = cg / "cpu,cpuacct"
        mem_cg = cg / "memory"
        cpu_cg.mkdir(parents=True, exist_ok=True)
        mem_cg.mkdir(parents=True, exist_ok=True)
        (cpu_cg / "cpu.cfs_quota_us").write_text(f"{-1 if m.cpu_quota_us is None else m.cpu_quota_us}\n")
        (cpu_cg / "cpu.cfs_period_us").write_text(f"{m.cpu_period_us}\n")
        # The kernel's "unlimited" on 64-bit: PAGE_COUNTER_MAX * 4096.
        unlimited = 9_223_372_036_854_771_712
        value = unlimited if m.mem_limit_bytes is None else m.mem_limit_bytes
        (mem_cg / "memory.limit_in_bytes").write_text(f"{value}\n")
    return root


def write_podinfo(
    directory: Path, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None
) -> Path:
    """The downwardAPI volume as kubelet writes it (Go-quoted, sorted)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / wk.PODINFO_LABELS).write_text(kubelet_format.render(labels or {}), encoding="utf-8")
    (directory / wk.PODINFO_ANNOTATIONS).write_text(kubelet_format.render(annotations or {}), encoding="utf-8")
    return directory


def write_key(path: Path, size: int = KEY_BYTES, mode: int = 0o400) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes((i * 7 + 3) % 256 for i in range(size)))
    path.chmod(mode)
    return path


def worker_labels(nodeset: str = "workers") -> dict[str, str]:
    return {wk.LABEL_ROLE: "worker", wk.LABEL_NODESET: nodeset, "app.kubernetes.io/instance": "slurmpod"}


SPEC_BASIC = """\
clusterName: slurmpod
auth: munge
partitions:
  - {name: main, nodesets: [workers], default: true, priorityTier: 1, preemptMode: "OFF", graceTime: 0,
     maxTime: INFINITE}
nodesets:
  - {name: workers, feature: workers}
topologyPlugin: none
extraLines: []
"""

SPEC_PREEMPT = """\
clusterName: gpu-farm
auth: munge
cgroups: true
topologyPlugin: tree
maxNodes: 512
nodeTimeoutSeconds: 600
nodesets:
  - {name: h100, feature: h100}
  - {name: cpu, feature: cpu-only}
partitions:
  - {name: train, nodesets: [h100], default: true, priorityTier: 1, preemptMode: REQUEUE, graceTime: 120,
     maxTime: 7-00:00:00}
  - {name: inference, nodesets: [h100], priorityTier: 10, preemptMode: "OFF", maxTime: "60"}
  - {name: cpu, nodesets: [cpu], priorityTier: 1, maxTime: INFINITE}
hooks:
  prolog: /usr/local/sbin/site-prolog
  epilog: /usr/local/sbin/site-epilog
  prologFlags: [Alloc, Contain]
  healthCheckProgram: /usr/local/sbin/site-healthcheck
  healthCheckInterval: 300
  healthCheckNodeState: [ANY, CYCLE]
extraLines:
  - "# site additions"
  - "SchedulerParameters=bf_continue"
"""


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod's inputs laid out under one directory, and the environment that points at them."""

    root: Path

    @property
    def podinfo(self) -> Path:
        return self.root / "podinfo"

    @property
    def hw(self) -> Path:
        return self.root / "hw"

    @property
    def key(self) -> Path:
        return self.root / "secrets/munge.key"

    @property
    def slurm_key(self) -> Path:
        return self.root / "secrets/slurm.key"

    @property
    def spec(self) -> Path:
        return self.root / "cluster.yaml"

    @property
    def sssd_binary(self) -> Path:
        """The image's sssd as pod start looks for it: make_pod writes a stand-in (never run)."""
        return self.root / "sbin/sssd"

    @property
    def sssd_conf(self) -> Path:
        """Where the test's sssd.conf Secret is mounted; nothing there unless a test writes one."""
        return self.root / "secrets/sssd/sssd.conf"

    @property
    def run_dir(self) -> Path:
        return self.root / "run"

    @property
    def tlog(self) -> Path:
        return self.root / "termination-log"

    def env(self, role: str = "worker", **overrides: str | None) -> dict[str, str]:
        """A complete, valid pod environment; an override of None removes that variable."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            wk.ENV_POD_NAME: {"worker": POD, "controller": CONTROLLER, "login": "slurmpod-login-0"}.get(role, POD),
            wk.ENV_POD_NAMESPACE: "default",
            wk.ENV_POD_UID: "0b7c7a4e-2f5e-4d3a-9a55-3f1b2c7d9e10",
            wk.ENV_NODE_NAME: "k8s-node-1",
            wk.ENV_POD_IP: "10.244.1.7",
            wk.ENV_HOST_IP: "192.168.49.2",
            wk.ENV_CLUSTER_NAME: "slurmpod",
            wk.ENV_CONTROLLER: CONTROLLER,
            wk.ENV_GRACE_SECONDS: "30",
            wk.ENV_PODINFO_DIR: str(self.podinfo),
            wk.ENV_CLUSTER_SPEC: str(self.spec),
            wk.ENV_RUN_DIR: str(self.run_dir),
            wk.ENV_TERMINATION_LOG: str(self.tlog),
            wk.ENV_SLURM_VERSION: "24.11",
            "SLURMPOD_MUNGE_KEY_FILE": str(self.key),
            "SLURMPOD_SLURM_KEY_FILE": str(self.slurm_key),
            "SLURMPOD_SSSD_CONF_FILE": str(self.sssd_conf),
            "SLURMPOD_SSSD_BINARY": str(self.sssd_binary),
            "SLURMPOD_HW_ROOT": str(self.hw),
        }
        for key, value in overrides.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env


def make_pod(root: Path, role: str = "worker", machine: Machine = Machine(), spec: str = SPEC_BASIC) -> Pod:
    """Valid inputs for ``role``: podinfo files, a 0400 munge key, the cluster spec, a machine tree,
    an empty run dir and an existing empty termination log."""
    pod = Pod(root)
    labels = worker_labels() if role == "worker" else {wk.LABEL_ROLE: role}
    write_podinfo(pod.podinfo, labels, {"kubectl.kubernetes.io/default-container": role})
    write_key(pod.key)
    pod.spec.write_text(spec)
    write_machine(pod.hw, machine)
    pod.run_dir.mkdir(parents=True, exist_ok=True)
    pod.tlog.write_text("")
    pod.sssd_binary.parent.mkdir(parents=True, exist_ok=True)
    pod.sssd_binary.write_text("#!/bin/sh\nexit 1\n")
    return pod


def plan(role: str, env: dict[str, str], settings: start.Settings | None = None,
         operator: slinky.SlurmdArgs | None = None) -> start.StartPlan:
    """What pod start plans for ``role``: its input loaded from ``env`` once, then the plan from it."""
    inp = start.load(role, env, settings or start.Settings.from_env(env), operator)
    return start.plan(inp, start.Adapters())
