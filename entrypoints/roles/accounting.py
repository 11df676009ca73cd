"""The accounting pod: slurmdbd, in front of the db pod's MariaDB."""

from __future__ import annotations

from typing import TYPE_CHECKING

from slurmpod import confvalues
from slurmpod import well_known as wk
from slurmpod.entrypoints import programs, render
from slurmpod.entrypoints.startplan import Common, OutDir, OutFile, RolePlan, jwt_key

if TYPE_CHECKING:
    from slurmpod.entrypoints.inputs import Adapters, StartInput


def build(inp: StartInput, c: Common, adapters: Adapters) -> RolePlan:
    """slurmdbd.conf (SlurmUser, 0600: it holds StoragePass) from the pod and its Secrets."""
    from slurmpod.entrypoints import accounting  # noqa: PLC0415 - the accounting roles' alone

    assert inp.db_host is not None  # the registry has this role read it
    keys = jwt_key(inp.settings.jwt_key, needed=False)
    conf = render.SlurmdbdConf(
        auth=c.auth,
        dbd_host=confvalues.host(wk.ENV_POD_NAME, c.pod.name),
        storage_host=inp.db_host,
        storage_pass=accounting.read_password(inp.settings.db_password),
        jwt=bool(keys),
    )
    files = (OutFile(wk.SLURMDBD_CONF, render.slurmdbd_conf(conf), 0o600, wk.SLURM_UID, wk.SLURM_UID),)
    dirs = (OutDir(wk.SLURMDBD_RUN_DIR, wk.SLURM_UID, wk.SLURM_UID, 0o755),)
    return RolePlan(None, files, dirs, (programs.slurmdbd(c.auth),), keys)
