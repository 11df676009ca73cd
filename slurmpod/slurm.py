"""The one Slurm client: scontrol, squeue and sinfo with their JSON output, and squeue's compact listing.

pyslurm cannot build against Slurm 24.11 or 26.05 (PyPI has only 25.11.x and its build refuses any
other major.minor), so slurmpod talks to Slurm through its CLI's JSON output. The read of every job
(the exporter's, the pending demand's) is squeue's compact listing instead (slurmpod.joblist): `squeue
--json` prints about 7.6 KB a job and needs about 150 KB of RSS for each, 1.5 GiB at 10,000 jobs, more
than the controller pod's memory.
``SlurmClient`` is the seam every caller takes as a parameter; ``CliSlurmClient`` is the one real
implementation; tests drive a recording fake (tests/fakes/slurm_client.py).
Every call has a timeout. "The controller did not answer" is always an error, never read as "no such
node" or "no jobs".
Ref: https://slurm.schedmd.com/scontrol.html, https://slurm.schedmd.com/squeue.html
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from slurmpod import confvalues, joblist
from slurmpod.commands import LocalRunner, Result, Runner
from slurmpod.demand import PendingJob, pending_from
from slurmpod.errors import PermanentError, TransientError
from slurmpod.joblist import JobListing, JobRecord
from slurmpod.nodestate import NodeState, from_json, load_json, number, parse_nodes

DEFAULT_TIMEOUT = 10.0
# What scontrol prints when the node asked for has no record (exit 1). Any other failure means the
# controller could not answer, which is not the same thing. Ref: slurm_strerror(ESLURM_INVALID_NODE_NAME)
NODE_NOT_FOUND_MARKERS = ("Invalid node name specified", "not found")
# What the Slurm commands print when they could not reach slurmctld (as opposed to slurmctld answering
# with an error). Ref: slurm_strerror(SLURM_COMMUNICATIONS_CONNECTION_ERROR, SLURMCTLD_COMMUNICATIONS_*)
UNREACHABLE_MARKERS = ("Unable to contact slurm controller", "Socket timed out", "Zero Bytes were transmitted",
                       "Connection refused", "Communication connection failure", "timed out",
                       # a configless client (worker, login) that cannot fetch slurm.conf from slurmctld
                       "Could not establish a configuration source", "failed to fetch config")
# The job states in which a job holds a node. Ref: https://slurm.schedmd.com/squeue.html#SECTION_JOB-STATE-CODES
ACTIVE_JOB_STATES = "RUNNING,COMPLETING,CONFIGURING,SUSPENDED"
# What squeue prints when a --Format name is one it does not know: its lines would not be ARGV's.
# Ref: src/squeue/opts.c (parse_long_format)
UNKNOWN_FORMAT_MARKER = "Invalid job format specification"

log = logging.getLogger(__name__)


class Report(enum.Enum):
    """A whole Slurm document as one command prints it with --json (the exporter's reads beside its job
    listing, SlurmClient.job_list). Ref: https://slurm.schedmd.com/sdiag.html
    """

    # --future: a nodeset's placeholders (FUTURE records) are its nodes too, counted as state future.
    # Ref: https://slurm.schedmd.com/scontrol.html#OPT_future
    NODES = ("scontrol", "--future", "show", "nodes", "--json")
    PARTITIONS = ("scontrol", "show", "partitions", "--json")
    DIAG = ("sdiag", "--json")

    @property
    def argv(self) -> tuple[str, ...]:
        return tuple(self.value)


@dataclass(frozen=True, slots=True)
class Job:
    """A job as squeue reports it."""

    job_id: int
    batch: bool
    state: str
    requeue: bool = True  # the job's Requeue flag: may it be requeued
    user: str = ""
    # The COMPLETING flag: the job has ended and its node is still cleaning up. `scontrol requeue`
    # accepts such a job and runs it again, a cancelled one too, so it is never requeued.
    # Ref: https://slurm.schedmd.com/squeue.html#SECTION_JOB-STATE-CODES
    completing: bool = False


@dataclass(frozen=True, slots=True)
class Placeholder:
    """A FUTURE node record for a worker pod that does not run yet: Slurm then knows the nodeset's size and
    features, so jobs that need more nodes than run now are accepted and wait (reason ReqNodeNotAvail)
    instead of being refused. slurmd never registers against it: the pod's start deletes it first.
    Ref: https://slurm.schedmd.com/dynamic_nodes.html, https://slurm.schedmd.com/slurm.conf.html#OPT_FUTURE"""

    name: str
    features: tuple[str, ...]
    cpus: int
    real_memory_mib: int
    gpus: int = 0

    def conf(self) -> list[str]:
        """The `scontrol create` arguments, every value checked so nothing can add a key."""
        confvalues.node_name("placeholder name", self.name)
        for f in self.features:
            confvalues.feature("placeholder feature", f)
        args = [f"NodeName={self.name}", "State=FUTURE",
                f"CPUs={confvalues.integer('placeholder cpus', self.cpus, 1, 1 << 20)}",
                f"RealMemory={confvalues.integer('placeholder memory', self.real_memory_mib, 1, 1 << 40)}"]
        if self.features:
            args.append(f"Features={','.join(self.features)}")
        if self.gpus:
            args.append(f"Gres=gpu:{confvalues.integer('placeholder gpus', self.gpus, 1, 1024)}")
        return args


class SlurmRefused(PermanentError):
    """slurmctld answered and refused the request (a job that cannot be requeued, a node with jobs)."""


def error_of(result: Result) -> TransientError | SlurmRefused:
    """A failed command: TransientError when slurmctld could not be reached, SlurmRefused when it said no."""
    text = result.stderr + result.stdout
    if any(m in text for m in UNREACHABLE_MARKERS) or not text.strip():
        return TransientError(result.brief())
    return SlurmRefused(result.brief())


class SlurmClient(Protocol):
    """What slurmpod asks of Slurm. Every method raises TransientError when Slurm does not answer in
    time and SlurmRefused when slurmctld answers with an error."""

    def ping(self, *, timeout: float = DEFAULT_TIMEOUT) -> bool: ...

    def nodes(self, *, future: bool = False, timeout: float = DEFAULT_TIMEOUT) -> tuple[NodeState, ...]:
        """Every node record; FUTURE records (placeholders no slurmd has taken) only with ``future``."""
        ...

    def node(self, name: str, *, future: bool = False, timeout: float = DEFAULT_TIMEOUT) -> NodeState | None:
        """The node's record, or None when slurmctld answers that it has none (a FUTURE record counts only
        with ``future``)."""
        ...

    def jobs_on_node(self, name: str, *, timeout: float = DEFAULT_TIMEOUT) -> tuple[Job, ...]: ...

    def drain(self, name: str, reason: str, *, timeout: float = DEFAULT_TIMEOUT) -> None: ...

    def resume(self, name: str, *, timeout: float = DEFAULT_TIMEOUT) -> None: ...

    def ask_to_schedule(self, node: NodeState, *, timeout: float = DEFAULT_TIMEOUT) -> None: ...

    def requeue(self, job_id: int, *, timeout: float = DEFAULT_TIMEOUT) -> None: ...

    def start_now(self, job_ids: Sequence[int], *, timeout: float = DEFAULT_TIMEOUT) -> None: ...

    def delete_node(self, name: str, *, timeout: float = DEFAULT_TIMEOUT) -> None: ...

    def create_future_node(self, placeholder: Placeholder, *, timeout: float = DEFAULT_TIMEOUT) -> None: ...

    def reconfigure(self, *, timeout: float = DEFAULT_TIMEOUT) -> None: ...

    def set_topology(self, name: str, value: str, *, timeout: float = DEFAULT_TIMEOUT) -> None: ...

    def sinfo_summary(self, *, timeout: float = DEFAULT_TIMEOUT) -> str: ...

    def report(self, which: Report, *, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The document ``which`` names, parsed; TransientError when the command printed no JSON object."""
        ...

    def job_list(self, *, pending: bool = False, timeout: float = DEFAULT_TIMEOUT) -> JobListing:
        """squeue's default listing in the compact format (slurmpod.joblist): pending, running, suspended and
        completing jobs, not the finished ones slurmctld still keeps (MinJobAge); its pending jobs only
        with ``pending``."""
        ...

    def job_states(self, job_ids: Sequence[int], *, timeout: float = DEFAULT_TIMEOUT) -> dict[int, frozenset[str]]:
        """Each listed job's state and flags (PENDING, COMPLETING...); a job slurmctld no longer holds is
        absent."""
        ...

    def pending_jobs(self, *, timeout: float = DEFAULT_TIMEOUT) -> tuple[PendingJob, ...]:
        """The pending jobs more nodes could start (slurmpod.demand.pending_from)."""
        ...


def reason_arg(reason: str) -> str:
    """`Reason=` for scontrol update, keeping the reason byte for byte.

    scontrol strips one leading and one trailing double quote from the value (update_node.c), so the
    value is always wrapped in quotes: a reason that itself starts or ends with a quote survives.
    A reason is one line; no length limit is imposed here (an admin's 300-character reason is re-applied
    as it was).
    """
    if not reason or "\n" in reason or "\r" in reason or "\0" in reason:
        raise ValueError(f"a node reason is one non-empty line, not {reason[:80]!r}")
    return f'Reason="{reason}"'


def parse_jobs(text: str) -> tuple[Job, ...]:
    """`squeue --json` -> jobs. Ref: https://slurm.schedmd.com/rest_api.html#v0.0.42_job_info"""
    doc = load_json(text, "squeue --json")
    jobs = doc.get("jobs", [])
    if not isinstance(jobs, list):
        raise TransientError(f"squeue --json has no jobs list: {text[:200]!r}")
    out = []
    for job in jobs:
        if not isinstance(job, dict):
            continue
        state = job.get("job_state", [])
        states = [str(x) for x in state] if isinstance(state, list) else [str(state)]
        out.append(Job(number(job.get("job_id")), bool(job.get("batch_flag", False)), states[0] if states else "",
                       bool(job.get("requeue", True)), str(job.get("user_name", "") or ""),
                       completing="COMPLETING" in states))
    return tuple(out)


def not_found(result: Result) -> bool:
    """slurmctld answered that the node has no record; a failure to reach it never counts, even when its
    text says "not found" (a controller host not found)."""
    text = result.stderr + result.stdout
    if result.returncode == 0 or any(m in text for m in UNREACHABLE_MARKERS):
        return False
    return any(m in text for m in NODE_NOT_FOUND_MARKERS)


class CliSlurmClient:
    """SlurmClient over the Slurm CLI, run by ``runner`` (here, or in a pod through `docker exec`)."""

    def __init__(self, runner: Runner | None = None) -> None:
        self._run = runner or LocalRunner()

    def _ok(self, argv: Sequence[str], timeout: float) -> Result:
        result = self._run(argv, timeout)
        if result.returncode != 0:
            raise error_of(result)
        return result

    def ping(self, *, timeout: float = DEFAULT_TIMEOUT) -> bool:
        # exit 1 when a controller is DOWN; Ref: https://slurm.schedmd.com/scontrol.html#OPT_ping
        result = self._run(["scontrol", "ping"], timeout)
        return result.returncode == 0 and "UP" in result.stdout and "DOWN" not in result.stdout

    def nodes(self, *, future: bool = False, timeout: float = DEFAULT_TIMEOUT) -> tuple[NodeState, ...]:
        # --future: FUTURE records too. Ref: https://slurm.schedmd.com/scontrol.html#OPT_future
        argv = ["scontrol", *(["--future"] if future else []), "show", "nodes", "--json"]
        return parse_nodes(self._ok(argv, timeout).stdout)

    def node(self, name: str, *, future: bool = False, timeout: float = DEFAULT_TIMEOUT) -> NodeState | None:
        confvalues.node_name("node", name)
        argv = ["scontrol", *(["--future"] if future else []), "show", "node", name, "--json"]
        result = self._run(argv, timeout)
        if not_found(result):
            return None
        if result.returncode != 0:
            raise error_of(result)
        doc = load_json(result.stdout, "scontrol show node --json")
        for raw in doc.get("nodes", []) or []:
            if isinstance(raw, dict) and raw.get("name") == name:
                return from_json(raw)
        return None

    def job_comment_extra(self, job_id: int, *, timeout: float = DEFAULT_TIMEOUT) -> tuple[str, str]:
        """A job's --comment and --extra. Raises SlurmpodError when slurmctld cannot say.
        Ref: https://slurm.schedmd.com/scontrol.html#OPT_show"""
        doc = load_json(self._ok(["scontrol", "show", "job", str(int(job_id)), "--json"], timeout).stdout,
                        "scontrol show job --json")
        for raw in doc.get("jobs", []) or []:
            if isinstance(raw, dict) and number(raw.get("job_id")) == job_id:
                return str(raw.get("comment") or ""), str(raw.get("extra") or "")
        raise PermanentError(f"scontrol show job {job_id}: no such job in the answer")

    def jobs_on_node(self, name: str, *, timeout: float = DEFAULT_TIMEOUT) -> tuple[Job, ...]:
        confvalues.node_name("node", name)
        argv = ["squeue", "--nodelist", name, "--states", ACTIVE_JOB_STATES, "--json"]
        return parse_jobs(self._ok(argv, timeout).stdout)

    def drain(self, name: str, reason: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        confvalues.node_name("node", name)
        self._ok(["scontrol", "update", f"NodeName={name}", "State=DRAIN", reason_arg(reason)], timeout)

    def resume(self, name: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        confvalues.node_name("node", name)
        self._ok(["scontrol", "update", f"NodeName={name}", "State=RESUME"], timeout)

    def ask_to_schedule(self, node: NodeState, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Have slurmctld run its scheduler now, by an update of ``node`` that changes nothing: it sets the
        node's active features to the ones it has. slurmctld queues a scheduling pass after every node
        update (_slurm_rpc_update_node in src/slurmctld/proc_req.c), but not when a dynamic node registers:
        create_dynamic_reg_node() makes the node idle before validate_node_specs() looks, so the node is not
        "newly up". Without this, jobs wait for the new node until the next backfill pass (bf_interval,
        30 s by default) or the periodic one (sched_interval, 60 s).
        Ref: https://slurm.schedmd.com/scontrol.html#OPT_ActiveFeatures_1"""
        confvalues.node_name("node", node.name)
        for f in node.active_features:
            confvalues.feature("active feature", f)
        self._ok(["scontrol", "update", f"NodeName={node.name}", f"ActiveFeatures={','.join(node.active_features)}"],
                 timeout)

    def requeue(self, job_id: int, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        # Ref: https://slurm.schedmd.com/scontrol.html#OPT_requeue (batch jobs only)
        self._ok(["scontrol", "requeue", str(int(job_id))], timeout)

    def start_now(self, job_ids: Sequence[int], *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Make pending jobs eligible now: slurmctld holds a requeued job back (Slurm's default 120 s; with the
        cluster spec's requeue.fast 16 s on 24.11, 1 s from 25.11, docs/requeue.md). Like any job update, it
        has slurmctld schedule within seconds (_slurm_rpc_update_job queues a pass, which runs at most
        batch_sched_delay, 3 s, after the last one), so a job that fits starts then.

        Ref: https://slurm.schedmd.com/scontrol.html#OPT_StartTime
        Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_batch_sched_delay
        """
        if job_ids:
            ids = ",".join(str(int(j)) for j in job_ids)
            self._ok(["scontrol", "update", f"JobId={ids}", "StartTime=now"], timeout)

    def delete_node(self, name: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        # Ref: https://slurm.schedmd.com/dynamic_nodes.html (scontrol delete nodename)
        confvalues.node_name("node", name)
        self._ok(["scontrol", "delete", f"NodeName={name}"], timeout)

    def create_future_node(self, placeholder: Placeholder, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        # Ref: https://slurm.schedmd.com/dynamic_nodes.html (scontrol create NodeName=... State=FUTURE)
        self._ok(["scontrol", "create", *placeholder.conf()], timeout)

    def reconfigure(self, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._ok(["scontrol", "reconfigure"], timeout)

    def set_topology(self, name: str, value: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        # 25.05+: a node's unit in topology.yaml. Ref: https://slurm.schedmd.com/scontrol.html#OPT_Topology
        confvalues.node_name("node", name)
        confvalues.token("topology", value)
        self._ok(["scontrol", "update", f"NodeName={name}", f"Topology={value}"], timeout)

    def sinfo_summary(self, *, timeout: float = DEFAULT_TIMEOUT) -> str:
        """`sinfo --summarize`: proves the client reaches its configuration and the controller."""
        return self._ok(["sinfo", "--noheader", "--summarize"], timeout).stdout

    def report(self, which: Report, *, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        return load_json(self._ok(which.argv, timeout).stdout, " ".join(which.argv))

    def job_list(self, *, pending: bool = False, timeout: float = DEFAULT_TIMEOUT) -> JobListing:
        # PENDING matches a job whose state is exactly pending: one carrying a state flag (an expedited
        # requeue from 25.11, a held requeue) is not listed; held ones would count zero anyway.
        # Ref: https://slurm.schedmd.com/squeue.html#OPT_states
        argv = [*joblist.ARGV[:1], *(["--states=PENDING"] if pending else []), *joblist.ARGV[1:]]
        result = self._ok(argv, timeout)
        if UNKNOWN_FORMAT_MARKER in result.stderr:
            raise TransientError(result.brief())
        listing = joblist.parse_listing(result.stdout)
        if listing.unparsed:
            log.warning("squeue lines not parsed; their jobs are not counted", extra={"ctx": {
                "unparsed": listing.unparsed, "parsed": len(listing.records)}})
        return listing

    def pending_jobs(self, *, timeout: float = DEFAULT_TIMEOUT) -> tuple[PendingJob, ...]:
        return pending_from(self.job_list(pending=True, timeout=timeout).records)

    def job_states(self, job_ids: Sequence[int], *, timeout: float = DEFAULT_TIMEOUT) -> dict[int, frozenset[str]]:
        # --only-job-state: slurmctld's job-state RPC, which reads only the listed jobs' ids and states,
        # not every job it holds. Ref: https://slurm.schedmd.com/squeue.html#OPT_only-job-state
        if not job_ids:
            return {}
        argv = ["squeue", "--only-job-state", f"--jobs={','.join(str(int(j)) for j in job_ids)}", "--json"]
        doc = load_json(self._ok(argv, timeout).stdout, "squeue --only-job-state")
        states: dict[int, frozenset[str]] = {}
        for job in doc.get("jobs") or []:
            try:
                states[int(job["job_id"])] = frozenset(str(s) for s in job["state"])
            except (KeyError, TypeError, ValueError):
                raise TransientError(f"squeue --only-job-state: a job without an id or state: {job!r:.200}") from None
        return states


__all__ = ["CliSlurmClient", "Job", "JobListing", "JobRecord", "NodeState", "PendingJob", "Placeholder", "Report",
           "SlurmClient", "SlurmRefused", "TransientError", "error_of", "reason_arg"]
