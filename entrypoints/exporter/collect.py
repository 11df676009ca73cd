"""One poll's documents -> metric families: pure functions, no I/O, no clock.

Slurm's series carry the names and labels slurmctld's own OpenMetrics plugin uses (Slurm 25.11+:
/metrics/nodes, /metrics/jobs, /metrics/partitions, /metrics/scheduler), computed here from the CLI's
JSON and squeue's compact job listing (slurmpod.joblist), so one dashboard and one KEDA query read the
same series on 24.11 and 26.05. Values follow that plugin's counting rules, among them: a pending array
counts its pending tasks; a node is in one base state (future, down, mixed, alloc, idle, unknown, in that
order); `drain` is a drained node with no job and `draining` one with jobs; memory values are in MiB, as
the plugin reports them under its `_bytes` names. docs/metrics.md lists every series and where each
differs.
slurmpod's own series (prefix slurmpod_) say what the exporter knows beside Slurm: demand and node states
per NodeSet, who drained which nodes, the job_submit plugin's timing, the autoscaler's decisions.

Ref: https://slurm.schedmd.com/metrics.html
Ref: https://slurm.schedmd.com/rest_api.html#v0.0.42_node (and _partition_info, _stats_msg)
Ref: https://prometheus.io/docs/practices/naming/
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from slurmpod import demand, reasons
from slurmpod.demand import NodeSetShape
from slurmpod.joblist import JobListing, JobRecord
from slurmpod.nodestate import NodeState, from_json, number

NODE_LABEL = "node"
PARTITION_LABEL = "partition"

# --- Slurm's node series (/metrics/nodes): a flag each, as the JSON state list names it ---
# Ref: https://slurm.schedmd.com/sinfo.html#SECTION_NODE-STATE-CODES
NODE_FLAG_SERIES = (
    ("blocked", "BLOCKED"), ("cloud", "CLOUD"), ("completing", "COMPLETING"), ("dyn_future", "DYNAMIC_FUTURE"),
    ("dyn_normal", "DYNAMIC_NORM"), ("external", "EXTERNAL"), ("fail", "FAIL"), ("invalid_reg", "INVALID_REG"),
    ("maint", "MAINTENANCE"), ("noresp", "NOT_RESPONDING"), ("planned", "PLANNED"), ("power_down", "POWER_DOWN"),
    ("power_up", "POWER_UP"), ("powered_down", "POWERED_DOWN"), ("powering_up", "POWERING_UP"),
    ("reboot_issued", "REBOOT_ISSUED"), ("reboot_req", "REBOOT_REQUESTED"), ("resv", "RESERVED"),
)
# The same flags per partition, under the partition series' own names.
PARTITION_NODE_FLAG_SERIES = (
    ("blocked", "BLOCKED"), ("cg", "COMPLETING"), ("cloud", "CLOUD"), ("dyn_future", "DYNAMIC_FUTURE"),
    ("dyn_normal", "DYNAMIC_NORM"), ("external", "EXTERNAL"), ("fail", "FAIL"), ("invalid_reg", "INVALID_REG"),
    ("maint", "MAINTENANCE"), ("no_resp", "NOT_RESPONDING"), ("planned", "PLANNED"), ("power_down", "POWER_DOWN"),
    ("power_up", "POWER_UP"), ("powered_down", "POWERED_DOWN"), ("powering_down", "POWERING_DOWN"),
    ("powering_up", "POWERING_UP"), ("reboot_issued", "REBOOT_ISSUED"), ("reboot_requested", "REBOOT_REQUESTED"),
    ("resv", "RESERVED"),
)
# A node's one base state, by precedence; the partition series spell `alloc` the same way.
NODE_BASES = ("future", "down", "mixed", "alloc", "idle", "unknown")

# --- Slurm's job series (/metrics/jobs, per partition too): the states squeue's default listing holds ---
# Ref: https://slurm.schedmd.com/squeue.html#SECTION_JOB-STATE-CODES
JOB_BASE_SERIES = (("running", "RUNNING"), ("suspended", "SUSPENDED"))
# squeue names one state flag a job has, the first in Slurm's order (slurmpod.joblist); POWER_UP_NODE it
# never names, so slurmctld's `powerup_node` series is not served.
JOB_FLAG_SERIES = (
    ("completing", "COMPLETING"), ("configuring", "CONFIGURING"), ("expediting", "EXPEDITING"),
    ("fed_requeued", "REQUEUE_FED"), ("requeued", "REQUEUED"), ("resizing", "RESIZING"), ("revoked", "REVOKED"),
    ("signaling", "SIGNALING"), ("stageout", "STAGE_OUT"),
)
HELD_REASONS = frozenset({"JobHeldAdmin", "JobHeldUser"})  # slurmctld's "hold" count: these two only

# --- Slurm's scheduler series (/metrics/scheduler) from `sdiag --json`'s statistics ---
# (series name without slurm_, the statistics key)
SDIAG_SERIES = (
    ("agent_cnt", "agent_count"), ("agent_queue_size", "agent_queue_size"),
    ("agent_thread_cnt", "agent_thread_count"), ("server_thread_cnt", "server_thread_count"),
    ("slurmdbd_queue_size", "dbd_agent_queue_size"), ("sdiag_latency", "gettimeofday_latency"),
    ("schedule_cycle_cnt", "schedule_cycle_total"), ("schedule_cycle_depth", "schedule_cycle_depth"),
    ("schedule_cycle_last", "schedule_cycle_last"), ("schedule_cycle_max", "schedule_cycle_max"),
    ("schedule_cycle_tot", "schedule_cycle_sum"), ("schedule_queue_len", "schedule_queue_length"),
    ("sdiag_jobs_submitted", "jobs_submitted"), ("sdiag_jobs_started", "jobs_started"),
    ("sdiag_jobs_completed", "jobs_completed"), ("sdiag_jobs_canceled", "jobs_canceled"),
    ("sdiag_jobs_failed", "jobs_failed"), ("sdiag_jobs_pending", "jobs_pending"),
    ("sdiag_jobs_running", "jobs_running"), ("sdiag_job_states_ts", "job_states_ts"),
    ("backfilled_jobs", "bf_backfilled_jobs"), ("last_backfilled_jobs", "bf_last_backfilled_jobs"),
    ("backfilled_het_jobs", "bf_backfilled_het_jobs"), ("bf_active", "bf_active"),
    ("bf_cycle_cnt", "bf_cycle_counter"), ("bf_cycle_last", "bf_cycle_last"), ("bf_cycle_max", "bf_cycle_max"),
    ("bf_cycle_tot", "bf_cycle_sum"), ("bf_depth_tot", "bf_depth_sum"), ("bf_depth_try_tot", "bf_depth_try_sum"),
    ("bf_last_depth", "bf_last_depth"), ("bf_last_depth_try", "bf_last_depth_try"),
    ("bf_queue_len", "bf_queue_len"), ("bf_queue_len_tot", "bf_queue_len_sum"),
    ("bf_table_size", "bf_table_size"), ("bf_table_size_tot", "bf_table_size_sum"),
    ("bf_when_last_cycle", "bf_when_last_cycle"), ("last_proc_req_start", "req_time_start"),
    ("sched_stats_timestamp", "req_time"),
)
# Means slurmctld derives from a sum and a count (whole numbers, as it divides).
SDIAG_MEANS = (
    ("sched_mean_cycle", "schedule_cycle_sum", "schedule_cycle_total"),
    ("sched_mean_depth_cycle", "schedule_cycle_depth", "schedule_cycle_total"),
    ("bf_mean_cycle", "bf_cycle_sum", "bf_cycle_counter"), ("bf_depth_mean", "bf_depth_sum", "bf_cycle_counter"),
    ("bf_try_depth_mean", "bf_depth_try_sum", "bf_cycle_counter"),
    ("bf_queue_len_mean", "bf_queue_len_sum", "bf_cycle_counter"),
    ("bf_mean_table_sz", "bf_table_size_sum", "bf_cycle_counter"),
)
SDIAG_EXITS = (
    ("sched_exit_end", "schedule_exit", "end_job_queue"),
    ("sched_exit_max_depth", "schedule_exit", "default_queue_depth"),
    ("sched_exit_max_job_start", "schedule_exit", "max_job_start"), ("sched_exit_lic", "schedule_exit", "licenses"),
    ("sched_exit_rpc_cnt", "schedule_exit", "max_rpc_cnt"), ("sched_exit_timeout", "schedule_exit", "max_sched_time"),
    ("bf_exit_end", "bf_exit", "end_job_queue"), ("bf_exit_max_job_start", "bf_exit", "bf_max_job_start"),
    ("bf_exit_max_job_test", "bf_exit", "bf_max_job_test"), ("bf_exit_state_changed", "bf_exit", "state_changed"),
    ("bf_exit_table_limit", "bf_exit", "bf_node_space_size"), ("bf_exit_timeout", "bf_exit", "bf_max_time"),
)

# --- slurmpod's own ---
NODESET_STATES = ("idle", "allocated", "mixed", "completing", "drained", "draining", "down", "future")
DRAIN_OWNERS = ("health", "prestop", "k8s", "autoscale", "admin")
# reasons.Owner values -> the owner label; every other owner (an admin's, slurmctld's) is "admin"
_OWNER_LABEL = {"health": "health", "lifecycle": "prestop", "k8s": "k8s", "autoscale": "autoscale"}
AUTOSCALE_CHECK = "autoscale"  # `slurmpod: autoscale: scale-in` reads like a check named autoscale
# The job_submit plugin's 1 us buckets (slurm_plugins/job_submit_slurmpod.c); the last holds the rest.
POLICY_BUCKET_LAST_US = 4095
POLICY_EDGES_US = (10, 25, 50, 100, 250, 500, 1000, 2500, POLICY_BUCKET_LAST_US)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one poll read from Slurm: each command's JSON document, parsed, and the job listing."""

    nodes: Mapping[str, Any]  # scontrol show nodes --json
    jobs: JobListing  # squeue's default listing, compact (slurmpod.joblist)
    partitions: Mapping[str, Any]  # scontrol show partitions --json
    diag: Mapping[str, Any]  # sdiag --json


@dataclass(frozen=True, slots=True)
class Node:
    """A node record, reduced to what the series count."""

    state: NodeState
    base: str  # one of NODE_BASES, or "" for none (ERROR, INVALID)
    partitions: tuple[str, ...]
    cpus_effective: int
    cpus_alloc: int
    mem_alloc: int  # MiB
    mem_free: int  # MiB
    gpus: int
    gpus_alloc: int

    @property
    def draining(self) -> bool:
        return "DRAIN" in self.state.flags and self.base in ("alloc", "mixed")

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.state.flags and not self.draining


@dataclass(frozen=True, slots=True)
class Job:
    """An squeue record, reduced to what the series count."""

    base: str  # PENDING, RUNNING ... ("" when squeue's state name does not tell it)
    flags: frozenset[str]
    partition: str  # the first it names: slurmctld counts a job under the partition it is in or tries now
    count: int  # the jobs it stands for: a pending array's pending tasks, else 1
    reason: str  # its reason code (an array's line: its first), or slurmctld's description of one
    held: bool  # held by its user or an admin
    min_nodes: int
    max_nodes: int
    cpus: int
    mem: int  # MiB allocated
    gpus: int  # allocated


# ---------------------------------------------------------------------------------------------------
def node_of(raw: dict[str, Any]) -> Node:
    state = from_json(raw)
    cpus_eff = number(raw.get("effective_cpus")) or state.cpus
    alloc = number(raw.get("alloc_cpus"))
    return Node(
        state=state,
        base=_base(state, cpus_eff, alloc, str(raw.get("tres_used", "") or "")),
        partitions=tuple(str(p) for p in raw.get("partitions", []) or []),
        cpus_effective=cpus_eff,
        cpus_alloc=alloc,
        mem_alloc=number(raw.get("alloc_memory")),
        mem_free=number(raw.get("free_mem")),
        gpus=demand.gpu_count(state.gres),
        gpus_alloc=demand.gpu_count(str(raw.get("gres_used", "") or "")),
    )


def _base(state: NodeState, cpus_eff: int, alloc: int, tres_used: str) -> str:
    """slurmctld's one base state for its metrics: FUTURE, DOWN, then MIXED where some CPUs (or only other
    resources) are allocated, then ALLOCATED, IDLE, UNKNOWN. Ref: src/slurmctld/statistics.c"""
    if state.base == "FUTURE":
        return "future"
    if state.base == "DOWN":
        return "down"
    if state.base == "MIXED" or 0 < alloc < cpus_eff or (alloc == 0 and tres_used and state.base != "IDLE"):
        return "mixed"
    return {"ALLOCATED": "alloc", "IDLE": "idle", "UNKNOWN": "unknown"}.get(state.base, "")


def job_of(record: JobRecord) -> Job:
    codes = record.reason_codes
    reason = codes[0] if codes else record.reason
    alloc = _tres(record.tres_alloc)
    return Job(
        base=record.base,
        flags=record.flags,
        partition=record.partitions[0] if record.partitions else "",
        count=demand.array_tasks(record.array_tasks) if record.base == "PENDING" else 1,
        reason=reason,
        # slurmctld counts the two held reasons; one it describes in words (a held requeue's) shows as priority 0
        held=reason in HELD_REASONS or (not codes and record.priority == 0),
        min_nodes=record.nodes,
        max_nodes=record.max_nodes,
        cpus=record.cpus,
        mem=alloc.get("mem", 0),
        gpus=alloc.get("gres/gpu", 0),
    )


_MEM_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 ** 2, "P": 1024 ** 3}


def _tres(text: str) -> dict[str, int]:
    """`cpu=4,mem=8G,node=1,gres/gpu=2` -> {"cpu": 4, "mem": 8192 (MiB), ...}. Ref: https://slurm.schedmd.com/tres.html"""
    out: dict[str, int] = {}
    for item in text.split(","):
        key, _, value = item.partition("=")
        if not value:
            continue
        scale = _MEM_UNITS.get(value[-1:].upper()) if key == "mem" else None
        digits = value[:-1] if scale is not None else value
        try:
            out[key] = int(float(digits) * (scale or 1))
        except ValueError:
            continue
    return out


def _records(doc: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    items = doc.get(key, [])
    return [r for r in items if isinstance(r, dict)] if isinstance(items, list) else []


# ---------------------------------------------------------------------------------------------------
def slurm_families(snap: Snapshot, nodesets: Sequence[NodeSetShape]) -> list[Metric]:
    """Every series that comes from Slurm, for one poll."""
    nodes = [node_of(n) for n in _records(snap.nodes, "nodes")]
    jobs = [job_of(j) for j in snap.jobs.records]
    pending = demand.pending_from(snap.jobs.records)
    out = [*node_families(nodes), *job_families(jobs, nodes)]
    out += partition_families(_records(snap.partitions, "partitions"), nodes, jobs)
    out += scheduler_families(snap.diag.get("statistics", {}) if isinstance(snap.diag, Mapping) else {})
    out += nodeset_families(nodesets, nodes, pending)
    out += drain_families(nodes)
    out.append(_gauge("slurmpod_exporter_unparsed_job_lines",
                      "Lines of the last poll's squeue listing that did not parse: their jobs are in no series.",
                      snap.jobs.unparsed))
    return out


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def node_families(nodes: Sequence[Node]) -> list[Metric]:
    per_node = {
        "cpus": "CPUs of the node.", "cpus_alloc": "CPUs of the node allocated to jobs.",
        "cpus_effective": "CPUs of the node jobs may use (not reserved for the system).",
        "cpus_idle": "CPUs of the node jobs may use and none holds.", "gpus": "GPUs of the node.",
        "gpus_alloc": "GPUs of the node allocated to jobs.",
        "memory_alloc_bytes": "Memory of the node allocated to jobs (MiB, as slurmctld reports it).",
        "memory_effective_bytes": "Memory of the node jobs may use (MiB, as slurmctld reports it).",
        "memory_free_bytes": "Free memory the node reports (MiB, as slurmctld reports it).",
        "memory_bytes": "Memory of the node (MiB, as slurmctld reports it).",
    }
    fams = {key: GaugeMetricFamily(f"slurm_node_{key}", doc, labels=[NODE_LABEL]) for key, doc in per_node.items()}
    bases: Counter[str] = Counter()
    flags: Counter[str] = Counter()
    draining = drain = 0
    for n in nodes:
        s = n.state
        label = [s.name]
        for key, value in (("cpus", s.cpus), ("cpus_alloc", n.cpus_alloc), ("cpus_effective", n.cpus_effective),
                           ("cpus_idle", max(0, n.cpus_effective - n.cpus_alloc)), ("gpus", n.gpus),
                           ("gpus_alloc", n.gpus_alloc), ("memory_alloc_bytes", n.mem_alloc),
                           ("memory_effective_bytes", s.real_memory - s.specialized_memory),
                           ("memory_free_bytes", n.mem_free), ("memory_bytes", s.real_memory)):
            fams[key].add_metric(label, value)
        bases[n.base] += 1
        flags.update(s.flags)
        draining += n.draining
        drain += n.drained
    out: list[Metric] = [*fams.values(), _gauge("slurm_nodes", "Nodes slurmctld knows.", len(nodes))]
    out += [_gauge(f"slurm_nodes_{b}", f"Nodes in the {b} base state.", bases[b]) for b in NODE_BASES]
    out += [_gauge(f"slurm_nodes_{key}", f"Nodes with the {flag} flag.", flags[flag]) for key, flag in NODE_FLAG_SERIES]
    out.append(_gauge("slurm_nodes_drain", "Nodes with the DRAIN flag and no job (drained).", drain))
    out.append(_gauge("slurm_nodes_drained", "Nodes with the DRAIN flag and no job.", drain))
    out.append(_gauge("slurm_nodes_draining", "Nodes with the DRAIN flag whose jobs still run.", draining))
    return out


def _job_counts(jobs: Iterable[Job]) -> dict[str, int]:
    """The job series' values over ``jobs`` (keys are the series names after slurm_jobs_ / partition_jobs_)."""
    c: Counter[str] = Counter()
    states: Counter[str] = Counter()
    for j in jobs:
        c["jobs"] += j.count
        c["records"] += 1
        states[j.base] += 1
        states.update(j.flags)
        if j.base == "PENDING":
            c["pending"] += j.count
            held = j.held
            if held:
                c["hold"] += j.count
            c["max_job_nodes"] = max(c["max_job_nodes"], j.max_nodes)
            c["min_job_nodes"] = max(c["min_job_nodes"], j.min_nodes)
            if not held:
                c["max_job_nodes_nohold"] = max(c["max_job_nodes_nohold"], j.max_nodes)
                c["min_job_nodes_nohold"] = max(c["min_job_nodes_nohold"], j.min_nodes)
            if j.reason == "PartitionNodeLimit":
                c["wait_part_node_limit"] += 1
        elif j.base in ("RUNNING", "SUSPENDED"):
            c["cpus_alloc"] += j.cpus
            c["memory_alloc"] += j.mem
            c["gpus_alloc"] += j.gpus
    for key, state in (*JOB_BASE_SERIES, *JOB_FLAG_SERIES):
        c[key] = states[state]
    return c


_JOB_SERIES_DOC = {
    "pending": "Pending jobs (a pending array counts its pending tasks; held jobs too).",
    "hold": "Pending jobs held by their user or an admin.",
    "cpus_alloc": "CPUs allocated to running and suspended jobs.",
    "memory_alloc": "Memory allocated to running and suspended jobs (MiB, as slurmctld reports it).",
    "gpus_alloc": "GPUs allocated to running and suspended jobs.",
    **{key: f"Jobs in the {state} state." for key, state in (*JOB_BASE_SERIES, *JOB_FLAG_SERIES)},
}


def job_families(jobs: Sequence[Job], nodes: Sequence[Node]) -> list[Metric]:
    c = _job_counts(jobs)
    out: list[Metric] = [_gauge("slurm_jobs", "Jobs in squeue's listing (pending arrays by task).", c["jobs"])]
    out += [_gauge(f"slurm_jobs_{key}", doc, c[key]) for key, doc in _JOB_SERIES_DOC.items()]
    out.append(_gauge("slurm_jobs_nodes_alloc", "Nodes jobs hold.", sum(n.base in ("alloc", "mixed") for n in nodes)))
    return out


def partition_families(partitions: Sequence[Mapping[str, Any]], nodes: Sequence[Node],
                       jobs: Sequence[Job]) -> list[Metric]:
    names = [str(p.get("name", "")) for p in partitions if p.get("name")]
    by_part_nodes: dict[str, list[Node]] = defaultdict(list)
    for n in nodes:
        for part in n.partitions:
            by_part_nodes[part].append(n)
    by_part_jobs: dict[str, list[Job]] = defaultdict(list)
    for j in jobs:
        by_part_jobs[j.partition].append(j)

    def family(key: str, doc: str) -> GaugeMetricFamily:
        return GaugeMetricFamily(f"slurm_partition_{key}", doc, labels=[PARTITION_LABEL])

    totals = {"cpus": family("cpus", "CPUs of the partition's nodes."),
              "nodes": family("nodes", "Nodes of the partition."),
              "gpus": family("gpus", "GPUs of the partition's nodes.")}
    node_series = {
        **{b: f"Nodes of the partition in the {b} base state." for b in NODE_BASES},
        **{key: f"Nodes of the partition with the {flag} flag." for key, flag in PARTITION_NODE_FLAG_SERIES},
        "drain": "Nodes of the partition with the DRAIN flag and no job.",
        "drained": "Nodes of the partition with the DRAIN flag and no job.",
        "draining": "Nodes of the partition with the DRAIN flag whose jobs still run.",
        "cpus_alloc": "CPUs of the partition's nodes allocated to jobs.",
        "cpus_efctv": "CPUs of the partition's nodes jobs may use.",
        "cpus_idle": "CPUs of the partition's nodes jobs may use and none holds.",
        "mem_alloc": "Memory of the partition's nodes allocated to jobs (MiB).",
        "mem_avail": "Memory of the partition's nodes jobs may use (MiB).",
        "mem_free": "Free memory the partition's nodes report (MiB).",
        "mem_tot": "Memory of the partition's nodes (MiB).",
    }
    node_fams = {key: family(f"nodes_{key}", doc) for key, doc in node_series.items()}
    job_series = {
        **_JOB_SERIES_DOC,
        "max_job_nodes": "Largest node count (its maximum) a pending job of the partition asks for.",
        "max_job_nodes_nohold": "Largest node count (its maximum) a pending job not held asks for.",
        "min_job_nodes": "Largest minimum node count a pending job of the partition asks for.",
        "min_job_nodes_nohold": "Largest minimum node count a pending job not held asks for.",
        "wait_part_node_limit": "Pending jobs asking more nodes than the partition allows or has (PartitionNodeLimit).",
    }
    job_fams = {key: family(f"jobs_{key}", doc) for key, doc in job_series.items()}
    jobs_total = family("jobs", "Jobs of the partition in squeue's listing.")
    for p in partitions:
        name = str(p.get("name", ""))
        if not name:
            continue
        label = [name]
        members = by_part_nodes.get(name, [])
        totals["cpus"].add_metric(label, number((p.get("cpus") or {}).get("total")))
        totals["nodes"].add_metric(label, number((p.get("nodes") or {}).get("total")))
        totals["gpus"].add_metric(label, sum(n.gpus for n in members))
        nc = _partition_node_counts(members)
        for key, fam in node_fams.items():
            fam.add_metric(label, nc[key])
        jc = _job_counts(by_part_jobs.get(name, []))
        jobs_total.add_metric(label, jc["records"])
        for key, fam in job_fams.items():
            fam.add_metric(label, jc[key])
    return [_gauge("slurm_partitions", "Partitions slurmctld knows.", len(names)), *totals.values(), jobs_total,
            *job_fams.values(), *node_fams.values()]


def _partition_node_counts(members: Iterable[Node]) -> Counter[str]:
    c: Counter[str] = Counter()
    flags = dict((flag, key) for key, flag in PARTITION_NODE_FLAG_SERIES)
    for n in members:
        s = n.state
        c[n.base] += 1
        for flag in s.flags:
            if flag in flags:
                c[flags[flag]] += 1
        c["draining"] += n.draining
        c["drain"] += n.drained
        c["drained"] += n.drained
        c["cpus_alloc"] += n.cpus_alloc
        c["cpus_efctv"] += n.cpus_effective
        c["cpus_idle"] += max(0, n.cpus_effective - n.cpus_alloc)
        c["mem_alloc"] += n.mem_alloc
        c["mem_avail"] += s.real_memory - s.specialized_memory
        c["mem_free"] += n.mem_free
        c["mem_tot"] += s.real_memory
    return c


def scheduler_families(stats: Mapping[str, Any]) -> list[Metric]:
    """sdiag's statistics under the scheduler series' names; none when sdiag gave none."""
    if not isinstance(stats, Mapping) or not stats:
        return []

    def value(key: str) -> int:
        raw = stats.get(key, 0)
        return int(raw) if isinstance(raw, bool) else number(raw)

    out: list[Metric] = [_gauge(f"slurm_{name}", f"sdiag's {key}.", value(key)) for name, key in SDIAG_SERIES]
    for name, total, count in SDIAG_MEANS:
        n = value(count)
        out.append(_gauge(f"slurm_{name}", f"sdiag's {total} over {count}.", value(total) // n if n else 0))
    for name, group, key in SDIAG_EXITS:
        section = stats.get(group) or {}
        out.append(_gauge(f"slurm_{name}", f"sdiag's {group}.{key}: cycles that ended so.",
                          number(section.get(key, 0)) if isinstance(section, Mapping) else 0))
    return out


# ---------------------------------------------------------------------------------------------------
def nodeset_state(n: Node) -> str:
    """The one state of NODESET_STATES a node is counted in, by precedence."""
    s = n.state
    if n.base == "future" or "DYNAMIC_FUTURE" in s.flags:
        return "future"
    if n.base in ("down", "unknown", "") or s.flags & {"NOT_RESPONDING", "FAIL", "INVALID_REG"}:
        return "down"
    if n.draining:
        return "draining"
    if n.drained:
        return "drained"
    if "COMPLETING" in s.flags:
        return "completing"
    return {"alloc": "allocated", "mixed": "mixed"}.get(n.base, "idle")


def nodeset_families(nodesets: Sequence[NodeSetShape], nodes: Sequence[Node],
                     pending: Sequence[demand.PendingJob]) -> list[Metric]:
    dem = GaugeMetricFamily("slurmpod_nodeset_demand_nodes",
                            "Nodes the pending jobs this NodeSet could serve ask for.", labels=["nodeset"])
    states = GaugeMetricFamily("slurmpod_nodeset_nodes", "The NodeSet's Slurm nodes by state.",
                               labels=["nodeset", "state"])
    names = {n.state.name for n in nodes}
    for shape in nodesets:
        mine = [n for n in nodes if shape.feature in n.state.features]
        sized = demand.with_capacity(demand.with_records(shape, names), (n.state for n in mine))
        dem.add_metric([shape.name], demand.demand_nodes(pending, sized))
        counts = Counter(nodeset_state(n) for n in mine)
        for state in NODESET_STATES:
            states.add_metric([shape.name, state], counts[state])
    return [dem, states]


def drain_owner(reason: str) -> str:
    """Who drained a node, from its reason: one of DRAIN_OWNERS."""
    if reasons.health_check_of(reason) == AUTOSCALE_CHECK:
        return "autoscale"
    return _OWNER_LABEL.get(reasons.owner(reason).value, "admin")


def drain_families(nodes: Sequence[Node]) -> list[Metric]:
    by_owner = GaugeMetricFamily("slurmpod_drained_nodes", "Nodes with the DRAIN flag, by who drained them.",
                                 labels=["owner"])
    by_check = GaugeMetricFamily("slurmpod_health_drained_nodes", "Nodes a health check drained, by check.",
                                 labels=["check"])
    owners: Counter[str] = Counter()
    checks: Counter[str] = Counter()
    for n in nodes:
        if "DRAIN" not in n.state.flags:
            continue
        owner = drain_owner(n.state.reason)
        owners[owner] += 1
        if owner == "health":
            checks[reasons.health_check_of(n.state.reason) or ""] += 1
    for owner in DRAIN_OWNERS:
        by_owner.add_metric([owner], owners[owner])
    for check, count in sorted(checks.items()):
        by_check.add_metric([check], count)
    return [by_owner, by_check]


# ---------------------------------------------------------------------------------------------------
def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def policy_families(stats: Mapping[str, Any] | None) -> list[Metric]:
    """The job_submit plugin's own counts and call timing (wk.PLUGIN_STATS_FILE); none without the file."""
    if not isinstance(stats, Mapping):
        return []
    out: list[Metric] = []
    for key, name, doc in (("calls", "calls", "job_submit and job_modify calls the plugin answered."),
                           ("failures", "failures", "Calls where the policy did not answer (the job was rejected)."),
                           ("fast", "fast", "Calls the plugin's C fast path decided without Python.")):
        fam = CounterMetricFamily(f"slurmpod_policy_{name}", doc)
        fam.add_metric([], _count(stats.get(key)))
        out.append(fam)
    buckets: dict[int, int] = {}
    raw = stats.get("buckets")
    for key, n in (raw.items() if isinstance(raw, Mapping) else ()):
        if isinstance(key, str) and key.isdigit():
            buckets[int(key)] = _count(n)
    total = sum(buckets.values())
    cumulative = [(repr(edge / 1e6), sum(n for us, n in buckets.items() if us + 1 <= edge))
                  for edge in POLICY_EDGES_US]
    out.append(HistogramMetricFamily("slurmpod_policy_call_seconds", "How long the plugin's calls took.",
                                     buckets=[*cumulative, ("+Inf", total)],
                                     sum_value=_count(stats.get("sum_ns")) / 1e9))
    return out


def autoscale_families(counters: Mapping[str, Any] | None) -> list[Metric]:
    """The autoscaler's decisions (wk.AUTOSCALE_COUNTERS_FILE); none without the file."""
    if not isinstance(counters, Mapping):
        return []
    fam = CounterMetricFamily("slurmpod_autoscale_decisions", "The autoscaler's decisions, by NodeSet and action.",
                              labels=["nodeset", "action"])
    decisions = counters.get("decisions")
    for nodeset, actions in sorted(decisions.items() if isinstance(decisions, Mapping) else ()):
        if isinstance(nodeset, str) and isinstance(actions, Mapping):
            for action, n in sorted(actions.items()):
                if isinstance(action, str):
                    fam.add_metric([nodeset, action], _count(n))
    return [fam]

