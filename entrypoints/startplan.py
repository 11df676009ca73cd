"""What pod start produces, in memory: the files, directories, keys and programs of one pod.

Every role's builder (entrypoints/roles/) returns a ``RolePlan``; pod start joins it with what every pod
has (``Common``) into the ``StartPlan`` that entrypoints/writer.py writes only once all of it is valid.
"""

from __future__ import annotations

import pwd
from dataclasses import dataclass
from pathlib import Path

from slurmpod import podinfo
from slurmpod import well_known as wk
from slurmpod.entrypoints import nodespec, secrets
from slurmpod.entrypoints.render import Program


@dataclass(frozen=True, slots=True)
class OutFile:
    path: str
    content: str
    mode: int = 0o644
    uid: int = 0
    gid: int = 0


@dataclass(frozen=True, slots=True)
class OutDir:
    path: str
    uid: int
    gid: int
    mode: int
    # A home directory on the shared /home volume: made only when missing (an existing one keeps its
    # owner and mode), and a volume that refuses (root-squashed NFS, read-only) costs a warning only.
    home: bool = False


@dataclass(frozen=True, slots=True)
class KeyInstall:
    key: secrets.Key
    dest: str
    user: str


@dataclass(frozen=True, slots=True)
class StartPlan:
    role: str
    pod: podinfo.PodInfo
    node: nodespec.NodeSpec | None
    files: tuple[OutFile, ...]
    dirs: tuple[OutDir, ...]
    keys: tuple[KeyInstall, ...]
    programs: tuple[Program, ...]
    supervisord_conf: str


@dataclass(frozen=True, slots=True)
class Common:
    """What every role's builder starts from: the pod, its auth, and the pieces every pod has."""

    pod: podinfo.PodInfo
    auth: str
    keys: tuple[KeyInstall, ...]
    dirs: tuple[OutDir, ...]
    programs: tuple[Program, ...]
    files: tuple[OutFile, ...] = ()
    directory: bool = False  # SSSD runs: daemons that resolve users wait for it (bounded)


@dataclass(frozen=True, slots=True)
class RolePlan:
    """One role's part of the plan."""

    node: nodespec.NodeSpec | None
    files: tuple[OutFile, ...]
    dirs: tuple[OutDir, ...]
    programs: tuple[Program, ...]
    keys: tuple[KeyInstall, ...] = ()


def homes() -> tuple[OutDir, ...]:
    """Home directories of ordinary users on the shared /home volume, made on first start."""
    out = []
    for user in pwd.getpwall():
        if user.pw_uid >= 1000 and user.pw_dir.startswith("/home/") and user.pw_uid < 60000:
            out.append(OutDir(user.pw_dir, user.pw_uid, user.pw_gid, 0o750, home=True))
    return tuple(out)


def jwt_key(path: Path, needed: bool) -> tuple[KeyInstall, ...]:
    """The auth/jwt key from its Secret, for slurmctld and slurmdbd (SlurmUser, 0400): required when
    ``needed``, else installed only when mounted (an optional Secret mounts as an empty directory)."""
    if not needed and not path.exists():
        return ()
    return (KeyInstall(secrets.read_key(path, "jwt key secret"), wk.JWT_KEY, "slurm"),)
