"""What a run does about its findings in Slurm: drain, lift, re-assert — only by the ``reasons`` rules.

- A failure drains with ``reasons.health(check, detail, remediation)``.
- A node someone else drained (an admin, another tool) is never touched: not re-drained with our
  reason, never resumed.
- The periodic run lifts a drain only when a health check set it, and only after
  ``clean_runs_to_undrain`` clean periodic runs in a row (counted in the state dir) that include the
  check that drained it: a prolog-only check (gpu-memory, say) is re-run by the periodic run while its
  drain stands. Without that, clean runs of the other checks would return the node, the next job's
  prolog would fail on it again, and that job would be requeued over and over.
- The periodic run re-asserts a drain it owns: when our failure persists but the node has lost its
  DRAIN flag (slurmctld has been seen to drop it when a pod of the same name re-registers).
- Prolog and epilog make no Slurm RPC when healthy. On a failure they drain first, with our reason,
  then exit non-zero: Slurm then requeues the job (prolog) and would drain the node anyway, but with
  a generic reason ("Prolog error"); ours says what broke, and it stays: slurmctld's drain_nodes()
  leaves a node that is already DRAIN alone (src/slurmctld/node_mgr.c, "state already changed").
  When our drain RPC fails, the node ends up drained as "Prolog error", which is not ours to lift.
  Ref: https://slurm.schedmd.com/prolog_epilog.html#failure_handling
- The periodic run that drains for a failure whose remediation is a pod restart or a node
  replacement (the node cannot serve the jobs on it: a fatal XID, a GPU off the bus) also requeues the
  batch jobs running there, so they start again elsewhere instead of running on into the fault. A
  failure that only drains (a missing mount, a hot GPU) lets them finish. Jobs that may not be
  requeued (`--no-requeue`) are left to run, and said so in the log.
  Ref: https://slurm.schedmd.com/scontrol.html#OPT_requeue
- Startup runs before slurmd registers: there is no node to drain yet; it only reports (exit code).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from slurmpod.errors import SlurmpodError
from slurmpod.prolog_epilog.result import CheckResult, Context, Remediation
from slurmpod.prolog_epilog.runner import first_failure
from slurmpod.prolog_epilog.state import StateDir

if TYPE_CHECKING:
    from slurmpod.slurm import SlurmClient

log = logging.getLogger(__name__)
STATE_KEY = "actions"
RPC_TIMEOUT = 5.0  # seconds per scontrol call from a hook


class Action(enum.Enum):
    NONE = "none"  # nothing to do (and no RPC on the healthy prolog/epilog path)
    DRAINED = "drained"
    REASSERTED = "reasserted"  # drained again: our failure persists, the DRAIN flag was lost
    KEPT = "kept"  # already drained (by us, or by someone whose drain we leave alone)
    COUNTING = "counting"  # clean, our drain stays until enough clean runs
    RESUMED = "resumed"
    FAILED = "failed"  # Slurm did not answer; the exit code still reports the failure


def owned_drain_check(state: StateDir) -> str | None:
    """The check named by the drain this node's runs set (from the state dir: no RPC), if any."""
    from slurmpod import reasons  # noqa: PLC0415 - see act()
    reason = state.read(STATE_KEY).get("drained_reason")
    return reasons.health_check_of(reason) if isinstance(reason, str) else None


REQUEUE_REMEDIATIONS = frozenset({Remediation.RESTART_POD, Remediation.REPLACE_NODE})


def _requeue_running(slurm: SlurmClient, node: str) -> list[int]:
    """Requeue the batch jobs on ``node`` (each its own RPC, each with the hook's deadline)."""
    done: list[int] = []
    for job in slurm.jobs_on_node(node, timeout=RPC_TIMEOUT):
        if job.completing:
            continue  # ended already: a requeue would run it again (slurm.Job.completing)
        if not job.batch or not job.requeue:
            log.warning("job left running on the faulty node: node=%s job=%d (%s)", node, job.job_id,
                        "not a batch job" if not job.batch else "may not be requeued")
            continue
        try:
            slurm.requeue(job.job_id, timeout=RPC_TIMEOUT)
            done.append(job.job_id)
        except SlurmpodError as exc:  # it ended meanwhile, or slurmctld refused: the others still go
            log.warning("job not requeued: node=%s job=%d error=%s", node, job.job_id, exc)
    if done:
        log.warning("requeued off the faulty node: node=%s jobs=%s", node, ",".join(map(str, done)))
    return done


def act(context: Context, results: Sequence[CheckResult], *, node: str, slurm: SlurmClient | None,
        state: StateDir, clean_runs_to_undrain: int, enabled: frozenset[str] = frozenset()) -> Action:
    """``enabled``: the checks the config runs in some context; a drain by one of them is lifted only
    by periodic runs that ran it."""
    failure = first_failure(results)
    memory = state.read(STATE_KEY)
    clean = int(memory.get("clean_runs", 0))
    if context is Context.PERIODIC:
        memory["clean_runs"] = 0 if failure else clean + 1
    elif failure:
        memory["clean_runs"] = 0
    state.write(STATE_KEY, memory)
    if context is Context.STARTUP or slurm is None or not node:
        return Action.NONE
    if failure is None and context is not Context.PERIODIC:
        return Action.NONE  # the healthy prolog path makes no RPC: it must cost a job nothing
    from slurmpod import reasons  # noqa: PLC0415 - with nodestate, tens of ms the healthy prolog skips
    try:
        current = slurm.node(node, timeout=RPC_TIMEOUT)
        if current is None:
            log.warning("node has no Slurm record; nothing to drain: node=%s", node)
            return Action.NONE
        owner = reasons.owner(current.reason)
        if failure is not None:
            # The autoscaler's scale-in drain is replaced: its lift must never return a faulty node to service.
            if (current.drained and owner is not reasons.Owner.AUTOSCALE) or (
                    current.held and owner is reasons.Owner.OTHER):
                return Action.KEPT  # ours already, or someone else's: never overwritten
            reason = reasons.health(failure.check, failure.reason, failure.remediation.value)
            slurm.drain(node, reason, timeout=RPC_TIMEOUT)
            reasserted = memory.get("drained_reason") is not None and context is Context.PERIODIC
            memory["drained_reason"] = reason
            state.write(STATE_KEY, memory)
            log.warning("drained: node=%s reason=%r", node, reason)
            if context is Context.PERIODIC and failure.remediation in REQUEUE_REMEDIATIONS:
                _requeue_running(slurm, node)
            return Action.REASSERTED if reasserted else Action.DRAINED
        # periodic and clean
        if not reasons.health_may_lift(current):
            if memory.pop("drained_reason", None) is not None and not current.drained:
                state.write(STATE_KEY, memory)  # our drain was lifted by someone else: forget it
            return Action.NONE
        drained_by = reasons.health_check_of(current.reason)
        if drained_by in enabled and drained_by not in {r.check for r in results}:
            # Not a periodic check, and not re-run yet (a drain set before this pod's state): the next
            # run re-runs it, and the count starts there.
            memory["drained_reason"], memory["clean_runs"] = current.reason, 0
            state.write(STATE_KEY, memory)
            return Action.COUNTING
        if memory["clean_runs"] < clean_runs_to_undrain:
            return Action.COUNTING
        slurm.resume(node, timeout=RPC_TIMEOUT)
        memory.pop("drained_reason", None)
        state.write(STATE_KEY, memory)
        log.warning("resumed after %d clean runs: node=%s", memory["clean_runs"], node)
        return Action.RESUMED
    except SlurmpodError as exc:
        log.error("Slurm did not take the action: node=%s error=%s", node, exc)
        return Action.FAILED
