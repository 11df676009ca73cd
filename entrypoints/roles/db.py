"""The db pod: MariaDB for slurmdbd. No Slurm daemon runs here, so it has no auth key and no munged."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from slurmpod import well_known as wk
from slurmpod.entrypoints import programs
from slurmpod.entrypoints.startplan import Common, OutDir, OutFile, RolePlan

if TYPE_CHECKING:
    from slurmpod.entrypoints.inputs import Adapters, StartInput


def build(inp: StartInput, c: Common, adapters: Adapters) -> RolePlan:
    """MariaDB's data on the pod's volume, StorageUser made by the init file."""
    from slurmpod.entrypoints import accounting  # noqa: PLC0415 - the accounting roles' alone

    sql = accounting.init_sql(accounting.read_password(inp.settings.db_password))
    dirs = (OutDir(wk.MARIADB_DATA_DIR, wk.MYSQL_UID, wk.MYSQL_UID, 0o700),
            OutDir(wk.MARIADB_RUN_DIR, wk.MYSQL_UID, wk.MYSQL_UID, 0o755),
            OutDir(str(Path(wk.DB_INIT_FILE).parent), wk.MYSQL_UID, wk.MYSQL_UID, 0o700))
    files = (OutFile(wk.DB_INIT_FILE, sql, 0o600, wk.MYSQL_UID, wk.MYSQL_UID),)
    return RolePlan(None, files, dirs, (programs.mariadbd(),))
