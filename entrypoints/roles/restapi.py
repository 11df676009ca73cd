"""The restapi pod: slurmrestd, with sackd fetching its configless slurm.conf."""

from __future__ import annotations

from typing import TYPE_CHECKING

from slurmpod import well_known as wk
from slurmpod.entrypoints import programs
from slurmpod.entrypoints.startplan import Common, OutDir, RolePlan

if TYPE_CHECKING:
    from slurmpod.entrypoints.inputs import Adapters, StartInput


def build(inp: StartInput, c: Common, adapters: Adapters) -> RolePlan:
    """sackd (configless slurm.conf for slurmrestd, SACK with auth/slurm) and slurmrestd."""
    dirs = (OutDir(wk.SLURM_RUN_DIR, wk.SLURM_UID, wk.SLURM_UID, 0o755),)
    progs = (programs.sackd(c.auth, c.pod.controller), programs.slurmrestd(c.auth, c.directory))
    return RolePlan(None, (), dirs, progs)
