"""squeue's job listing in a compact format: the fields the exporter and the pending demand use, one job a line.

`squeue --json` prints every field of every job: 7.7 KB a job, 77 MB and 1.5 GiB of RSS at 10,000 jobs.
``ARGV`` asks squeue for eighteen fields only (``FIELDS``, its `--Format` names), each printed whole
(size 0: neither cut nor padded) and followed by ``SEPARATOR``, the ASCII unit separator, which squeue
prints as it is given (a field's suffix). A line is one squeue record:
- every field but the last is one that slurmctld writes or checks: numbers, state and reason names, the
  array's task list, partition and node names, TRES strings (a GRES request slurmctld refuses unless
  its name is configured);
- the last is the job's --constraint, the one field a user writes more freely: a line is split at most
  len(FIELDS) - 1 times, so a separator in it stays in it;
- neither the job's name nor its comment is read at all;
- a line that does not parse (too few fields, a number that is not one, a state that is not a state
  name) is skipped and counted (``JobListing.unparsed``); it never stops the read.
The listing is squeue's default one: pending, running, suspended and completing jobs, a pending job
array's tasks that are still one record (or were split off and are still pending) on one line.

What the compact format does not say, beside the JSON: squeue names one state per job (``state``: its
first state flag in Slurm's order, else its base state; ``STATE_BASES`` maps a flag back to the base it
goes with), and its reason is slurmctld's description of the reason where it wrote one (``reason``,
``reason_codes``).

Ref: https://slurm.schedmd.com/squeue.html#OPT_Format (type[:[.][size][suffix]]; the names below)
Ref: https://slurm.schedmd.com/squeue.html#OPT_noconvert, https://slurm.schedmd.com/squeue.html#OPT_noheader
Ref: https://slurm.schedmd.com/squeue.html#SECTION_JOB-STATE-CODES
Ref: https://slurm.schedmd.com/job_reason_codes.html
Ref: https://www.unicode.org/charts/PDF/U0000.pdf (U+001F INFORMATION SEPARATOR ONE, "unit separator")
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

SEPARATOR = "\x1f"
# squeue's --Format names, in the order they are printed. Ref: https://slurm.schedmd.com/squeue.html#OPT_Format
FIELDS = (
    "JobId",  # %A: the record's job ID (a pending array's record: the array's first job ID)
    "State",  # %T: one name, see STATE_BASES
    "PriorityLong",  # %Q: 0 while the job is held
    "NumNodes",  # %D: nodes allocated, or the fewest a pending job asks
    "MaxNodes",  # the most it asks (its NumNodes when it set none)
    "NumCPUs",  # %C: CPUs asked or allocated
    "MinCPUs",  # %c: CPUs per node it asks at least
    "NumTasks",  # tasks it asks (--ntasks)
    "NTPerNode",  # tasks per node it asks (--ntasks-per-node); N/A when none
    "ArrayTaskId",  # %K: N/A, one task ID, or a pending array's task IDs with its throttle: 0-9%2
    "Partition",  # %P: the partition(s), comma-separated
    "ReqNodes",  # %n: the nodes it names (--nodelist)
    "tres-alloc",  # TRES allocated (a pending job: asked), e.g. cpu=2,mem=1G,node=1
    "tres-per-node",  # %b: GRES per node (--gres, --gpus-per-node), e.g. gres/gpu:h100:2; N/A when none
    "tres-per-job",  # --gpus
    "tres-per-task",  # --gpus-per-task
    "Reason",  # %r: the reason code, or slurmctld's description of it
    "Feature",  # %f: the --constraint expression, last
)
ARGV = ("squeue", "--noheader", "--noconvert", "--Format",
        ",".join(f"{name}:0{SEPARATOR}" for name in FIELDS[:-1]) + f",{FIELDS[-1]}:0")
# squeue's own word for a field with no value.
# Ref: https://slurm.schedmd.com/squeue.html#OPT_Format (N/A); printf's "(null)" for a string never set
NONE_WORDS = frozenset({"", "N/A", "(null)"})
# Slurm's NO_VAL and INFINITE in 32 bits, printed as "%u" (4294967294) or "%d" (-2): "not set".
# Ref: slurm/slurm.h.in (NO_VAL, INFINITE)
NO_VAL = 0xFFFFFFFE

# squeue prints one state name: a job's first state flag in Slurm's order (COMPLETING, STAGE_OUT,
# CONFIGURING, EXPEDITING, RESIZING, REQUEUED, REQUEUE_FED, REQUEUE_HOLD, SPECIAL_EXIT, STOPPED, REVOKED,
# RESV_DEL_HOLD, SIGNALING), else its base state. The base a flag goes with, where slurmctld gives it one
# (a COMPLETING job's base is the state it ended in, or PENDING when it is requeued: not known here).
# Ref: https://slurm.schedmd.com/squeue.html#SECTION_JOB-STATE-CODES (job_state_string in slurm_protocol_defs.c)
BASE_STATES = frozenset({"PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT",
                         "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY"})
STATE_BASES = {
    "CONFIGURING": "RUNNING", "RESIZING": "RUNNING", "SIGNALING": "RUNNING", "STOPPED": "RUNNING",
    "EXPEDITING": "PENDING", "REQUEUED": "PENDING", "REQUEUE_FED": "PENDING", "REQUEUE_HOLD": "PENDING",
    "SPECIAL_EXIT": "PENDING", "RESV_DEL_HOLD": "PENDING",
    "COMPLETING": "", "STAGE_OUT": "", "REVOKED": "",
}

_STATE = re.compile(r"[A-Z][A-Z_]*")
_INT = re.compile(r"-?[0-9]+")
_TASKS = re.compile(r"[0-9][0-9,:%.-]*")
# A reason code: one word. A description has spaces; a pending array's record that squeue made of its
# tasks' records lists their reasons, comma-separated.
_REASON_CODE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One line of the listing: a job, or a pending array's tasks that are one record."""

    job_id: int
    state: str  # one name, as squeue prints it: see STATE_BASES
    priority: int  # 0: held
    nodes: int  # nodes allocated, or the fewest a pending job asks
    max_nodes: int  # the most it asks, at least ``nodes``
    cpus: int
    cpus_per_node: int  # the fewest CPUs per node it asks
    tasks: int  # 0: not asked
    tasks_per_node: int  # 0: not asked
    array_tasks: str  # "" not an array; "7" one task; "0-9%2" a pending array's tasks and throttle
    partitions: tuple[str, ...]
    required_nodes: str  # the nodes it names (a Slurm hostlist), "" for none
    tres_alloc: str  # TRES allocated, or asked while pending; "" for none
    tres_per_node: str
    tres_per_job: str
    tres_per_task: str
    reason: str  # a reason code, or slurmctld's description of one
    features: str  # the --constraint expression, "" for none

    @property
    def base(self) -> str:
        """The base state (PENDING, RUNNING ...), "" when squeue's one name does not tell it."""
        return self.state if self.state in BASE_STATES else STATE_BASES.get(self.state, "")

    @property
    def flags(self) -> frozenset[str]:
        """The state flag squeue names, if it names one."""
        return frozenset() if self.state in BASE_STATES else frozenset({self.state})

    @property
    def reason_codes(self) -> tuple[str, ...]:
        """The reason codes ``reason`` names: one (`Priority`), its first word before a comma
        (`ReqNodeNotAvail, UnavailableNodes:w-3`), several (`Priority,Resources`, an array record squeue
        made of its tasks' records), or none (a description in words)."""
        return tuple(part for part in (p.strip() for p in self.reason.split(",")) if _REASON_CODE.fullmatch(part))


@dataclass(frozen=True, slots=True)
class JobListing:
    """The records of one listing, and the lines that did not parse (counted, never read)."""

    records: tuple[JobRecord, ...] = ()
    unparsed: int = 0


def parse_listing(text: str) -> JobListing:
    """squeue's output for ARGV -> its records. Lines end at "\\n" only: the separator and the other
    control characters Python's splitlines() would break at stay inside their line."""
    records: list[JobRecord] = []
    unparsed = 0
    for line in text.split("\n"):
        if not line:
            continue
        record = parse_line(line)
        if record is None:
            unparsed += 1
        else:
            records.append(record)
    return JobListing(tuple(records), unparsed)


def parse_line(line: str) -> JobRecord | None:
    """One line -> its record; None when it is not one of ARGV's lines."""
    parts = line.split(SEPARATOR, len(FIELDS) - 1)
    if len(parts) != len(FIELDS):
        return None
    (job_id, state, priority, nodes, max_nodes, cpus, cpus_per_node, tasks, tasks_per_node, array_tasks,
     partitions, required_nodes, tres_alloc, tres_per_node, tres_per_job, tres_per_task, reason, features) = parts
    numbers = _numbers((job_id, priority, nodes, max_nodes, cpus, cpus_per_node, tasks))
    per_node = _numbers((tasks_per_node,), none_ok=True)
    tasks_text = _text(array_tasks)
    if (numbers is None or per_node is None or not _STATE.fullmatch(state) or numbers[0] <= 0
            or (tasks_text and not _TASKS.fullmatch(tasks_text))):
        return None
    job, prio, n_nodes, n_max, n_cpus, n_per_node, n_tasks = numbers
    return JobRecord(
        job_id=job, state=state, priority=prio, nodes=n_nodes, max_nodes=max(n_max, n_nodes), cpus=n_cpus,
        cpus_per_node=n_per_node, tasks=n_tasks, tasks_per_node=per_node[0], array_tasks=tasks_text,
        partitions=tuple(p for p in _text(partitions).split(",") if p), required_nodes=_text(required_nodes),
        tres_alloc=_text(tres_alloc), tres_per_node=_text(tres_per_node), tres_per_job=_text(tres_per_job),
        tres_per_task=_text(tres_per_task), reason=_text(reason), features=_text(features),
    )


def _text(value: str) -> str:
    return "" if value in NONE_WORDS else value


def _numbers(values: Sequence[str], *, none_ok: bool = False) -> list[int] | None:
    """Whole numbers, Slurm's "not set" as 0 (and N/A too with ``none_ok``); None when one is not a number."""
    out = []
    for value in values:
        if none_ok and value in NONE_WORDS:
            out.append(0)
        elif _INT.fullmatch(value):
            n = int(value)
            out.append(0 if n < 0 or n >= NO_VAL else n)
        else:
            return None
    return out
