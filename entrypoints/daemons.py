"""Long-running helpers supervisord runs beside the Slurm daemons.

node-reaper (controller): delete dynamic nodes whose pod is gone, so `sinfo` never fills with ghosts
after scale-in or preemption. Only a node that has not responded for the whole timeout and carries no
reason anyone chose to keep (an admin's, a health check's) is deleted: ``reasons.reaper_may_delete``.
claim-placeholder (worker, just before slurmd starts): delete the autoscaler's FUTURE placeholder of this
pod's name, so slurmd registers as this pod describes it. Until then the placeholder keeps the partition
at its size, so no submission is refused while the pod is scheduled and starts. It retries while slurmctld
does not answer, within a deadline; then slurmd starts anyway, and reconcile-node replaces a placeholder
that refused it.
reconcile-node (worker): once this pod's slurmd has registered,
  - if slurmctld kept the definition of an earlier pod of the same name (a pod killed without its
    preStop hook, then recreated with other limits or features: slurmctld keeps a re-registering
    dynamic node's old record), delete the record and restart slurmd so it registers afresh; a reason
    someone else set is re-applied byte for byte;
  - lift the `slurmpod: pod terminating` drain its predecessor set; every other reason stays;
  - otherwise have slurmctld schedule at once (SlurmClient.ask_to_schedule): a dynamic node's
    registration does not, and the jobs waiting for this node would wait for the next backfill pass.
It waits for the controller as long as it takes (a controller down for minutes is normal during an
upgrade), and supervisord restarts it if it fails.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Mapping
from typing import TypeVar

from slurmpod import confvalues, podinfo, reasons
from slurmpod import well_known as wk
from slurmpod.entrypoints.supervisor import Supervisor, SupervisorCtl
from slurmpod.errors import BadInput, SlurmpodError, TransientError
from slurmpod.nodestate import NodeState
from slurmpod.slurm import CliSlurmClient, SlurmClient, SlurmRefused
from slurmpod.timing import Clock, Deadline, SystemClock

log = logging.getLogger(__name__)
T = TypeVar("T")

# Waits between attempts while the controller does not answer: short at first, then at most this.
BACKOFF_START = 0.5
BACKOFF_MAX = 10.0
STEP_TIMEOUT = 10.0
SUPERVISOR_TIMEOUT = 30.0


# --- node-reaper ---


def reap_once(client: SlurmClient, seen_down: dict[str, float], timeout_s: float, now: float) -> list[str]:
    """One reaper pass; returns the nodes deleted. ``seen_down`` maps node -> first time seen gone."""
    deleted = []
    current = {n.name: n for n in client.nodes(timeout=STEP_TIMEOUT)}
    for name in list(seen_down):
        if name not in current or not reasons.reaper_may_delete(current[name]):
            del seen_down[name]
    for name, n in current.items():
        if not reasons.reaper_may_delete(n):
            continue
        first = seen_down.setdefault(name, now)
        if now - first < timeout_s:
            continue
        try:
            client.delete_node(name, timeout=STEP_TIMEOUT)
        except (SlurmRefused, TransientError) as exc:  # e.g. jobs still assigned; try again next pass
            log.warning("cannot delete node yet", extra={"ctx": {"node": name, "err": str(exc)}})
            continue
        log.info("deleted node whose pod is gone", extra={"ctx": {"node": name}})
        deleted.append(name)
        seen_down.pop(name, None)
    return deleted


def node_reaper(client: SlurmClient, timeout_s: float, interval_s: float, clock: Clock,
                passes: int | None = None) -> int:
    seen: dict[str, float] = {}
    done = 0
    while passes is None or done < passes:
        try:
            reap_once(client, seen, timeout_s, clock.monotonic())
        except TransientError as exc:
            log.info("reaper pass skipped", extra={"ctx": {"err": str(exc)}})
        done += 1
        clock.sleep(interval_s)
    return 0


# --- reconcile-node ---


def parse_conf(conf: str) -> dict[str, str]:
    """`Key=Value Key=Value` (the --conf string slurmpod rendered) -> mapping."""
    return dict(confvalues.parse_kv_line("--conf", conf))


def stale_fields(state: NodeState, expected: dict[str, str]) -> list[str]:
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


# claim-placeholder is on the path to slurmd's start. It retries while slurmctld does not answer, for at
# most CLAIM_DEADLINE (slurmd cannot register before slurmctld answers either), each call within
# CLAIM_STEP_TIMEOUT; then slurmd starts whatever happened.
CLAIM_DEADLINE = 20.0
CLAIM_STEP_TIMEOUT = 5.0
CLAIM_BACKOFF_MAX = 2.0


def claim_placeholder(client: SlurmClient, node: str, clock: Clock) -> bool:
    """Delete ``node``'s record if it is a placeholder (FUTURE: no slurmd has registered it); True when it is
    gone by this call. Any other record is reconcile-node's to judge. Never raises: slurmd starts either way.

    A delete whose answer was lost may have landed: the next try then finds no record, and that counts
    as claimed."""
    deadline = Deadline(clock, CLAIM_DEADLINE, floor=0.0)
    wait, deleting, last = BACKOFF_START, False, ""
    while not deadline.expired:
        try:
            state = client.node(node, future=True, timeout=deadline.budget(CLAIM_STEP_TIMEOUT))
            if state is None and deleting:
                break
            if state is None or not state.placeholder:
                log.info("no placeholder to claim", extra={"ctx": {
                    "node": node, "record": "none" if state is None else state.base}})
                return False
            deleting = True
            client.delete_node(node, timeout=deadline.budget(CLAIM_STEP_TIMEOUT))
            break
        except TransientError as exc:
            last = str(exc)[:200]
        except SlurmpodError as exc:
            log.warning("placeholder not claimed; slurmd starts, reconcile-node takes it over if it refuses slurmd",
                        extra={"ctx": {"node": node, "err": str(exc)[:200]}})
            return False
        deadline.sleep(wait)
        wait = min(CLAIM_BACKOFF_MAX, wait * 2)
    else:  # the deadline passed with no answer
        log.warning("placeholder not claimed: slurmctld did not answer; slurmd starts, reconcile-node takes it "
                    "over if it refuses slurmd",
                    extra={"ctx": {"node": node, "deadline_s": CLAIM_DEADLINE, "err": last}})
        return False
    log.info("claimed the placeholder", extra={"ctx": {"node": node}})
    return True


def refused_by_placeholder(state: NodeState) -> bool:
    """slurmctld refused this slurmd's registration against a FUTURE placeholder of the same name whose
    definition differs (it keeps the record FUTURE, with INVALID_REG and a "... differ" reason, and slurmd
    stays unregistered): claim-placeholder could not delete it before slurmd started, or it was made after.
    Ref: https://slurm.schedmd.com/dynamic_nodes.html"""
    return state.placeholder and "INVALID_REG" in state.flags


class Reconciler:
    """reconcile-node's steps, each retried while the controller does not answer."""

    def __init__(self, client: SlurmClient, supervisor: Supervisor, node: str, clock: Clock) -> None:
        self.client, self.supervisor, self.node, self.clock = client, supervisor, node, clock

    def _patiently(self, what: str, step: Callable[[], T]) -> T:
        """``step()`` until it does not raise TransientError: the controller may be down for long."""
        wait = BACKOFF_START
        while True:
            try:
                return step()
            except TransientError as exc:
                log.info("waiting for the controller", extra={"ctx": {"node": self.node, "step": what,
                                                                       "err": str(exc)[:200]}})
                self.clock.sleep(wait)
                wait = min(BACKOFF_MAX, wait * 2)

    def registered(self) -> NodeState:
        """The node's record once slurmd has registered and answers, or a placeholder that refused its
        registration (``refused_by_placeholder``); waits as long as it takes."""
        wait = BACKOFF_START
        while True:
            state = self._patiently("read node",
                                    lambda: self.client.node(self.node, future=True, timeout=STEP_TIMEOUT))
            if state is not None and (state.registered or refused_by_placeholder(state)):
                return state
            self.clock.sleep(wait)
            wait = min(BACKOFF_MAX / 2, wait * 2)

    def run(self, expected_conf: str) -> int:
        state = self.registered()
        if refused_by_placeholder(state):
            # Nothing of the placeholder is worth keeping: its reason is slurmctld's "... differ".
            state = self._reregister([f"placeholder {state.base} refused the registration: {state.reason}"])
        stale = stale_fields(state, parse_conf(expected_conf)) if expected_conf else []
        hold = reasons.hold(state)
        if stale:
            jobs = self._patiently("list jobs", lambda: self.client.jobs_on_node(self.node, timeout=STEP_TIMEOUT))
            if jobs:
                log.warning("slurmctld kept an old definition, but jobs run here; not re-registering",
                            extra={"ctx": {"node": self.node, "stale": "; ".join(stale)}})
            else:
                state = self._reregister(stale)
                if hold.foreign:
                    # Someone else's hold outlives the re-registration, byte for byte.
                    self._patiently("re-apply reason",
                                    lambda: self.client.drain(self.node, hold.reason, timeout=STEP_TIMEOUT))
                    log.info("re-applied reason", extra={"ctx": {"node": self.node, "reason": hold.reason}})
                    return 0
        if reasons.lifecycle_may_lift(state):
            if not state.drained:
                # The flag is gone but the reason text stayed; RESUME only clears a drained node's reason.
                self._patiently("drain", lambda: self.client.drain(self.node, reasons.POD_TERMINATING,
                                                                   timeout=STEP_TIMEOUT))
            self._patiently("resume", lambda: self.client.resume(self.node, timeout=STEP_TIMEOUT))
            log.info("cleared stale drain", extra={"ctx": {"node": self.node, "reason": state.reason}})
            return 0  # the RESUME has slurmctld schedule
        self._ask_to_schedule(state)
        return 0

    def _ask_to_schedule(self, state: NodeState) -> None:
        """The jobs waiting for this node start now, not at the next backfill pass (SlurmClient.ask_to_schedule).
        One try: a failure only leaves them to that pass."""
        try:
            self.client.ask_to_schedule(state, timeout=STEP_TIMEOUT)
        except SlurmpodError as exc:  # BadInput too: a feature name scontrol would not take
            log.warning("could not ask slurmctld to schedule; jobs wait for its next pass", extra={"ctx": {
                "node": self.node, "err": str(exc)[:200]}})
            return
        log.info("asked slurmctld to schedule", extra={"ctx": {"node": self.node}})

    def _reregister(self, stale: list[str]) -> NodeState:
        log.info("re-registering: slurmctld kept an old definition",
                 extra={"ctx": {"node": self.node, "stale": "; ".join(stale)}})
        self.supervisor.control("stop", "slurmd", timeout=SUPERVISOR_TIMEOUT)
        try:
            self._patiently("delete node", lambda: self.client.delete_node(self.node, timeout=STEP_TIMEOUT))
        finally:
            self.supervisor.control("start", "slurmd", timeout=SUPERVISOR_TIMEOUT)
        return self.registered()


def reaper_main(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    del env
    if args.node_timeout < 0 or args.interval <= 0:
        raise BadInput.one("--node-timeout/--interval", f"{args.node_timeout}/{args.interval}",
                           "timeout must be >= 0 and interval > 0")
    return node_reaper(CliSlurmClient(), args.node_timeout, args.interval, SystemClock())


def reconcile_main(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """supervisord starts it with the pod's name in its environment (supervisord.conf, rendered at start)."""
    pod = podinfo.identity(env)
    if not pod.name:
        raise BadInput.one(wk.ENV_POD_NAME, "", "required (fieldRef metadata.name)")
    return Reconciler(CliSlurmClient(), SupervisorCtl(pod.run_dir), pod.name, SystemClock()).run(args.expect or "")


def claim_main(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """Run from slurmd's script with SLURM_CONF_SERVER set: scontrol fetches slurm.conf from slurmctld, as
    slurmd has not yet. Ref: https://slurm.schedmd.com/configless_slurm.html"""
    del args
    pod = podinfo.identity(env)
    if not pod.name:
        raise BadInput.one(wk.ENV_POD_NAME, "", "required (fieldRef metadata.name)")
    claim_placeholder(CliSlurmClient(), pod.name, SystemClock())
    return 0
