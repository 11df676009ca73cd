"""Slurm's answers for the exporter's tests: --json documents shaped like Slurm 24.11's (data_parser
v0.0.42): `scontrol show nodes --json`, `scontrol show partitions --json`, `sdiag --json` (26.05's v0.0.45
prints the same fields for everything the exporter reads); and squeue's compact job listing
(slurmpod.joblist) as records, or as the lines squeue prints for them.

Ref: https://slurm.schedmd.com/rest_api.html#v0.0.42_node, #v0.0.42_partition_info, #v0.0.42_stats_msg
Ref: https://slurm.schedmd.com/squeue.html#OPT_Format
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slurmpod import joblist
from slurmpod.joblist import JobListing, JobRecord
from slurmpod.slurm import Report


def num(n: int = 0, *, set_: bool = True) -> dict[str, Any]:
    """Slurm's wrapped number: {"set", "infinite", "number"}."""
    return {"set": set_, "infinite": False, "number": n}


def node(name: str, state: list[str], *, partitions: tuple[str, ...] = ("main",), features: tuple[str, ...] = (),
         cpus: int = 32, alloc_cpus: int = 0, gres: str = "", gres_used: str = "", reason: str = "",
         **over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": name, "hostname": name, "address": name, "state": state, "partitions": list(partitions),
        "features": list(features), "active_features": list(features), "cpus": cpus, "effective_cpus": cpus,
        "alloc_cpus": alloc_cpus, "alloc_idle_cpus": cpus - alloc_cpus, "specialized_cores": 0,
        "real_memory": 65536, "specialized_memory": 0, "alloc_memory": 0, "free_mem": num(60000),
        "gres": gres, "gres_used": gres_used, "gres_drained": "N/A", "reason": reason,
        "reason_set_by_user": "root" if reason else "", "reason_changed_at": num(0), "extra": "", "topology": "",
        "tres": f"cpu={cpus},mem=64G,billing={cpus}", "tres_used": "", "version": "24.11.5",
    }
    doc.update(over)
    return doc


def job(job_id: int, state: str = "PENDING", *, partition: str = "main", reason: str = "None", nodes: int = 1,
        cpus: int = 1, **over: Any) -> JobRecord:
    """A job record as squeue's compact listing gives it: a one-node, one-CPU job of partition main."""
    fields: dict[str, Any] = {
        "job_id": job_id, "state": state, "priority": 1, "nodes": nodes, "max_nodes": nodes, "cpus": cpus,
        "cpus_per_node": 1, "tasks": 1, "tasks_per_node": 0, "array_tasks": "",
        "partitions": tuple(partition.split(",")),
        "required_nodes": "", "tres_alloc": f"cpu={cpus},mem=1G,node={nodes},billing={cpus}", "tres_per_node": "",
        "tres_per_job": "", "tres_per_task": "", "reason": reason, "features": "",
    }
    fields.update(over)
    return JobRecord(**fields)


def line(record: JobRecord) -> str:
    """The line squeue prints for ``record`` with slurmpod.joblist.ARGV (N/A and (null) where it prints them)."""
    values = (record.job_id, record.state, record.priority, record.nodes, record.max_nodes, record.cpus,
              record.cpus_per_node, record.tasks, record.tasks_per_node, record.array_tasks or "N/A",
              ",".join(record.partitions), record.required_nodes, record.tres_alloc or "N/A",
              record.tres_per_node or "N/A", record.tres_per_job or "N/A", record.tres_per_task or "N/A",
              record.reason, record.features or "(null)")
    return joblist.SEPARATOR.join(str(v) for v in values)


def listing(jobs: Sequence[JobRecord]) -> JobListing:
    return JobListing(tuple(jobs))


def partition(name: str, *, nodes: int, cpus: int) -> dict[str, Any]:
    return {"name": name, "nodes": {"allowed_allocation": "", "configured": "", "total": nodes},
            "cpus": {"task_binding": 0, "total": cpus}, "maximums": {"nodes": num(0, set_=False)},
            "partition": {"state": ["UP"]}, "node_sets": ""}


def diag(**over: Any) -> dict[str, Any]:
    stats: dict[str, Any] = {
        "parts_packed": 1, "req_time": num(1767225600), "req_time_start": num(1767222000),
        "server_thread_count": 3, "agent_queue_size": 0, "agent_count": 0, "agent_thread_count": 0,
        "dbd_agent_queue_size": 0, "gettimeofday_latency": 12, "schedule_cycle_max": 900,
        "schedule_cycle_last": 150, "schedule_cycle_sum": 10000, "schedule_cycle_total": 40,
        "schedule_cycle_mean": 250, "schedule_cycle_mean_depth": 2, "schedule_cycle_per_minute": 1,
        "schedule_cycle_depth": 100, "schedule_exit": {
            "end_job_queue": 38, "default_queue_depth": 1, "max_job_start": 0, "max_rpc_cnt": 1, "max_sched_time": 0,
            "licenses": 0},
        "schedule_queue_length": 7, "jobs_submitted": 120, "jobs_started": 110, "jobs_completed": 100,
        "jobs_canceled": 3, "jobs_failed": 2, "jobs_pending": 7, "jobs_running": 5, "job_states_ts": num(1767225590),
        "bf_backfilled_jobs": 9, "bf_last_backfilled_jobs": 1, "bf_backfilled_het_jobs": 0, "bf_cycle_counter": 4,
        "bf_cycle_mean": 500, "bf_depth_mean": 3, "bf_depth_mean_try": 3, "bf_cycle_sum": 2002, "bf_cycle_last": 480,
        "bf_cycle_max": 700, "bf_exit": {"end_job_queue": 4, "bf_max_job_start": 0, "bf_max_job_test": 0,
                                         "bf_max_time": 0, "bf_node_space_size": 0, "state_changed": 0},
        "bf_last_depth": 3, "bf_last_depth_try": 3, "bf_depth_sum": 13, "bf_depth_try_sum": 12, "bf_queue_len": 3,
        "bf_queue_len_mean": 3, "bf_queue_len_sum": 14, "bf_table_size": 2, "bf_table_size_sum": 9,
        "bf_table_size_mean": 2, "bf_when_last_cycle": num(1767225570), "bf_active": False,
        "rpcs_by_message_type": [], "rpcs_by_user": [], "pending_rpcs": [], "pending_rpcs_by_hostlist": [],
    }
    stats.update(over)
    return {"statistics": stats, "meta": {}, "errors": [], "warnings": []}


def reports(nodes: list[dict[str, Any]], partitions: list[dict[str, Any]],
            stats: dict[str, Any] | None = None) -> dict[Report, dict[str, Any]]:
    """What the fake Slurm answers for each document."""
    return {Report.NODES: {"nodes": nodes, "errors": [], "warnings": []},
            Report.PARTITIONS: {"partitions": partitions, "errors": [], "warnings": []},
            Report.DIAG: stats if stats is not None else diag()}


def synthetic(n_nodes: int = 1000, n_jobs: int = 10_000) -> tuple[dict[Report, dict[str, Any]], JobListing]:
    """A large cluster: ``n_nodes`` GPU nodes in two NodeSets and partitions, ``n_jobs`` jobs (a quarter
    running, the rest pending, some of them arrays, some held)."""
    nodes = []
    for i in range(n_nodes):
        part, feature = ("gpu", "gpu") if i % 2 else ("main", "cpu")
        busy = i % 4
        state = (["ALLOCATED"], ["MIXED"], ["IDLE"], ["IDLE", "DRAIN"])[busy]
        nodes.append(node(f"{feature}-worker-{i}", [*state, "DYNAMIC_NORM"], partitions=(part,), features=(feature,),
                          alloc_cpus=(32, 8, 0, 0)[busy], gres="gpu:h100:8(S:0-1)" if feature == "gpu" else "",
                          reason="slurmpod: xid: GPU fell off the bus" if busy == 3 else ""))
    jobs = []
    for j in range(n_jobs):
        part = "gpu" if (j // 4) % 2 else "main"
        if j % 4 == 0:
            jobs.append(job(j + 1, "RUNNING", partition=part, cpus=8, tres_alloc="cpu=8,mem=16G,node=1,gres/gpu=2"))
        elif j % 4 == 1:
            jobs.append(job(j + 1, partition=part, reason="Resources", features="gpu" if part == "gpu" else "cpu",
                            tres_per_node="gres/gpu:4" if part == "gpu" else "", nodes=2))
        elif j % 4 == 2:
            jobs.append(job(j + 1, partition=part, reason="Priority", array_tasks="1-20%5"))
        else:
            jobs.append(job(j + 1, partition=part, reason="JobHeldUser", priority=0))
    parts = [partition("main", nodes=n_nodes // 2, cpus=16 * n_nodes), partition("gpu", nodes=n_nodes // 2,
                                                                                    cpus=16 * n_nodes)]
    return reports(nodes, parts), listing(jobs)
