"""NodeSpec: PodInfo + Hardware -> the Slurm node this pod registers as.

A structured key/value model rendered to `slurmd --conf` (dynamic) or a `NodeName=` line (static).
Every value is validated by slurmpod.confvalues, so no label or annotation can add a key or a line.
Ref: https://slurm.schedmd.com/slurm.conf.html#SECTION_NODE-CONFIGURATION
Ref: https://slurm.schedmd.com/dynamic_nodes.html
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from slurmpod import confvalues
from slurmpod import well_known as wk
from slurmpod.errors import BadInput
from slurmpod.hardware import Gpu, Hardware
from slurmpod.podinfo import PodInfo
from slurmpod.problems import Problems
from slurmpod.slurm_version import SlurmVersion
from slurmpod.topology import annotation

# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_Weight (uint32, default 1)
MAX_WEIGHT = 4_294_967_294


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """A Slurm node definition; build with ``build``."""

    name: str
    cpus: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    real_memory_mib: int
    core_spec_count: int  # cores kept from jobs because the pod may not use them
    mem_spec_limit_mib: int  # memory kept from jobs because the pod may not use it
    features: tuple[str, ...]
    gpus: tuple[Gpu, ...]
    weight: int | None
    topology: str | None
    placement: str | None = None  # the pod's placement value as given; see ``extra``
    # Validated parameters that replace (or add to) the derived ones: a Slinky operator's --conf
    # (slurmpod.entrypoints.slinky); keys are canonical Slurm node parameter names.
    overrides: tuple[tuple[str, str], ...] = ()

    @property
    def extra(self) -> str | None:
        """`slurmd --extra` JSON carrying the placement to slurmctld, or None without one.
        Ref: https://slurm.schedmd.com/extra_constraints.html#SECTION_NODE-EXTRA-DATA"""
        if self.placement is None:
            return None
        return json.dumps({wk.EXTRA_TOPOLOGY_KEY: self.placement}, separators=(",", ":"))

    def pairs(self) -> list[tuple[str, str]]:
        """Node parameters in a fixed order (deterministic output)."""
        out = [
            ("CPUs", str(self.cpus)),
            ("Boards", "1"),
            ("SocketsPerBoard", str(self.sockets)),
            ("CoresPerSocket", str(self.cores_per_socket)),
            ("ThreadsPerCore", str(self.threads_per_core)),
            ("RealMemory", str(self.real_memory_mib)),
        ]
        # Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_CoreSpecCount
        if self.core_spec_count:
            out.append(("CoreSpecCount", str(self.core_spec_count)))
        # Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_MemSpecLimit
        if self.mem_spec_limit_mib:
            out.append(("MemSpecLimit", str(self.mem_spec_limit_mib)))
        if self.gpus:
            out.append(("Gres", f"gpu:{len(self.gpus)}"))
        if self.features:
            out.append(("Features", ",".join(self.features)))
        if self.weight is not None:
            out.append(("Weight", str(self.weight)))
        # Never an empty Topology=: slurmd would read the next item as its value.
        if self.topology:
            out.append(("Topology", self.topology))
        given = dict(self.overrides)
        out = [(k, given.pop(k, v)) for k, v in out]
        return out + list(given.items())

    def conf_string(self) -> str:
        """The `slurmd -Z --conf` argument (NodeName is the host name). Ref: slurmd(8) --conf"""
        return confvalues.kv_line(self.pairs())

    def node_line(self) -> str:
        """A static slurm.conf line."""
        return confvalues.kv_line([("NodeName", self.name), *self.pairs(), ("State", "UNKNOWN")])

    def gres_conf(self) -> str:
        """gres.conf lines for this node's GPUs. Ref: https://slurm.schedmd.com/gres.conf.html"""
        lines = []
        for gpu in self.gpus:
            pairs = [("NodeName", self.name), ("Name", "gpu"), ("File", f"/dev/nvidia{gpu.minor}")]
            if gpu.cpu_affinity:
                pairs.append(("Cores", _ranges(gpu.cpu_affinity)))
            lines.append(confvalues.kv_line(pairs))
        return "".join(line + "\n" for line in lines)


def _ranges(ids: tuple[int, ...]) -> str:
    out: list[str] = []
    start = prev = ids[0]
    for i in ids[1:]:
        if i == prev + 1:
            prev = i
            continue
        out.append(f"{start}-{prev}" if start != prev else str(start))
        start = prev = i
    out.append(f"{start}-{prev}" if start != prev else str(start))
    return ",".join(out)


# Caps that keep the slurmd command line far below the kernel's per-argument limit (MAX_ARG_STRLEN,
# 32 pages = 128 KiB), so exec can never fail with E2BIG, and `scontrol show node` readable.
# Ref: https://man7.org/linux/man-pages/man2/execve.2.html (Limits on size of arguments)
MAX_FEATURES = 64
MAX_CONF_CHARS = 8192


def _features(pod: PodInfo, nodeset: str | None, problems: Problems) -> tuple[str, ...]:
    raw: list[tuple[str, str]] = []
    if nodeset:
        raw.append((wk.ENV_NODESET, nodeset))
    elif wk.LABEL_NODESET in pod.labels:
        raw.append((f"label {wk.LABEL_NODESET}", pod.labels[wk.LABEL_NODESET]))
    extra = pod.annotations.get(wk.ANNOTATION_FEATURES, "")
    raw.extend((f"annotation {wk.ANNOTATION_FEATURES}", f.strip()) for f in extra.split(",") if f.strip())
    seen: list[str] = []
    for field, value in raw:
        if problems.field(field, value, confvalues.feature) is None:
            continue
        if value not in seen:
            seen.append(value)
    if len(seen) > MAX_FEATURES:
        problems.add(f"annotation {wk.ANNOTATION_FEATURES}", extra, f"{len(seen)} features; at most {MAX_FEATURES}")
    return tuple(seen)


def build(pod: PodInfo, hw: Hardware, version: SlurmVersion, nodeset: str | None = None) -> NodeSpec:
    """Derive the node: the host's shape, minus what the pod's cpuset and limits keep from it."""
    problems = Problems()
    features = _features(pod, nodeset, problems)

    weight = None
    if wk.ANNOTATION_WEIGHT in pod.annotations:
        weight = problems.field(f"annotation {wk.ANNOTATION_WEIGHT}", pod.annotations[wk.ANNOTATION_WEIGHT],
                                lambda field, value: confvalues.integer(field, value, 1, MAX_WEIGHT))

    # The pod's placement (Slinky's env, its annotation or label): `a/b/host`, `unit` or `topo:unit`.
    # It reaches slurmctld as `slurmd --extra` on every version (the controller's topology-sync reads it
    # back) and, from 25.05, as the node's `Topology=` registration value (its innermost unit).
    topology = placement = None
    if pod.topology:
        field = f"{wk.ENV_SLINKY_TOPOLOGY}, annotation or label {wk.LABEL_TOPOLOGY}"
        value = problems.field(field, pod.topology, annotation.parse)
        if value is not None:
            placement = pod.topology
            topology = value.registration if version.node_topology else None
    problems.raise_if_any()

    # CPUs the pod may use: its cpuset, further capped by the CPU limit (downward API or cgroup quota),
    # in whole CPUs rounded down, at least one. Slurm allocates whole cores, so reserve the rest with
    # CoreSpecCount. Ref: https://slurm.schedmd.com/core_spec.html
    usable = len(hw.allowed_cpus)
    for millis in (pod.cpu_limit_millis, hw.cgroup_cpu_millis):
        if millis is not None:
            usable = min(usable, max(1, millis // 1000))
    cores = hw.sockets * hw.cores_per_socket
    usable_cores = min(cores, -(-usable // hw.threads_per_core))
    core_spec = cores - usable_cores

    limits = [m for m in (pod.memory_limit_mib, hw.cgroup_memory_mib) if m is not None]
    usable_mem = min([hw.memory_mib, *limits])
    mem_spec = hw.memory_mib - usable_mem

    spec = NodeSpec(
        name=pod.name,
        cpus=hw.cpus,
        sockets=hw.sockets,
        cores_per_socket=hw.cores_per_socket,
        threads_per_core=hw.threads_per_core,
        real_memory_mib=hw.memory_mib,
        core_spec_count=core_spec,
        mem_spec_limit_mib=mem_spec,
        features=features,
        gpus=hw.gpus,
        weight=weight,
        topology=topology,
        placement=placement,
    )
    if len(spec.conf_string()) > MAX_CONF_CHARS:
        raise BadInput.one(f"annotation {wk.ANNOTATION_FEATURES}", extra_features(pod),
                           f"the node definition would be {len(spec.conf_string())} characters; "
                           f"at most {MAX_CONF_CHARS}")
    return spec


def extra_features(pod: PodInfo) -> str:
    return pod.annotations.get(wk.ANNOTATION_FEATURES, "")
