"""Mounted secrets (munge.key, slurm.key): validated before anything is written, then installed.

Ref: https://github.com/dun/munge/wiki/Installation-Guide#securing-the-installation
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from slurmpod.errors import BadInput

# munged refuses keys shorter than 32 bytes (MUNGE_MINIMUM_SECRET_LEN); mungekey makes 1024.
MIN_KEY_BYTES = 32
MAX_KEY_BYTES = 1 << 20
# Any access by group or others makes a key readable or replaceable by other users.
TOO_OPEN = stat.S_IRWXG | stat.S_IRWXO


@dataclass(frozen=True, slots=True)
class Key:
    data: bytes
    source: str


def secret_file_stat(path: Path, field: str) -> os.stat_result:
    """The stat of a mounted secret file: present, a regular file, not readable by group or others."""
    try:
        st = path.stat()  # follows kubelet's ..data symlinks
    except FileNotFoundError:
        raise BadInput.one(field, str(path), "missing (is the secret mounted?)") from None
    except OSError as exc:
        raise BadInput.one(field, str(path), f"cannot stat: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise BadInput.one(field, str(path), "not a regular file")
    mode = stat.S_IMODE(st.st_mode)
    if mode & TOO_OPEN:
        raise BadInput.one(f"{field} mode", f"{mode:04o}", "too open; mount the secret with defaultMode 0400")
    return st


def read_key(path: Path, field: str) -> Key:
    """Read a key from a secret volume; BadInput names the file and what is wrong with it."""
    st = secret_file_stat(path, field)
    if st.st_size < MIN_KEY_BYTES:
        what = "empty" if st.st_size == 0 else f"{st.st_size} bytes, at least {MIN_KEY_BYTES} needed"
        raise BadInput.one(field, str(path), f"key is {what}")
    if st.st_size > MAX_KEY_BYTES:
        raise BadInput.one(field, str(path), f"key is {st.st_size} bytes, more than {MAX_KEY_BYTES}")
    try:
        data = path.read_bytes()
    except OSError as exc:  # EACCES: the pod's user may not read the secret volume
        raise BadInput.one(field, str(path), f"cannot read: {exc.strerror}") from None
    return Key(data, str(path))


def install(key: Key, dest: Path, uid: int, gid: int) -> None:
    """Write the key 0400 owner-only, atomically (never a half-written or world-readable key).

    The temporary file is created with O_EXCL and O_NOFOLLOW: a file or symlink planted at its name
    (by anyone who could write the directory) is removed, never written through.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()  # a leftover of a start that died here; unlink never follows a symlink
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o400)
    try:
        os.write(fd, key.data)
        os.fchown(fd, uid, gid)
        os.fchmod(fd, 0o400)
    finally:
        os.close(fd)
    os.replace(tmp, dest)
