"""The policy as typed values: fail mode, topology placement, preemption tiers, custom rules.

Built by `loader.load` from the policy YAML (the chart's policy ConfigMap template documents every key).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from slurmpod.policy.decision import Decision
from slurmpod.policy.request import JobRequest


class FailMode(enum.Enum):
    """What a Python error inside the policy (or an invalid policy file) does to the job."""

    CLOSED = "closed"  # reject with "rejected by cluster policy: ..." (the default)
    OPEN = "open"  # accept unchanged, and log the error


class TopologyKind(enum.Enum):
    """Slurm's TopologyPlugin, which decides how a job is kept together.

    Ref: https://slurm.schedmd.com/topology.html
    """

    NONE = "none"
    TREE = "tree"  # --switches=1@<wait>: job_desc.req_switch, wait4switch
    BLOCK = "block"  # --segment=<n>: job_desc.segment_size


class Oversize(enum.Enum):
    """A multi-node GPU job larger than one block / leaf switch."""

    SEGMENT = "segment"  # block: whole-block segments when the node count divides; reject otherwise
    REJECT = "reject"  # refuse it, saying why
    ALLOW = "allow"  # let Slurm spread it


class OverTime(enum.Enum):
    """A time limit above the tier's cap."""

    REJECT = "reject"
    CLAMP = "clamp"  # lower it to the cap


class SignalTarget(enum.Enum):
    """Who receives the grace signal. Ref: https://slurm.schedmd.com/sbatch.html#OPT_signal"""

    STEPS = "steps"  # every job step (srun-launched training)
    BATCH = "batch"  # the batch shell only ("B:"): warn_flags |= KILL_JOB_BATCH


@dataclass(frozen=True, slots=True)
class Access:
    """Who may do something: listed users, members of listed groups, jobs charged to listed accounts."""

    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()
    accounts: frozenset[str] = frozenset()
    everyone: bool = False

    def allows(self, req: JobRequest) -> bool:
        return (self.everyone or req.user in self.users or bool(self.groups.intersection(req.groups))
                or (req.account is not None and req.account in self.accounts))


EVERYONE = Access(everyone=True)
NOBODY = Access()


@dataclass(frozen=True, slots=True)
class Topology:
    kind: TopologyKind = TopologyKind.NONE
    group_size: int = 0  # nodes per base block (block) or per leaf switch (tree)
    # tree: wait4switch, capped by SchedulerParameters=max_switch_wait (default 300 s).
    # Ref: https://slurm.schedmd.com/sbatch.html#OPT_switches, slurm.conf.html#OPT_max_switch_wait=#
    max_switch_wait_s: int = 300
    gpu_jobs_only: bool = True
    oversize: Oversize = Oversize.SEGMENT
    whole_node_gpus: int = 0  # multi-node GPU jobs get this many GPUs per node; 0: off
    opt_out: Access = NOBODY


@dataclass(frozen=True, slots=True)
class GraceSignal:
    signal: int  # signal number (SIGUSR1 = 10 on Linux)
    seconds: int  # warn_time is a uint16_t: at most 65535
    target: SignalTarget = SignalTarget.STEPS


@dataclass(frozen=True, slots=True)
class Tier:
    """One preemption tier, matched by partition or QoS; tiers are listed lowest first."""

    name: str
    rank: int
    partitions: frozenset[str] = frozenset()
    qos: frozenset[str] = frozenset()
    requeue: bool = False
    grace: GraceSignal | None = None
    max_time_min: int | None = None
    over_time: OverTime = OverTime.REJECT
    access: Access = EVERYONE


CustomFunc = Callable[[JobRequest, Decision], "Decision | None"]


@dataclass(frozen=True, slots=True)
class CustomRule:
    """A site's own rule: a function in a Python file, run after the built-in rules."""

    name: str  # FILE:FUNCTION, for messages
    func: CustomFunc


@dataclass(frozen=True, slots=True)
class Policy:
    fail_mode: FailMode = FailMode.CLOSED
    topology: Topology = Topology()
    tiers: tuple[Tier, ...] = ()
    default_tier: str | None = None
    cpu_only_partitions: frozenset[str] = frozenset()
    custom: tuple[CustomRule, ...] = ()

    def tier_named(self, name: str | None) -> Tier | None:
        return next((t for t in self.tiers if t.name == name), None)


E = TypeVar("E", bound=enum.Enum)
