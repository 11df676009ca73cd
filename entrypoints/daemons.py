"""Long-running helpers supervisord runs beside the Slurm daemons.

node-reaper (controller): delete dynamic nodes whose pod is gone (not responding longer than the
timeout) so `sinfo` never fills with ghosts after scale-in or preemption.
clear-stale-drain (worker): a new pod of the same name clears the `slurmpod: pod terminating` drain its
predecessor set; every other reason (an admin's, a health check's) is left alone.
"""

from __future__ import annotations

import argparse
import logging
import os
import time

from slurmpod import slurm
from slurmpod import well_known as wk
from slurmpod.errors import SlurmpodError

log = logging.getLogger(__name__)

# Reasons slurmpod sets for pod lifecycle, and so may clear on a fresh start.
STALE_LIFECYCLE_REASONS = wk.LIFECYCLE_REASONS


def reap_once(seen_down: dict[str, float], timeout_s: float, now: float) -> list[str]:
    """One reaper pass; returns the nodes deleted. ``seen_down`` maps node -> first time seen down."""
    deleted = []
    current = {n.name: n for n in slurm.nodes()}
    for name in list(seen_down):
        if name not in current:
            del seen_down[name]
    for name, n in current.items():
        gone = n.dynamic and bool(n.states & {"NOT_RESPONDING", "DOWN"})
        if not gone:
            seen_down.pop(name, None)
            continue
        first = seen_down.setdefault(name, now)
        if now - first >= timeout_s:
            try:
                slurm.delete_node(name)
            except SlurmpodError as exc:  # e.g. jobs still assigned; try again next pass
                log.warning("cannot delete node yet", extra={"ctx": {"node": name, "err": str(exc)}})
                continue
            log.info("deleted node whose pod is gone", extra={"ctx": {"node": name}})
            deleted.append(name)
            seen_down.pop(name, None)
    return deleted


def node_reaper(timeout_s: float, interval_s: float) -> int:
    seen: dict[str, float] = {}
    while True:
        try:
            reap_once(seen, timeout_s, time.monotonic())
        except SlurmpodError as exc:
            log.info("reaper pass skipped", extra={"ctx": {"err": str(exc)}})
        time.sleep(interval_s)


def clear_stale_drain(node: str, wait_s: float) -> int:
    """Wait for this node to register, then resume it if only a stale slurmpod lifecycle drain holds it."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            state = slurm.node(node)
        except SlurmpodError:
            state = None
        if state is not None and not state.states & {"NOT_RESPONDING", "UNKNOWN"}:
            if state.reason in STALE_LIFECYCLE_REASONS and state.states & {"DRAIN", "DRAINED", "DRAINING"}:
                slurm.resume(node)
                log.info("cleared stale drain", extra={"ctx": {"node": node, "reason": state.reason}})
            return 0
        time.sleep(0.5)
    log.warning("node did not register in time", extra={"ctx": {"node": node}})
    return 1


def main(args: argparse.Namespace) -> int:
    if args.task == "node-reaper":
        return node_reaper(args.timeout, args.interval)
    return clear_stale_drain(os.environ.get(wk.ENV_POD_NAME, ""), args.timeout)
