"""`JobRequest`: the job_desc fields the policy reads, as plain Python values.

Unset numbers are None (Slurm's NO_VAL / NO_VAL16 in job_desc_msg_t); the plugin's bridge and
`policy check` both build one, so the policy never sees Slurm's sentinels.
Ref: https://github.com/SchedMD/slurm/blob/master/slurm/slurm.h (struct job_descriptor)
"""

from __future__ import annotations

import enum
import functools
import re
from dataclasses import dataclass
from typing import Any

from slurmpod.problems import Problems
from slurmpod.problems import join as _join

# Slurm's "no limit" for time_limit. Ref: slurm/slurm.h (#define INFINITE 0xffffffff)
TIME_INFINITE = 0xFFFFFFFF


class Sharing(enum.Enum):
    """job_desc.shared: --exclusive / --oversubscribe. Ref: slurm/slurm.h (JOB_SHARED_*)."""

    UNSET = "unset"  # NO_VAL16: the partition's OverSubscribe decides
    EXCLUSIVE = "exclusive"  # JOB_SHARED_NONE (0)
    OVERSUBSCRIBE = "oversubscribe"  # JOB_SHARED_OK (1)
    USER = "user"  # JOB_SHARED_USER (2): --exclusive=user
    MCS = "mcs"  # JOB_SHARED_MCS (3)
    TOPO = "topo"  # JOB_SHARED_TOPO (4): --exclusive=topo


# GRES entries in tres_per_node / tres_per_job: "gres/gpu:8", "gres/gpu:h100:2", "gres/gpu" (one),
# separated by commas (sbatch writes commas; slurm.h's comment says semicolons: accept both).
# Ref: https://slurm.schedmd.com/sbatch.html#OPT_gpus-per-node
_GPU_ENTRY = re.compile(r"^gres[/:]gpu(?::(?P<type>[A-Za-z_][\w.-]*))?(?:[:=](?P<count>\d+))?$")


@functools.lru_cache(maxsize=1024)  # the same few TRES strings come back on every submission
def gpu_count(tres: str | None) -> int:
    """Total GPUs named in a TRES string; 0 when none. Unparsable GPU entries count as 0."""
    if not tres:
        return 0
    total = 0
    for entry in re.split(r"[,;]", tres):
        m = _GPU_ENTRY.match(entry.strip())
        if m:
            total += int(m.group("count")) if m.group("count") else 1
    return total


def gpu_type(tres: str | None) -> str | None:
    """The GPU type of the first typed GPU entry ("h100" in "gres/gpu:h100:2"), or None."""
    for entry in re.split(r"[,;]", tres or ""):
        m = _GPU_ENTRY.match(entry.strip())
        if m and m.group("type"):
            return m.group("type")
    return None


def with_gpus_per_node(tres: str | None, count: int) -> str:
    """``tres`` with its GPU entries replaced by one ``gres/gpu[:TYPE]:count``; other entries kept."""
    kind = gpu_type(tres)
    others = [e.strip() for e in re.split(r"[,;]", tres or "") if e.strip() and not _GPU_ENTRY.match(e.strip())]
    gpu = f"gres/gpu:{kind}:{count}" if kind else f"gres/gpu:{count}"
    return ",".join([*others, gpu])


@dataclass(frozen=True, slots=True)
class JobRequest:
    """One submission (or modification) as the policy sees it."""

    uid: int
    user: str
    gid: int = 0
    groups: tuple[str, ...] = ()  # names of the user's groups (resolved by the bridge)
    account: str | None = None
    partition: str | None = None  # may be "a,b": the job may run in either
    qos: str | None = None
    min_nodes: int | None = None
    max_nodes: int | None = None
    num_tasks: int | None = None
    tres_per_node: str | None = None  # --gpus-per-node, --gres
    tres_per_job: str | None = None  # --gpus
    tres_per_task: str | None = None  # --gpus-per-task
    tres_per_socket: str | None = None  # --gpus-per-socket
    features: str | None = None
    time_limit: int | None = None  # minutes; TIME_INFINITE for UNLIMITED
    req_switch: int | None = None  # --switches count
    wait4switch: int | None = None  # --switches ...@<time>, seconds
    segment_size: int | None = None  # --segment
    sharing: Sharing = Sharing.UNSET
    requeue: bool | None = None
    comment: str | None = None
    warn_signal: int | None = None  # --signal, signal number
    warn_time: int | None = None  # --signal ...@<seconds>
    warn_flags: int = 0  # KILL_JOB_BATCH etc.
    name: str | None = None
    job_id: int | None = None  # set for job_modify
    is_modify: bool = False
    # job_modify naming a partition, QoS or account other than the job's: access is judged for the caller
    moves_tier: bool = False

    @property
    def partitions(self) -> tuple[str, ...]:
        return tuple(p.strip() for p in (self.partition or "").split(",") if p.strip())

    @property
    def nodes(self) -> int:
        """Nodes the job needs at least (1 when unset)."""
        return self.min_nodes if self.min_nodes and self.min_nodes > 0 else 1

    @property
    def gpus_per_node(self) -> int:
        return gpu_count(self.tres_per_node)

    @property
    def gpus_per_task_or_socket(self) -> bool:
        """GPUs asked per task or per socket, whose total Slurm only knows once it places the job."""
        return bool(gpu_count(self.tres_per_task) or gpu_count(self.tres_per_socket))

    @property
    def gpus(self) -> int:
        """Total GPUs asked for, at least: per job, else per node times nodes, else per task times tasks
        (a task per node at least), else per socket times nodes (a socket per node at least). Any form
        counts. Ref: https://slurm.schedmd.com/sbatch.html#OPT_gpus-per-task"""
        per_job = gpu_count(self.tres_per_job)
        if per_job:
            return per_job
        if self.gpus_per_node:
            return self.gpus_per_node * self.nodes
        tasks = max(self.num_tasks or 0, self.nodes)
        return gpu_count(self.tres_per_task) * tasks or gpu_count(self.tres_per_socket) * self.nodes

    @property
    def multi_node(self) -> bool:
        return self.nodes > 1


_INT_FIELDS = ("uid", "gid", "min_nodes", "max_nodes", "num_tasks", "time_limit", "req_switch", "wait4switch",
               "segment_size", "warn_signal", "warn_time", "warn_flags", "job_id")
_STR_FIELDS = ("user", "account", "partition", "qos", "tres_per_node", "tres_per_job", "tres_per_task",
               "tres_per_socket", "features", "comment", "name")
FIELDS = frozenset(JobRequest.__dataclass_fields__)


def from_mapping(raw: Any, where: str = "") -> JobRequest:
    """A JobRequest from JSON (`policy check --job`): unknown keys and wrong types are BadInput."""
    p = Problems()
    doc = p.mapping(where, raw)
    p.unknown_keys(where, doc, FIELDS)
    values: dict[str, Any] = {}
    for key in ("uid", "user"):
        if key not in doc:
            p.add(_join(where, key), None, "required")
    for key in _INT_FIELDS:
        if doc.get(key) is not None:
            value = p.typed(_join(where, key), doc[key], int, "an integer")
            if value is not None and not p.check(value >= 0, _join(where, key), value, "must be >= 0"):
                value = None
            values[key] = value
    for key in _STR_FIELDS:
        if doc.get(key) is not None:
            values[key] = p.typed(_join(where, key), doc[key], str, "a string")
    for key in ("requeue", "is_modify", "moves_tier"):
        if doc.get(key) is not None:
            values[key] = p.typed(_join(where, key), doc[key], bool, "true or false")
    if doc.get("groups") is not None:
        groups = doc["groups"]
        if isinstance(groups, list) and all(isinstance(g, str) for g in groups):
            values["groups"] = tuple(groups)
        else:
            p.add(_join(where, "groups"), groups, "must be a list of group names")
    if doc.get("sharing") is not None:
        try:
            values["sharing"] = Sharing(doc["sharing"])
        except ValueError:
            p.add(_join(where, "sharing"), doc["sharing"], f"expected one of {', '.join(s.value for s in Sharing)}")
    p.raise_if_any()
    values.setdefault("uid", 0)
    values.setdefault("user", "")
    values.setdefault("warn_flags", 0)
    values.setdefault("gid", 0)
    return JobRequest(**values)


def to_mapping(req: JobRequest) -> dict[str, Any]:
    """The JSON form `from_mapping` reads (None fields left out)."""
    out: dict[str, Any] = {}
    for key in sorted(FIELDS):
        value = getattr(req, key)
        if isinstance(value, Sharing):
            value = value.value
        elif isinstance(value, tuple):
            value = list(value)
        if value is not None:
            out[key] = value
    return out
