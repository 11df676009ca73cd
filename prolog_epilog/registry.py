"""The one ordered registry of checks. Order matters: the first failure names the drain reason, so the
most basic finding (NVML answers, all GPUs present) comes first and node checks last."""

from __future__ import annotations

from slurmpod.prolog_epilog.check import Check
from slurmpod.prolog_epilog.checks.cuda import allreduce, memory
from slurmpod.prolog_epilog.checks.gpu import (
    clocks,
    count,
    ecc,
    fabric,
    memory_held,
    nvlink,
    persistence,
    remap,
    retired_pages,
    temperature,
    xid,
)
from slurmpod.prolog_epilog.checks.node import disk, mounts, munge
from slurmpod.prolog_epilog.checks.node import memory as node_memory


def all_checks() -> tuple[Check, ...]:
    return (
        count.CHECK,
        xid.CHECK,
        ecc.CHECK,
        remap.CHECK,
        retired_pages.CHECK,
        nvlink.CHECK,
        fabric.CHECK,
        memory_held.CHECK,
        clocks.CHECK,
        temperature.CHECK,
        persistence.CHECK,
        memory.CHECK,
        allreduce.CHECK,
        munge.CHECK,
        disk.CHECK,
        node_memory.CHECK,
        mounts.CHECK,
    )


def names() -> set[str]:
    return {c.name for c in all_checks()}
