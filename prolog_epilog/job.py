"""The job a prolog or epilog runs for, from the environment slurmd gives it (no RPC).

Ref: https://slurm.schedmd.com/prolog_epilog.html — slurmd sets SLURM_JOB_ID, SLURM_JOB_GPUS (the
job's GPU indices on this node) and CUDA_VISIBLE_DEVICES; SLURM_SCRIPT_CONTEXT says prolog_slurmd or
epilog_slurmd.

Opting out of checks for one job: the job's comment or its `--extra` text carries
``slurmpod:skip=nvlink,xid``. slurmd puts both into the Prolog/Epilog environment from the job
credential (SLURM_JOB_COMMENT, SLURM_JOB_EXTRA; seen in slurmd's prolog environment builder,
src/slurmd/slurmd/req.c), so reading them costs no RPC. `scontrol show job` would be one RPC per
prolog — exactly the load the issue forbids. Only checks the config (or the check itself) marks
skippable can be skipped; any other name is ignored and logged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from slurmpod import well_known as wk

SKIP_PATTERN = re.compile(r"(?:^|[\s;,])" + re.escape(wk.HEALTH_SKIP_TAG) + r"=([A-Za-z0-9_.,-]+)")


@dataclass(frozen=True, slots=True)
class JobInfo:
    job_id: int | None = None
    gpus: tuple[int, ...] = ()  # GPU indices on this node
    skip: frozenset[str] = frozenset()
    skip_known: bool = True  # False: the comment and extra were not given (slurmd's PrEp plugin): look them up

    @property
    def present(self) -> bool:
        return self.job_id is not None


def parse_indices(text: str) -> tuple[int, ...]:
    """'0,1,3' or '0-3,6' -> indices; UUIDs and anything else are ignored (no index to report)."""
    out: list[int] = []
    for raw in text.split(","):
        part = raw.strip()
        lo, dash, hi = part.partition("-")
        if dash and lo.isdigit() and hi.isdigit():
            out.extend(range(int(lo), int(hi) + 1))
        elif part.isdigit():
            out.append(int(part))
    return tuple(sorted(set(out)))


def skip_names(*texts: str) -> frozenset[str]:
    names: set[str] = set()
    for text in texts:
        for match in SKIP_PATTERN.finditer(text or ""):
            names.update(n for n in match.group(1).split(",") if n)
    return frozenset(names)


def from_env(env: Mapping[str, str]) -> JobInfo:
    raw_id = env.get(wk.ENV_SLURM_JOB_ID, "")
    job_id = int(raw_id) if raw_id.isdigit() else None
    gpus = parse_indices(env.get(wk.ENV_SLURM_JOB_GPUS, "") or env.get(wk.ENV_CUDA_VISIBLE_DEVICES, ""))
    skip = skip_names(env.get(wk.ENV_SLURM_JOB_COMMENT, ""), env.get(wk.ENV_SLURM_JOB_EXTRA, ""))
    return JobInfo(job_id, gpus, skip, skip_known=env.get(wk.ENV_JOB_FIELDS, "") != wk.JOB_FIELDS_LOOKUP)
