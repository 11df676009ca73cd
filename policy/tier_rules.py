"""Preemption tiers: who may use a tier, GPU jobs kept out of CPU-only partitions, time caps,
requeue and a grace signal for preemptible work so training can checkpoint.

Preemption itself is Slurm's (partition PriorityTier + PreemptMode=REQUEUE, or QoS Preempt=):
Ref: https://slurm.schedmd.com/preempt.html
"""

from __future__ import annotations

import signal

from slurmpod.policy.decision import Changes
from slurmpod.policy.model import GraceSignal, OverTime, Policy, SignalTarget, Tier
from slurmpod.policy.outcome import NOTHING, Outcome, Rule, change, refuse
from slurmpod.policy.request import TIME_INFINITE, JobRequest

# sbatch --signal=B:... sets this bit in job_desc.warn_flags. Ref: slurm/slurm.h (KILL_JOB_BATCH)
KILL_JOB_BATCH = 0x1


def tiers_of(policy: Policy, req: JobRequest) -> tuple[Tier, ...]:
    """The tiers a job falls in, lowest first: by partition or QoS, else the default tier."""
    parts = set(req.partitions)
    found = tuple(t for t in policy.tiers if parts & t.partitions or (req.qos is not None and req.qos in t.qos))
    if found:
        return found
    default = policy.tier_named(policy.default_tier)
    return (default,) if default is not None else ()


def check(policy: Policy, req: JobRequest) -> Outcome:
    gpu_in_cpu = sorted(set(req.partitions) & policy.cpu_only_partitions) if req.gpus else []
    if gpu_in_cpu:
        return refuse(Rule.CPU_ONLY, f"partition {gpu_in_cpu[0]} has no GPUs; submit GPU jobs to a GPU partition")
    tiers = tiers_of(policy, req)
    # A modification that keeps the job's partition, QoS and account was let into its tiers at submit:
    # an operator's hold or time change on it is not judged on the operator's own access.
    check_access = not req.is_modify or req.moves_tier
    for tier in tiers:
        if check_access and not tier.access.allows(req):
            return refuse(Rule.TIER_ACCESS, f"user {req.user or req.uid} may not use the {tier.name} tier "
                                            f"(account {req.account or '(default)'})")
    if not tiers:
        return NOTHING
    out = _time_cap(tiers, req)
    lowest = tiers[0]
    if lowest.requeue and req.requeue is not True:
        out = out.then(change(Rule.REQUEUE, Changes(requeue=True), requeue_note(lowest)))
    if lowest.grace is not None and req.warn_signal is None:
        g = lowest.grace
        flags = req.warn_flags | KILL_JOB_BATCH if g.target is SignalTarget.BATCH else req.warn_flags
        out = out.then(change(Rule.GRACE_SIGNAL, Changes(warn_signal=g.signal, warn_time=g.seconds, warn_flags=flags),
                              grace_note(g)))
    return out


def requeue_note(tier: Tier) -> str:
    """The note for a job given requeue by its tier (also compiled into the plugin's C fast path)."""
    return f"{tier.name} jobs may be preempted: requeue enabled"


def grace_note(grace: GraceSignal) -> str:
    """The note for a job given the tier's grace signal (also compiled into the plugin's C fast path)."""
    return f"{_signame(grace.signal)} sent {grace.seconds}s before the end or preemption, to checkpoint"


def _time_cap(tiers: tuple[Tier, ...], req: JobRequest) -> Outcome:
    capped = [t for t in tiers if t.max_time_min is not None]
    if not capped:
        return NOTHING
    tier = min(capped, key=lambda t: t.max_time_min or 0)
    cap = tier.max_time_min or 0
    if req.time_limit is None:
        return change(Rule.TIME_CAP, Changes(time_limit=cap), f"time limit set to the {tier.name} cap of {cap} min")
    if req.time_limit <= cap:
        return NOTHING
    asked = "UNLIMITED" if req.time_limit == TIME_INFINITE else f"{req.time_limit} min"
    if tier.over_time is OverTime.CLAMP:
        return change(Rule.TIME_CAP, Changes(time_limit=cap), f"time limit lowered from {asked} to {cap} min")
    return refuse(Rule.TIME_CAP, f"time limit {asked} exceeds the {tier.name} tier's cap of {cap} min")


def _signame(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
