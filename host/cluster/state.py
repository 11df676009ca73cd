"""A cluster's host-side files: secrets, downwardAPI/configMap contents and termination logs.

Root: $SLURMPOD_STATE_DIR, else $XDG_STATE_HOME/slurmpod/clusters, else ~/.local/state/slurmpod/clusters.
Ref: https://specifications.freedesktop.org/basedir-spec/latest/
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from slurmpod.errors import BadInput
from slurmpod_host.cluster import well_known as host_wk
from slurmpod_host.cluster.plan import HostFile

# A cluster name names Docker objects and its state directory, so it is a DNS label: no name ('', '..',
# 'a/b', '/etc') can reach a path outside the state root.
# Ref: https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-label-names
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def state_root(env: Mapping[str, str]) -> Path:
    if env.get(host_wk.ENV_STATE_DIR):
        return Path(env[host_wk.ENV_STATE_DIR])
    base = Path(env["XDG_STATE_HOME"]) if env.get("XDG_STATE_HOME") else Path.home() / ".local" / "state"
    return base / "slurmpod" / "clusters"


def check_name(name: str) -> str:
    """The cluster name, if it is a DNS label; BadInput naming --name otherwise."""
    if not _NAME.fullmatch(name):
        raise BadInput.one("--name", name, "must be a DNS label (lowercase letters, digits and '-', "
                           "at most 63 characters)")
    return name


def state_dir(name: str, env: Mapping[str, str] | None = None) -> Path:
    return state_root(os.environ if env is None else env) / check_name(name)


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
