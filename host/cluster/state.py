"""A cluster's host-side files: secrets, downwardAPI/configMap contents and termination logs.

Root: $SLURMPOD_STATE_DIR, else $XDG_STATE_HOME/slurmpod/clusters, else ~/.local/state/slurmpod/clusters.
Ref: https://specifications.freedesktop.org/basedir-spec/latest/
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from slurmpod import well_known as wk
from slurmpod_host.cluster.plan import HostFile


def state_root(env: Mapping[str, str]) -> Path:
    if env.get(wk.ENV_STATE_DIR):
        return Path(env[wk.ENV_STATE_DIR])
    base = Path(env["XDG_STATE_HOME"]) if env.get("XDG_STATE_HOME") else Path.home() / ".local" / "state"
    return base / "slurmpod" / "clusters"


def state_dir(name: str, env: Mapping[str, str] | None = None) -> Path:
    return state_root(os.environ if env is None else env) / name


def write(root: Path, files: Iterable[HostFile]) -> None:
    """Create every HostFile under ``root`` (directories come before their contents in a plan)."""
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o700)  # the munge key lives below
    for f in files:
        path = root / f.path
        path.parent.mkdir(parents=True, exist_ok=True)
        if f.directory:
            path.mkdir(exist_ok=True)
            path.chmod(f.mode)
        elif f.symlink_to is not None:
            if not path.is_symlink():
                path.symlink_to(f.symlink_to)
        else:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, f.mode)
            try:
                os.write(fd, f.content)
            finally:
                os.close(fd)
            path.chmod(f.mode)  # not narrowed by the umask


def remove(root: Path) -> bool:
    if not root.exists():
        return False
    shutil.rmtree(root)
    return True
