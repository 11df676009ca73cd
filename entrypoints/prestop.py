"""`slurmpod prestop`: leave Slurm without losing a job, inside terminationGracePeriodSeconds.

1. drain the node with reason `slurmpod: pod terminating` (no new work lands here);
2. requeue its running batch jobs so they run again elsewhere;
3. wait (bounded) for the jobs to leave the node, then stop slurmd so kubelet's SIGTERM finds it gone.
Ref: https://kubernetes.io/docs/concepts/containers/container-lifecycle-hooks/
Ref: https://slurm.schedmd.com/scontrol.html#OPT_requeue
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import time

from slurmpod import slurm
from slurmpod import well_known as wk
from slurmpod.errors import BadInput, TransientError

log = logging.getLogger(__name__)

POLL_SECONDS = 0.2
# Keep this much of the grace period for supervisord to stop the daemons after we return.
RESERVE_SECONDS = 3.0


def run(node: str, grace: float, stop_slurmd: bool = True) -> int:
    deadline = time.monotonic() + max(1.0, grace - RESERVE_SECONDS)

    def left() -> float:
        return max(0.5, deadline - time.monotonic())

    slurm.drain(node, wk.REASON_POD_TERMINATING, timeout=min(10.0, left()))
    jobs = slurm.jobs_on_node(node, timeout=min(10.0, left()))
    batch = [j.job_id for j in jobs if j.batch]
    if batch:
        slurm.requeue(batch, timeout=min(10.0, left()))
        log.info("requeued", extra={"ctx": {"node": node, "jobs": ",".join(map(str, batch))}})
    while time.monotonic() < deadline:
        try:
            if not slurm.jobs_on_node(node, timeout=min(5.0, left())):
                break
        except TransientError:
            pass
        time.sleep(POLL_SECONDS)
    if stop_slurmd:
        conf = os.path.join(os.environ.get(wk.ENV_RUN_DIR, wk.RUN_DIR), wk.SUPERVISORD_CONF)
        subprocess.run(
            ["supervisorctl", "-c", conf, "stop", "slurmd"],
            capture_output=True,
            timeout=min(10.0, left()),
            check=False,
        )
    return 0


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
