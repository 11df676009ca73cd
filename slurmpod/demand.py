"""Pending demand: the pending jobs more worker nodes could start, and how many nodes a NodeSet would need.

``pending_from`` reads the records of squeue's compact listing (slurmpod.joblist) into ``PendingJob``s,
leaving out every job more nodes cannot start:
- held jobs (priority 0: held by their user or an admin, or requeued held);
- jobs whose pending reason no new node cures: a dependency, a begin time, a partition that is down,
  inactive or refuses the job, association and QoS limits, licenses, reservations, burst buffers,
  constraints no node has, the array throttle (``NEVER_BY_NODES``, ``NEVER_BY_NODES_PREFIXES``);
- jobs waiting on nodes they name themselves (ReqNodeNotAvail or NodeDown with ``required_nodes``).
Every other reason counts, an unknown one too: a reason a newer Slurm adds should not stop scale-out.
PartitionConfig counts only for a nodeset that is short (``NodeSetShape.short``): one of the nodes it keeps
a Slurm record for (an autoscaled nodeset's pods and placeholders, up to maxReplicas) has none. That is a
pod's take-over of its placeholder: it deletes the placeholder just before its slurmd starts, and until
slurmd registers the partition is smaller than the nodeset, so slurmctld may give the job
PartitionConfig ("More processors requested than permitted") though the whole nodeset runs it; submission
already refused what the whole nodeset cannot run. With every record there, PartitionConfig is a partition
that refuses the job.
squeue prints slurmctld's description of a reason where it wrote one: a description that starts with
the reason's code (``ReqNodeNotAvail, UnavailableNodes:w-3``) is read as that code; one in words counts,
as Resources does (``Nodes required for job are DOWN, DRAINED or reserved ...``), unless it names a QoS,
an association limit or a reservation (``NEVER_BY_NODES_DESCRIPTIONS``).
A job that names its nodes (--nodelist) asks only for the nodes beyond those it names, whatever its
reason: a new node is never one it named, and while a named node is busy slurmctld gives the job
Priority or Resources, not ReqNodeNotAvail (seen with 24.11).

A pending job array is one squeue line for all its pending tasks (``array_tasks``, e.g. ``3-10%2``):
it asks ``nodes`` nodes for each task that may start now, that is its pending tasks, capped by its
throttle (``%2``) when it has one. Running tasks of the array are not in a pending listing, so the
throttle is not reduced by them: the demand is at most the throttle too high, and once the running tasks
fill the throttle slurmctld says JobArrayTaskLimit, which counts zero. squeue cuts a long task list
with "..." (SLURM_BITSTR_LEN, 64 characters by default): the tasks it shows are counted, a lower bound.
Tasks split off into records of their own (one modified, held or requeued alone) that are still pending
are on their array's line: its size, node count and priority stand for them all, its reasons are
theirs together (``Resources,JobHeldUser``: it counts while one of them counts), and it shows no
throttle, so all of its pending tasks count.

``demand_nodes`` sums the nodes the jobs that fit one NodeSet ask for. A job fits a NodeSet when one of
its partitions contains the NodeSet, every feature its --constraint requires is the NodeSet's feature,
and its CPUs and GPUs per node fit the NodeSet's nodes where those are known. The constraints judged are
ANDs (``&``, or ``,``, which slurmctld reads as ``&``) of plain feature names, and ORs (``|``) of such
terms; anything else (brackets, counts, parentheses) does not fit, logged once per expression. A job that
fits two NodeSets counts for both. Nodes are not packed: two one-CPU jobs ask two nodes.

Ref: https://slurm.schedmd.com/squeue.html#SECTION_JOB-REASON-CODES
Ref: https://slurm.schedmd.com/job_reason_codes.html
Ref: https://slurm.schedmd.com/sbatch.html#OPT_constraint
Ref: https://slurm.schedmd.com/job_array.html
Ref: https://slurm.schedmd.com/sbatch.html#OPT_nodelist
"""

from __future__ import annotations

import functools
import logging
import math
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace

from slurmpod.joblist import JobRecord
from slurmpod.nodestate import NodeState

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PendingJob:
    """One pending squeue record that more nodes could start."""

    job_id: int
    partitions: tuple[str, ...]
    features: str  # the job's --constraint expression, "" for none
    nodes: int  # nodes it asks for (an array: for all its tasks that may start now)
    gpus_per_node: int
    cpus_per_node: int
    # PartitionConfig is the only reason it counts by: for a short nodeset alone (``waits_for_records``).
    needs_records: bool = False


@dataclass(frozen=True, slots=True)
class NodeSetShape:
    """What a worker NodeSet's nodes offer: its Slurm feature, the partitions holding it, their size."""

    name: str
    feature: str
    partitions: tuple[str, ...]
    cpus: int  # CPUs of one node; 0 = unknown, no CPU filter
    gpus: int  # GPUs of one node; 0 = unknown, no GPU filter
    kept: tuple[str, ...] = ()  # the nodes it keeps a Slurm record for, pod or placeholder; () none
    short: bool = False  # one of ``kept`` has no record now (``with_records``)


# Pending reasons no new node cures (PartitionConfig: but see SHORT_PARTITION_REASONS).
# Ref: https://slurm.schedmd.com/job_reason_codes.html
NEVER_BY_NODES = frozenset({
    "Dependency", "DependencyNeverSatisfied",
    "JobHeldAdmin", "JobHeldUser", "JobHoldMaxRequeue", "BeginTime",
    "PartitionDown", "PartitionInactive", "PartitionTimeLimit", "PartitionConfig",
    "AccountNotAllowed", "QOSNotAllowed", "InvalidAccount", "InvalidQOS", "AccountingPolicy",
    "BadConstraints", "Constraints", "MaxMemPerLimit", "DeadLine",
    "Reservation", "ReservationDeleted", "ReservationInvalid", "Licenses",
    "BurstBufferResources", "BurstBufferStageIn", "BurstBufferOperation",
    "JobArrayTaskLimit", "FedJobLock", "Cleaning",
})
# Association and QoS limits: AssocGrpNodeLimit, AssociationJobLimit, QOSMaxJobsPerUserLimit, ...
NEVER_BY_NODES_PREFIXES = ("Assoc", "QOS")
# slurmctld's descriptions of such reasons, in words (a QoS that refuses the partition, an association or QoS
# limit, a reservation gone). Ref: src/slurmctld/partition_mgr.c, acct_policy.c, job_mgr.c (state_desc)
NEVER_BY_NODES_DESCRIPTIONS = ("Job's QOS ", "Job is at or exceeds ", "Reservation ")
# Curable only while a nodeset of the job's partition is short of records (``waits_for_records``).
SHORT_PARTITION_REASONS = frozenset({"PartitionConfig"})
# Curable unless the job named the nodes it waits for (--nodelist): then only those nodes will do.
NAMED_NODE_REASONS = frozenset({"ReqNodeNotAvail", "NodeDown"})

_FEATURE = re.compile(r"[A-Za-z0-9_.-]+")
_ARRAY_PART = re.compile(r"(\d+)(?:-(\d+)(?::(\d+))?)?")
_GPU_ITEM = re.compile(r"(?:gres[/:])?gpu(?::([^:=,()]+))?(?:[:=](\d+))?")
_PARENTHESES = re.compile(r"\([^)]*\)")
_BRACKETS = re.compile(r"\[([^\]]*)\]")


def pending_from(records: Iterable[JobRecord]) -> tuple[PendingJob, ...]:
    """The pending jobs of a listing that more nodes could start."""
    return tuple(p for r in records if r.base == "PENDING" and (p := pending_job(r)) is not None)


def curable(job: JobRecord) -> bool:
    """More nodes could start this pending job: not held, and a reason only more nodes can lift (one of
    them, for an array's line that lists its tasks' reasons)."""
    if job.priority == 0:
        return False
    codes = job.reason_codes
    if not codes:  # a description in words
        return not job.reason.startswith(NEVER_BY_NODES_DESCRIPTIONS)
    return any(_curable_reason(code, job.required_nodes) for code in codes)


def _curable_reason(reason: str, required_nodes: str) -> bool:
    if reason in NEVER_BY_NODES or reason.startswith(NEVER_BY_NODES_PREFIXES):
        return False
    return not (reason in NAMED_NODE_REASONS and required_nodes.strip())


def waits_for_records(job: JobRecord) -> bool:
    """Not held, and PartitionConfig among its reasons: nodes a short nodeset is taking over would start it."""
    return job.priority != 0 and any(code in SHORT_PARTITION_REASONS for code in job.reason_codes)


def pending_job(job: JobRecord) -> PendingJob | None:
    """One pending record as a PendingJob; None when more nodes would not start it."""
    needs_records = False
    if not curable(job):
        if not waits_for_records(job):
            return None
        needs_records = True
    nodes = max(1, job.nodes)
    new_nodes = nodes - host_count(job.required_nodes)
    if new_nodes <= 0:
        return None
    return PendingJob(
        job_id=job.job_id,
        partitions=job.partitions,
        features=job.features,
        nodes=new_nodes * startable_tasks(job.array_tasks),
        gpus_per_node=gpus_per_node(job, nodes),
        cpus_per_node=job.cpus_per_node,
        needs_records=needs_records,
    )


def array_tasks(expression: str) -> int:
    """How many jobs a record stands for: a pending array's tasks (``0-9%2``: 10), else 1 (slurmctld's own
    count, job_array_cnt, in its metrics). Ref: https://slurm.schedmd.com/job_array.html"""
    return (count_task_ids(expression) or 1) if expression else 1


def array_throttle(expression: str) -> int:
    """The array's throttle, its tasks that may run at once (``0-9%2``: 2); 0 for none."""
    _, _, limit = expression.partition("%")
    return int(limit) if limit.isdigit() else 0


def startable_tasks(expression: str) -> int:
    """Tasks of this record that may start now: its pending tasks, capped by the array's throttle."""
    tasks = array_tasks(expression)
    limit = array_throttle(expression)
    return min(tasks, limit) if limit > 0 and tasks > 1 else tasks


def count_task_ids(text: str) -> int:
    """Task IDs in an array expression: ``1-10``, ``1,3,5-7``, ``0-99:3``, ``1-10%2`` (the throttle is not
    an ID), ``1,3,...`` (cut by squeue: what is shown)."""
    return _count_ranges(text.partition("%")[0])


def host_count(hostlist: str) -> int:
    """Hosts a Slurm hostlist names: ``w-0,w-1`` 2, ``w-[0-3,7]`` 5, ``r[1-2]-n[01-04]`` 8, "" 0. A
    bracket it cannot read counts one host. Ref: https://slurm.schedmd.com/sbatch.html#OPT_nodelist"""
    hosts: list[str] = []
    depth, start = 0, 0
    for i, c in enumerate(hostlist):  # commas inside brackets separate ranges, not hosts
        depth += (c == "[") - (c == "]")
        if c == "," and depth == 0:
            hosts.append(hostlist[start:i])
            start = i + 1
    hosts.append(hostlist[start:])
    total = 0
    for host in (h.strip() for h in hosts):
        if host:
            total += math.prod(max(1, _count_ranges(body)) for body in _BRACKETS.findall(host))
    return total


def _count_ranges(text: str) -> int:
    """Numbers in ``1-10``, ``1,3,5-7``, ``0-99:3`` (a hostlist's ``01-04`` too)."""
    total = 0
    for part in text.split(","):
        m = _ARRAY_PART.fullmatch(part.strip())
        if m is None:
            continue
        first, last, step = int(m[1]), int(m[2] or m[1]), int(m[3] or 1)
        if last >= first and step > 0:
            total += (last - first) // step + 1
    return total


def gpu_count(text: str) -> int:
    """GPUs in a TRES or GRES list: ``gres/gpu:2``, ``gres/gpu:h100:2``, ``gpu:h100:8(S:0-1)``,
    ``gres/gpu=4``; a GPU without a count is one. Ref: https://slurm.schedmd.com/gres.html"""
    if "gpu" not in text:
        return 0
    total = 0
    for item in _PARENTHESES.sub("", text).split(","):
        m = _GPU_ITEM.fullmatch(item.strip())
        if m is None:
            continue
        kind, count = m[1], m[2]
        if count is not None:
            total += int(count)
        elif kind is not None and kind.isdigit():  # gpu:2 is a count, gpu:h100 a type
            total += int(kind)
        else:
            total += 1
    return total


def gpus_per_node(job: JobRecord, nodes: int) -> int:
    """GPUs one node of the job needs: --gpus-per-node (or --gres), else --gpus spread over its nodes,
    else --gpus-per-task times its tasks per node. Ref: https://slurm.schedmd.com/sbatch.html#OPT_gpus"""
    per_node = gpu_count(job.tres_per_node)
    if per_node:
        return per_node
    per_job = gpu_count(job.tres_per_job)
    if per_job:
        return math.ceil(per_job / max(1, nodes))
    per_task = gpu_count(job.tres_per_task)
    if per_task:
        tasks = job.tasks_per_node or math.ceil(job.tasks / max(1, nodes))
        return per_task * max(1, tasks)
    return 0


@functools.lru_cache(maxsize=1024)
def feature_terms(expression: str) -> tuple[frozenset[str], ...] | None:
    """A --constraint as OR-ed terms of AND-ed feature names; None for what this cannot judge (logged once:
    the answer is cached). "" is one empty term: no constraint."""
    text = expression.strip()
    if not text:
        return (frozenset(),)
    terms = []
    for alternative in text.split("|"):
        names = [n.strip() for n in re.split(r"[&,]", alternative)]
        if not all(_FEATURE.fullmatch(n) for n in names):
            log.info("constraint not judged; its jobs count for no nodeset", extra={"ctx": {
                "constraint": expression[:200]}})
            return None
        terms.append(frozenset(names))
    return tuple(terms)


def fits(job: PendingJob, shape: NodeSetShape) -> bool:
    """The job could run on the NodeSet's nodes: partition, features, CPUs and GPUs per node, and a job that
    waits for records only on a short nodeset."""
    if job.needs_records and not shape.short:
        return False
    if not set(job.partitions) & set(shape.partitions):
        return False
    terms = feature_terms(job.features)
    if terms is None or not any(term <= {shape.feature} for term in terms):
        return False
    if shape.cpus and job.cpus_per_node > shape.cpus:
        return False
    return not (shape.gpus and job.gpus_per_node > shape.gpus)


def demand_nodes(jobs: Sequence[PendingJob], shape: NodeSetShape) -> int:
    """Nodes the pending jobs this NodeSet could serve ask for."""
    return sum(job.nodes for job in jobs if fits(job, shape))


def with_records(shape: NodeSetShape, names: Collection[str]) -> NodeSetShape:
    """The shape, short when a node it keeps a record for is not among ``names`` (every node record,
    placeholders included)."""
    return replace(shape, short=any(name not in names for name in shape.kept))


def with_capacity(shape: NodeSetShape, nodes: Iterable[NodeState]) -> NodeSetShape:
    """The shape with the CPUs and GPUs of the NodeSet's registered nodes (those with its feature; the
    largest, so no job one of them can run is left out); unchanged when none is registered."""
    mine = [n for n in nodes if shape.feature in n.features]
    if not mine:
        return shape
    return replace(shape, cpus=max(n.cpus for n in mine), gpus=max(gpu_count(n.gres) for n in mine))
