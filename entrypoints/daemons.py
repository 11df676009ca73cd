"""Long-running helpers supervisord runs beside the Slurm daemons.

node-reaper (controller): delete dynamic nodes whose pod is gone (not responding longer than the
timeout) so `sinfo` never fills with ghosts after scale-in or preemption.
reconcile-node (worker): once this pod's slurmd has registered,
  - if slurmctld kept the definition of an earlier pod of the same name (a pod killed without its
    preStop hook, then recreated with other limits or features: slurmctld keeps a re-registering
    dynamic node's old record), delete the record and restart slurmd so it registers afresh;
  - clear the `slurmpod: pod terminating` drain its predecessor set; every other reason (an admin's,
    a health check's) is left alone.
"""

from __future__ import annotations

import argparse
import logging
import os
import time

from slurmpod import slurm
from slurmpod import well_known as wk
from slurmpod.entrypoints import supervisor
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


def parse_conf(conf: str) -> dict[str, str]:
    """`Key=Value Key=Value` (the --conf string slurmpod rendered) -> mapping."""
    return dict(item.partition("=")[::2] for item in conf.split() if "=" in item)


def stale_fields(state: slurm.NodeState, expected: dict[str, str]) -> list[str]:
    """Where the registered node differs from the definition this pod asked for."""
    have = {
        "CPUs": state.cpus,
        "RealMemory": state.real_memory,
        "CoreSpecCount": state.specialized_cores,
        "MemSpecLimit": state.specialized_memory,
    }
    out = [f"{key}={value} (want {expected.get(key, '0')})" for key, value in have.items()
           if str(value) != expected.get(key, "0")]
    want_features = sorted(f for f in expected.get("Features", "").split(",") if f)
    if sorted(state.features) != want_features:
        out.append(f"Features={','.join(state.features)} (want {','.join(want_features)})")
    return out


def _registered(node: str, deadline: float) -> slurm.NodeState | None:
    while time.monotonic() < deadline:
        try:
            state = slurm.node(node)
        except SlurmpodError:
            state = None
        if state is not None and not state.states & {"NOT_RESPONDING", "UNKNOWN"}:
            return state
        time.sleep(0.5)
    return None


def reconcile_node(node: str, expected_conf: str, wait_s: float) -> int:
    """Make the registered node match this pod, then clear a stale slurmpod lifecycle drain."""
    deadline = time.monotonic() + wait_s
    state = _registered(node, deadline)
    if state is None:
        log.warning("node did not register in time", extra={"ctx": {"node": node}})
        return 1
    stale = stale_fields(state, parse_conf(expected_conf)) if expected_conf else []
    drained = bool(state.states & {"DRAIN", "DRAINED", "DRAINING"})
    # An admin's or a health check's drain must outlive the re-registration below.
    kept_reason = state.reason if drained and state.reason not in STALE_LIFECYCLE_REASONS else ""
    if stale and not slurm.jobs_on_node(node):
        log.info("re-registering: slurmctld kept an old definition",
                 extra={"ctx": {"node": node, "stale": "; ".join(stale)}})
        supervisor.control("stop", "slurmd", timeout=30)
        try:
            slurm.delete_node(node)
        finally:
            supervisor.control("start", "slurmd", timeout=30)
        state = _registered(node, deadline)
        if state is None:
            return 1
        if kept_reason:
            slurm.drain(node, kept_reason)
            return 0
    if state.reason in STALE_LIFECYCLE_REASONS and state.states & {"DRAIN", "DRAINED", "DRAINING"}:
        slurm.resume(node)
        log.info("cleared stale drain", extra={"ctx": {"node": node, "reason": state.reason}})
    return 0


def main(args: argparse.Namespace) -> int:
    if args.task == "node-reaper":
        return node_reaper(args.timeout, args.interval)
    return reconcile_node(os.environ.get(wk.ENV_POD_NAME, ""), args.expect or "", args.timeout)
