"""The login pod: sackd for client commands, and sshd for users."""

from __future__ import annotations

from typing import TYPE_CHECKING

from slurmpod import well_known as wk
from slurmpod.entrypoints import programs, secrets
from slurmpod.entrypoints.startplan import Common, KeyInstall, OutDir, RolePlan, homes

if TYPE_CHECKING:
    from slurmpod.entrypoints.inputs import Adapters, StartInput


def build(inp: StartInput, c: Common, adapters: Adapters) -> RolePlan:
    """sackd and sshd; the ssh host key from its Secret when mounted, so clients keep trusting this pod."""
    # sackd's runtime directory (config cache, sack.socket), owned by SlurmUser as sackd.service's
    # RuntimeDirectory is; sackd warns when it is owned by root. Ref: https://slurm.schedmd.com/sackd.html
    dirs = (OutDir(wk.SLURM_RUN_DIR, wk.SLURM_UID, wk.SLURM_UID, 0o755), *homes())
    keys: tuple[KeyInstall, ...] = ()
    host_key = inp.settings.ssh_host_key
    if host_key.exists():  # optional Secret: an empty volume when the user made none
        keys = (KeyInstall(secrets.read_key(host_key, "ssh host key secret"), wk.SSH_HOST_KEY, "root"),)
    return RolePlan(None, (), dirs, (programs.sackd(c.auth, c.pod.controller), programs.sshd(c.directory)), keys)
