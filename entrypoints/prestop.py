"""`slurmpod prestop`: leave Slurm without losing a job, inside terminationGracePeriodSeconds.

1. drain the node with reason `slurmpod: pod terminating` (no new work lands here), unless someone
   else (an admin, a health check) already drained it: their reason stays;
2. requeue its running batch jobs so they run again elsewhere;
3. wait (bounded) for the jobs to leave the node; once they have, make them eligible at once (slurmctld
   gives a requeued job a begin time two minutes ahead, time the job would spend idle); then stop slurmd
   so kubelet's SIGTERM finds it gone;
4. delete the dynamic node once it is empty and drained by us, so the pod that replaces it registers
   its own definition: slurmctld keeps an existing dynamic node's record (CPUs, CoreSpecCount,
   MemSpecLimit, Features) when a slurmd of the same name registers again. A node drained by someone
   else is kept, with its reason, for the next pod.
Ref: https://kubernetes.io/docs/concepts/containers/container-lifecycle-hooks/
Ref: https://slurm.schedmd.com/scontrol.html#OPT_requeue
"""

from __future__ import annotations

import argparse
import logging
import os
import time

from slurmpod import slurm
from slurmpod import well_known as wk
from slurmpod.entrypoints import supervisor
from slurmpod.errors import BadInput, SlurmpodError, TransientError

log = logging.getLogger(__name__)

POLL_SECONDS = 0.2
# Keep this much of the grace period for supervisord to stop the daemons after we return.
RESERVE_SECONDS = 3.0


def run(node: str, grace: float, stop_slurmd: bool = True) -> int:
    deadline = time.monotonic() + max(1.0, grace - RESERVE_SECONDS)

    def left() -> float:
        return max(0.5, deadline - time.monotonic())

    before = slurm.node(node, timeout=min(10.0, left()))
    foreign = before is not None and foreign_drain(before)
    if not foreign:
        slurm.drain(node, wk.REASON_POD_TERMINATING, timeout=min(10.0, left()))
    jobs = slurm.jobs_on_node(node, timeout=min(10.0, left()))
    batch = [j.job_id for j in jobs if j.batch]
    if batch:
        slurm.requeue(batch, timeout=min(10.0, left()))
        log.info("requeued", extra={"ctx": {"node": node, "jobs": ",".join(map(str, batch))}})
    empty = False
    while time.monotonic() < deadline:
        try:
            if not slurm.jobs_on_node(node, timeout=min(5.0, left())):
                empty = True
                break
        except TransientError:
            pass
        time.sleep(POLL_SECONDS)
    if empty and batch:
        try:
            slurm.start_now(batch, timeout=min(10.0, left()))
        except SlurmpodError as exc:  # e.g. a job the user cancelled meanwhile: it waits out the delay
            log.warning("requeued jobs keep their begin time", extra={"ctx": {"node": node, "err": str(exc)}})
    if stop_slurmd:
        supervisor.control("stop", "slurmd", timeout=min(10.0, left()))
        if empty and not foreign:
            # Ref: https://slurm.schedmd.com/dynamic_nodes.html (scontrol delete nodename)
            try:
                slurm.delete_node(node, timeout=min(10.0, left()))
            except SlurmpodError as exc:  # e.g. a job still completing: the next pod clears our drain
                log.warning("node not deleted", extra={"ctx": {"node": node, "err": str(exc)}})
    return 0


def foreign_drain(state: slurm.NodeState) -> bool:
    """Drained or down for a reason other than pod lifecycle (an admin's, a health check's)."""
    held = bool(state.states & {"DRAIN", "DRAINED", "DRAINING", "DOWN", "FAIL"})
    return held and bool(state.reason) and state.reason not in wk.LIFECYCLE_REASONS


def main(args: argparse.Namespace) -> int:
    node = os.environ.get(wk.ENV_POD_NAME, "")
    if not node:
        raise BadInput.one(wk.ENV_POD_NAME, "", "required (fieldRef metadata.name)")
    grace = args.grace
    if grace is None:
        raw = os.environ.get(wk.ENV_GRACE_SECONDS, "30")
        try:
            grace = float(raw)
        except ValueError:
            raise BadInput.one(wk.ENV_GRACE_SECONDS, raw, "not a number") from None
    return run(node, grace)
