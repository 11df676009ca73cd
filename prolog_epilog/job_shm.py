"""What a job's user leaves in /dev/shm goes when the user's last job on the worker has ended.

/dev/shm is one tmpfs for every job on the worker, and its pages stay in the pod's memory until their
files are removed: a POSIX shared-memory object (shm_open), NCCL's and PyTorch's segments, a file a
job copied there, all outlive the job that made them. The Epilog (root, once per node when the job
ends, after all its processes) removes the top-level entries the job's user owns, but only when

- no process of that user is left in the pod (a process that escaped the job, an ssh session), and
- slurmctld names no other job of that user on this node: a job between two steps runs no process on
  the nodes past its first, and may have left segments there for its next step. Nothing tells which
  job made which file. When slurmctld does not answer in time, nothing is removed.

Many jobs leave nothing (OpenMPI unlinks its shared-memory segment once every rank has it), so the
Epilog first lists the directory: with none of the user's entries there, it asks no one. While this
Epilog runs the node is COMPLETING, and slurmctld starts no job on it (src/slurmctld/node_scheduler.c,
cg_node_bitmap), so no new job of the user can make entries between the checks and the removal.

The directory is world-writable (sticky), so nothing in it is trusted: an entry is removed by name
(unlink(2) never follows a link), a directory goes into the directory's root-owned trash in one rename
and is emptied later by the sweeper (prolog_epilog/scratch.py). The work per Epilog is bounded
(MAX_ENTRIES looked at, whoever's, and BUDGET_S): what lies past them waits for a later Epilog.
Ref: https://man7.org/linux/man-pages/man7/shm_overview.7.html
Ref: https://man7.org/linux/man-pages/man5/proc_pid_status.5.html (Uid: real, effective, saved, filesystem)
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass

from slurmpod.prolog_epilog import scratch

MAX_ENTRIES = 10_000  # looked at per Epilog, anyone's: a few µs each on tmpfs, far inside PrologEpilogTimeout
BUDGET_S = 2.0
MORE = "more entries than one epilog looks at; a later one goes on"
PROCESSES = "the user still has processes on this worker"
OTHER_JOB = "the user has another job on this worker"
UNKNOWN = "slurmctld did not say whether the user has another job on this worker"


@dataclass(frozen=True, slots=True)
class Released:
    """What one Epilog did in the shared-memory directory for one user."""

    uid: int
    removed: int  # entries unlinked, or directories moved into the trash
    kept: str | None  # why nothing (or not everything) was removed; None: all of the user's entries went


def _uids(status: str) -> set[int]:
    for line in status.splitlines():
        if line.startswith("Uid:"):
            return {int(f) for f in line.split()[1:]}
    return set()


def user_has_processes(uid: int, proc: str = "/proc") -> bool:
    """Whether any process in this PID namespace runs with ``uid`` as its real, effective, saved or
    filesystem uid. A process that ends while it is read counts as gone."""
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        try:
            with open(f"{proc}/{name}/status", encoding="ascii", errors="replace") as f:
                if uid in _uids(f.read()):
                    return True
        except (FileNotFoundError, ProcessLookupError):
            continue
    return False


def _owned(shm_dir: str, uid: int, limit: int, end: float, clock: Callable[[], float]) -> tuple[list[str], bool]:
    """(names of ``uid``'s top-level entries among the first ``limit`` listed; whether the listing stopped
    short). Whoever's the entries are, no more are looked at: one user's million files cost the other
    users' Epilogs no more than ``limit`` entries do."""
    names: list[str] = []
    scanned = 0
    with os.scandir(shm_dir) as entries:
        for entry in entries:
            if scanned >= limit or clock() > end:
                return names, True
            scanned += 1
            try:
                if entry.stat(follow_symlinks=False).st_uid == uid:
                    names.append(entry.name)
            except OSError:
                continue  # gone meanwhile
    return names, False


def release(shm_dir: str, uid: int, other_jobs: Callable[[], bool | None], *, proc: str = "/proc",
            max_entries: int = MAX_ENTRIES, budget_s: float = BUDGET_S,
            clock: Callable[[], float] = time.monotonic) -> Released:
    """Remove ``uid``'s top-level entries in ``shm_dir`` when none of its processes is left and
    ``other_jobs()`` says False (True: another job of the user is on this node; None: unknown). Never
    for root. Raises OSError when the directory cannot be read."""
    if uid == 0:
        return Released(uid, 0, "root")
    end = clock() + budget_s
    names, short = _owned(shm_dir, uid, max_entries, end, clock)
    if not names:
        return Released(uid, 0, MORE if short else None)
    if user_has_processes(uid, proc):
        return Released(uid, 0, PROCESSES)
    others = other_jobs()
    if others is not False:
        return Released(uid, 0, OTHER_JOB if others else UNKNOWN)
    removed = 0
    for name in names:
        if clock() > end:
            return Released(uid, removed, MORE)
        path = f"{shm_dir}/{name}"
        try:
            st = os.lstat(path)
            if st.st_uid != uid:
                continue  # replaced meanwhile by someone else's
            if stat.S_ISDIR(st.st_mode):
                scratch.discard(shm_dir, name)  # renamed into root's trash, swept later
            else:
                os.unlink(path)  # the name only: a link is removed, never what it names
        except OSError:
            continue  # gone or swapped meanwhile: left for the next Epilog
        removed += 1
    return Released(uid, removed, MORE if short else None)
