"""Accounting pieces of pod start: the database password, MariaDB's init file, slurmdbd.conf's inputs.

The password comes from a mounted Secret file (chart `secrets.dbPassword`), never from values. It is
written into slurmdbd.conf (`StoragePass=`) and into an SQL string, so it is held to characters that
can end neither: a password with anything else exits 2 naming the file.
Ref: https://slurm.schedmd.com/slurmdbd.conf.html#OPT_StoragePass
"""

from __future__ import annotations

import re
from pathlib import Path

from slurmpod import well_known as wk
from slurmpod.entrypoints.secrets import secret_file_stat
from slurmpod.errors import BadInput

# Letters, digits and `. _ ~ + / -`: no space, quote, backslash, '#', '=' or '%' (what `openssl rand
# -base64` makes, less its '=' padding; `-hex` fits too).
_PASSWORD = re.compile(r"[A-Za-z0-9._~+/-]{16,128}")
FIELD = "db password secret"


def read_password(path: Path) -> str:
    """The password in ``path``: a regular file not readable by group or others; one trailing newline is
    dropped (`--from-file` of a file written by echo)."""
    secret_file_stat(path, FIELD)
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput.one(FIELD, str(path), f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    password = text[:-1] if text.endswith("\n") else text
    if not _PASSWORD.fullmatch(password):
        raise BadInput.one(FIELD, str(path), "must be 16-128 characters of letters, digits and . _ ~ + / -")
    return password


def init_sql(password: str) -> str:
    """mariadbd --init-file, run at every start: the database and StorageUser, its password set anew (a
    changed Secret takes effect on the db pod's next start). ``password`` passed read_password."""
    if not _PASSWORD.fullmatch(password):
        raise ValueError("password not checked")
    # Ref: https://mariadb.com/kb/en/server-system-variables/#init_file
    # Ref: https://slurm.schedmd.com/accounting.html#slurmdbd-configuration (the grants slurmdbd needs)
    user = f"'{wk.DB_USER}'@'%'"
    return "\n".join([
        f"CREATE DATABASE IF NOT EXISTS {wk.DB_NAME};",
        f"CREATE USER IF NOT EXISTS {user} IDENTIFIED BY '{password}';",
        f"ALTER USER {user} IDENTIFIED BY '{password}';",
        f"GRANT ALL ON {wk.DB_NAME}.* TO {user};",
        "",
    ])
