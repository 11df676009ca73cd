"""A recording fake of ``slurmpod.slurm.SlurmClient`` and a fake clock, for decision tables without Docker.

The fake keeps a small in-memory Slurm (nodes, jobs) that behaves like slurmctld for the calls slurmpod
makes, records every call, and injects faults per method:
- ``fail[method] = exc``   that method raises exc (a controller that errors, returns non-JSON ...);
- ``hang.add(method)``      that method uses up its whole timeout on the fake clock, then raises
                            TransientError, as the real client does when scontrol times out;
- ``down = True``           every call raises TransientError (slurmctld unreachable);
- ``down_at = method``      the controller goes down (for good) when that method is first called;
- ``down_calls = n``        the next n calls raise TransientError, then the controller is back;
- ``end_when_listed``       jobs that end right after a jobs_on_node listed them (gone by the requeue);
- ``requeue_lists``         job_states gives each requeued job COMPLETING for that many calls (its other
                            nodes not done with it yet), then PENDING.
Whole documents (``report``) are what ``reports`` holds, ``job_list`` answers ``listing`` (its pending
records with ``pending``), and ``pending_jobs`` answers ``pending``.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slurmpod.demand import PendingJob
from slurmpod.errors import SlurmpodError, TransientError
from slurmpod.nodestate import NodeState
from slurmpod.slurm import (
    DEFAULT_TIMEOUT,
    Job,
    JobListing,
    Placeholder,
    Report,
    SlurmRefused,
    reason_arg,
)


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += max(0.0, seconds)


@dataclass
class FakeJob:
    job: Job
    node: str
    pending: bool = False
    start_now: bool = False


@dataclass
class FakeSlurm:
    clock: FakeClock = field(default_factory=FakeClock)
    nodes_by_name: dict[str, NodeState] = field(default_factory=dict)
    jobs: dict[int, FakeJob] = field(default_factory=dict)
    calls: list[tuple[str, tuple[object, ...]]] = field(default_factory=list)
    fail: dict[str, SlurmpodError] = field(default_factory=dict)
    hang: set[str] = field(default_factory=set)
    down: bool = False
    down_calls: int = 0
    down_at: str = ""
    end_when_listed: set[int] = field(default_factory=set)
    ping_answer: bool = True  # what `scontrol ping` says (False: the controller is DOWN)
    # jobs that leave their node only after this many jobs_on_node polls (a slow epilog)
    linger_polls: int = 0
    # per-call cost on the fake clock
    call_seconds: float = 0.05
    # what `report` answers per document (a missing one: an empty document of its kind)
    reports: dict[Report, dict[str, Any]] = field(default_factory=dict)
    listing: JobListing = field(default_factory=JobListing)
    pending: list[PendingJob] = field(default_factory=list)
    requeue_lists: int = 0
    # jobs start_now was given while their requeue was still under way (slurmctld would overwrite it)
    released_early: list[int] = field(default_factory=list)

    # --- set-up helpers ---
    def add_node(self, name: str, base: str = "IDLE", flags: Sequence[str] = ("DYNAMIC_NORM",),
                 reason: str = "", **over: object) -> NodeState:
        state = NodeState(name=name, base=base, flags=frozenset(flags), reason=reason, **over)  # type: ignore[arg-type]
        self.nodes_by_name[name] = state
        return state

    def add_job(self, job_id: int, node: str, *, batch: bool = True, requeue: bool = True,
                state: str = "RUNNING", completing: bool = False, user: str = "") -> None:
        self.jobs[job_id] = FakeJob(Job(job_id, batch, state, requeue, user=user, completing=completing), node)

    def called(self, method: str) -> list[tuple[object, ...]]:
        return [args for name, args in self.calls if name == method]

    @property
    def methods(self) -> list[str]:
        return [name for name, _ in self.calls]

    # --- the plumbing every call goes through ---
    def _enter(self, method: str, timeout: float, *args: object) -> None:
        self.calls.append((method, args))
        if method == self.down_at:
            self.down = True
        if self.down_calls > 0:
            self.down_calls -= 1
            self.clock.sleep(min(timeout, 1.0))
            raise TransientError(f"{method}: Unable to contact slurm controller (connect failure)")
        if self.down:
            self.clock.sleep(min(timeout, 1.0))
            raise TransientError(f"{method}: Unable to contact slurm controller (connect failure)")
        if method in self.hang:
            self.clock.sleep(timeout)
            raise TransientError(f"{method} timed out after {timeout:g} s")
        if method in self.fail:
            raise self.fail[method]
        self.clock.sleep(self.call_seconds)

    def _set(self, name: str, **changes: object) -> None:
        self.nodes_by_name[name] = dataclasses.replace(self.nodes_by_name[name], **changes)  # type: ignore[arg-type]

    # --- SlurmClient ---
    def ping(self, *, timeout: float = DEFAULT_TIMEOUT) -> bool:
        self._enter("ping", timeout)
        return self.ping_answer

    def nodes(self, *, future: bool = False, timeout: float = DEFAULT_TIMEOUT) -> tuple[NodeState, ...]:
        self._enter("nodes", timeout)
        return tuple(n for n in self.nodes_by_name.values() if future or n.base != "FUTURE")

    def node(self, name: str, *, future: bool = False, timeout: float = DEFAULT_TIMEOUT) -> NodeState | None:
        self._enter("node", timeout, name)
        state = self.nodes_by_name.get(name)
        return state if state is not None and (future or state.base != "FUTURE") else None

    def create_future_node(self, placeholder: Placeholder, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        placeholder.conf()  # the real client's checks
        self._enter("create_future_node", timeout, placeholder.name)
        if placeholder.name in self.nodes_by_name:
            raise SlurmRefused(f"scontrol create exited 1: Duplicate node name {placeholder.name}")
        self.add_node(placeholder.name, "FUTURE", ("DYNAMIC_NORM",), features=placeholder.features,
                      cpus=placeholder.cpus, real_memory=placeholder.real_memory_mib)

    def jobs_on_node(self, name: str, *, timeout: float = DEFAULT_TIMEOUT) -> tuple[Job, ...]:
        self._enter("jobs_on_node", timeout, name)
        if self.linger_polls > 0:
            self.linger_polls -= 1
            return tuple(j.job for j in self.jobs.values() if j.node == name)
        listed = tuple(j.job for j in self.jobs.values() if j.node == name and not j.pending)
        for job in listed:
            if job.job_id in self.end_when_listed:
                del self.jobs[job.job_id]
        return listed

    def drain(self, name: str, reason: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        reason_arg(reason)  # the real client's rule: one non-empty line
        self._enter("drain", timeout, name, reason)
        if name not in self.nodes_by_name:
            raise SlurmRefused(f"scontrol update exited 1: Invalid node name specified {name}")
        node = self.nodes_by_name[name]
        self._set(name, flags=node.flags | {"DRAIN"}, reason=reason)

    def resume(self, name: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._enter("resume", timeout, name)
        node = self.nodes_by_name[name]
        if not node.drained and node.base != "DOWN":  # slurmctld's answer to RESUME of a node in service
            raise SlurmRefused("scontrol update exited 1: slurm_update error: Invalid node state specified")
        self._set(name, flags=node.flags - {"DRAIN", "DRAINED", "DRAINING"}, reason="")

    def ask_to_schedule(self, node: NodeState, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._enter("ask_to_schedule", timeout, node.name)

    def requeue(self, job_id: int, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._enter("requeue", timeout, job_id)
        job = self.jobs.get(job_id)
        if job is None or job.pending:
            raise SlurmRefused(f"scontrol requeue exited 1: Job has already finished for job {job_id}")
        if not job.job.batch:
            raise SlurmRefused(f"scontrol requeue exited 1: Only batch jobs are accepted or processed {job_id}")
        if not job.job.requeue:
            raise SlurmRefused(f"scontrol requeue exited 1: Requested operation is presently disabled {job_id}")
        job.pending = True

    def start_now(self, job_ids: Sequence[int], *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._enter("start_now", timeout, tuple(job_ids))
        for j in job_ids:
            if j in self.jobs:
                self.jobs[j].start_now = True
                if self.jobs[j].pending and self.requeue_lists > 0:
                    self.released_early.append(j)

    def delete_node(self, name: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._enter("delete_node", timeout, name)
        if any(j.node == name and not j.pending for j in self.jobs.values()):
            raise SlurmRefused("scontrol delete exited 1: Node has jobs")
        self.nodes_by_name.pop(name, None)

    def reconfigure(self, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._enter("reconfigure", timeout)

    def set_topology(self, name: str, value: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._enter("set_topology", timeout, name, value)
        self._set(name, topology=value)

    def sinfo_summary(self, *, timeout: float = DEFAULT_TIMEOUT) -> str:
        self._enter("sinfo_summary", timeout)
        return "main* up infinite 0/1/0/1 w-0\n"

    def report(self, which: Report, *, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        self._enter("report", timeout, which)
        return copy.deepcopy(self.reports.get(which, {}))

    def job_list(self, *, pending: bool = False, timeout: float = DEFAULT_TIMEOUT) -> JobListing:
        self._enter("job_list", timeout, pending)
        if not pending:
            return self.listing
        return dataclasses.replace(self.listing, records=tuple(
            r for r in self.listing.records if r.state == "PENDING"))  # squeue --states=PENDING: no flag

    def pending_jobs(self, *, timeout: float = DEFAULT_TIMEOUT) -> tuple[PendingJob, ...]:
        self._enter("pending_jobs", timeout)
        return tuple(self.pending)

    def job_states(self, job_ids: Sequence[int], *, timeout: float = DEFAULT_TIMEOUT) -> dict[int, frozenset[str]]:
        self._enter("job_states", timeout, tuple(job_ids))
        flags = frozenset({"PENDING", "COMPLETING"}) if self.requeue_lists > 0 else frozenset({"PENDING"})
        self.requeue_lists = max(0, self.requeue_lists - 1)
        held = {j.job.job_id: (flags if j.pending else frozenset({j.job.state})) for j in self.jobs.values()}
        return {job_id: held[job_id] for job_id in job_ids if job_id in held}


# An admin's drain reason of 300 characters with double quotes at both ends (scontrol strips one pair
# of quotes from an unquoted value): what slurmpod must keep and re-apply byte for byte.
ADMIN_REASON_300 = '"' + ("rack 7 PSU swap, ticket #4411 'do not touch'; " * 7)[:298] + '"'
