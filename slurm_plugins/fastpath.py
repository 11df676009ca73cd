"""Compile a loaded `Policy` into the table the plugin's C fast path reads (slurmpod_fast_t, fastpath.h).

`plan` is pure: it returns a `FastPlan`, or why the policy must be decided in Python for every call
(site rules, which may be impure, or a policy larger than the table). The constant notes are formatted
here by `tier_rules` itself, so C only formats the ones that hold request values. `fill` writes a plan
into a cffi ``slurmpod_fast_t``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slurmpod.policy import tier_rules
from slurmpod.policy.model import OverTime, Policy, SignalTarget, TopologyKind

# Sizes of slurmpod_fast_t's fields (fastpath.h), NUL included.
MAX_TIERS = 8
NAME_SIZE = 64
LIST_SIZE = 512
CPU_ONLY_SIZE = 1024
NOTE_SIZE = 256
TIME_MAX = 0xFFFFFFFE  # caps are compared with job_desc.time_limit, a uint32_t (INFINITE = 0xffffffff)


@dataclass(frozen=True, slots=True)
class FastTier:
    name: str
    partitions: str  # "|a|b|"
    qos: str
    users: str
    accounts: str
    everyone: bool
    has_groups: bool
    requeue: bool
    grace: tuple[int, int, bool] | None  # signal, seconds, to the batch shell only
    max_time: int | None
    clamp: bool
    note_requeue: str
    note_grace: str


@dataclass(frozen=True, slots=True)
class FastPlan:
    tiers: tuple[FastTier, ...]
    default_tier: int | None  # index into tiers
    cpu_only: str  # "|a|b|"
    topology_active: bool  # multi-node jobs (GPU jobs with gpuJobsOnly) are placed: Python decides those
    gpu_jobs_only: bool


def _plain(text: str) -> bool:
    """Printable ASCII with no quote or backslash: the C side's messages and log lines match Python's repr."""
    return all(" " <= c <= "~" and c not in "'\\|" for c in text)


def _names(names: frozenset[str], size: int) -> str | None:
    text = "|" + "|".join(sorted(names)) + "|" if names else ""
    return text if len(text) < size and all(_plain(n) for n in names) else None


def _tier(policy: Policy, index: int) -> FastTier | str:
    tier = policy.tiers[index]
    lists = [_names(names, LIST_SIZE) for names in (tier.partitions, tier.qos, tier.access.users, tier.access.accounts)]
    partitions, qos, users, accounts = lists
    if partitions is None or qos is None or users is None or accounts is None:
        return f"tier {tier.name!r}: a name list too long or not plain ASCII"
    note_requeue = tier_rules.requeue_note(tier)
    note_grace = tier_rules.grace_note(tier.grace) if tier.grace is not None else ""
    if not all(_plain(text) and len(text) < size for text, size in ((tier.name, NAME_SIZE), (note_requeue, NOTE_SIZE),
                                                                     (note_grace, NOTE_SIZE))):
        return f"tier {tier.name!r}: its name or notes are too long or not plain ASCII"
    if tier.max_time_min is not None and tier.max_time_min > TIME_MAX:
        return f"tier {tier.name!r}: maxTimeMinutes above a uint32_t"
    grace = (tier.grace.signal, tier.grace.seconds, tier.grace.target is SignalTarget.BATCH) if tier.grace else None
    return FastTier(tier.name, partitions, qos, users, accounts, tier.access.everyone, bool(tier.access.groups),
                    tier.requeue, grace, tier.max_time_min, tier.over_time is OverTime.CLAMP, note_requeue, note_grace)


def plan(policy: Policy) -> FastPlan | str:
    """The table for ``policy``, or why every call must go to Python."""
    if policy.custom:
        return "site rules run in Python for every job"
    if len(policy.tiers) > MAX_TIERS:
        return f"more than {MAX_TIERS} tiers"
    tiers = []
    for index in range(len(policy.tiers)):
        tier = _tier(policy, index)
        if isinstance(tier, str):
            return tier
        tiers.append(tier)
    cpu_only = _names(policy.cpu_only_partitions, CPU_ONLY_SIZE)
    if cpu_only is None:
        return "cpuOnlyPartitions too long or not plain ASCII"
    default = next((i for i, t in enumerate(policy.tiers) if t.name == policy.default_tier), None)
    topo = policy.topology
    return FastPlan(tuple(tiers), default, cpu_only,
                    topo.kind is not TopologyKind.NONE or bool(topo.whole_node_gpus), topo.gpu_jobs_only)


def fill(ffi: Any, fast: Any, plan_or_reason: FastPlan | str, key: tuple[int, int, int]) -> None:
    """Write a plan into a zeroed ``slurmpod_fast_t`` (ok = 0 when there is none)."""
    fast.key_ino, fast.key_mtime_ns, fast.key_size = key
    if isinstance(plan_or_reason, str):
        fast.ok = 0
        fast.why = plan_or_reason.encode("utf-8", "replace")[:255]
        return
    p = plan_or_reason
    fast.ntiers = len(p.tiers)
    fast.has_default, fast.default_tier = (1, p.default_tier) if p.default_tier is not None else (0, 0)
    fast.topology_active, fast.gpu_jobs_only = int(p.topology_active), int(p.gpu_jobs_only)
    fast.cpu_only = p.cpu_only.encode()
    for i, tier in enumerate(p.tiers):
        c = fast.tiers[i]
        c.name, c.partitions, c.qos = tier.name.encode(), tier.partitions.encode(), tier.qos.encode()
        c.users, c.accounts = tier.users.encode(), tier.accounts.encode()
        c.everyone, c.has_groups, c.requeue = int(tier.everyone), int(tier.has_groups), int(tier.requeue)
        if tier.grace is not None:
            c.has_grace, (c.grace_signal, c.grace_seconds, batch) = 1, tier.grace
            c.grace_batch = int(batch)
        if tier.max_time is not None:
            c.has_cap, c.max_time, c.clamp = 1, tier.max_time, int(tier.clamp)
        c.note_requeue, c.note_grace = tier.note_requeue.encode(), tier.note_grace.encode()
    fast.ok = 1
