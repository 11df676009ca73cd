"""Pod start's writes: a whole, valid ``StartPlan`` to disk, and nothing before it is whole.

Every file is written owner-only to a temporary name, chowned, chmodded and renamed into place, so a
reader (or a pod killed mid-start) never sees half a file, and a password is never readable by others.
"""

from __future__ import annotations

import logging
import os
import pwd
from pathlib import Path

from slurmpod import well_known as wk
from slurmpod.entrypoints import secrets
from slurmpod.entrypoints.startplan import OutDir, StartPlan

log = logging.getLogger(__name__)


def write(path: Path, content: str, mode: int, uid: int = 0, gid: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    # Created owner-only: a file that holds a password is never readable by others, not even briefly.
    # O_NOFOLLOW: a link planted at the temporary name is refused, not written through.
    # Ref: https://man7.org/linux/man-pages/man2/open.2.html
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(content)
    if (uid, gid) != (0, 0):
        os.chown(tmp, uid, gid)
    tmp.chmod(mode)
    os.replace(tmp, path)


def apply(p: StartPlan, run_dir: Path) -> Path:
    """Write the plan; returns the supervisord.conf path."""
    for d in p.dirs:
        if d.home:
            make_home(d)
            continue
        path = Path(d.path)
        path.mkdir(parents=True, exist_ok=True)
        os.chown(path, d.uid, d.gid)
        path.chmod(d.mode)
    for k in p.keys:
        user = pwd.getpwnam(k.user)
        secrets.install(k.key, Path(k.dest), user.pw_uid, user.pw_gid)
    for f in p.files:
        write(Path(f.path), f.content, f.mode, f.uid, f.gid)
    for prog in p.programs:
        write(run_dir / "bin" / prog.name, prog.script, 0o755)
    conf = run_dir / wk.SUPERVISORD_CONF
    write(conf, p.supervisord_conf, 0o644)
    return conf


def make_home(d: OutDir) -> None:
    path = Path(d.path)
    if path.exists():
        return
    try:
        path.mkdir(mode=0o700)  # owner-only until chowned: never briefly open to others
        os.chown(path, d.uid, d.gid)
        path.chmod(d.mode)
    except OSError as exc:  # root-squashed NFS (EACCES/EPERM), read-only /home (EROFS)
        log.warning("home directory not made; users can still run jobs that do not need it",
                    extra={"ctx": {"path": d.path, "err": exc.strerror or str(exc)}})
