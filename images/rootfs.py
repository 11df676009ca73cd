"""The root file system every image starts from, made with debootstrap when no registry is reachable.

``debootstrap --variant=minbase SUITE DIR MIRROR [SCRIPT]`` into a temporary directory, a little
clean-up (apt lists, the host's hostname and resolv.conf), then a tar stream imported with the
Docker SDK as ``slurmpod/rootfs:<suite>``. Done once per suite: an existing image is reused.
Ref: debootstrap(8); https://docs.docker.com/reference/cli/docker/image/import/
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from slurmpod.errors import PermanentError

from .flavors import Flavor

DEBOOTSTRAP_TIMEOUT_S = 1800
TAR_TIMEOUT_S = 600


def debootstrap_command(flavor: Flavor, target: Path, mirror: str) -> list[str]:
    cmd = ["debootstrap", "--variant=minbase", flavor.suite, str(target), mirror]
    script = flavor.debootstrap_script_path
    return [*cmd, script] if script else cmd


def tar_command(root: Path, out: Path) -> list[str]:
    # Numeric owners: the image's /etc/passwd, not the host's, names them.
    return ["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-cf", str(out), "."]


def mounts_under(path: Path, mountinfo: str) -> list[Path]:
    """Mount points at or below ``path`` in /proc/self/mountinfo text, deepest first.
    Ref: proc(5), /proc/pid/mountinfo (field 5 is the mount point, octal-escaped)."""
    base = str(path.resolve())
    found: list[Path] = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        point = fields[4].encode().decode("unicode_escape")
        if point == base or point.startswith(base + "/"):
            found.append(Path(point))
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def remove_tree(path: Path) -> None:
    """Remove a debootstrap target, first unmounting what a failed run may have left (/proc, /sys):
    rmtree would otherwise walk into the host's /proc or /dev."""
    for point in mounts_under(path, Path("/proc/self/mountinfo").read_text(encoding="utf-8")):
        subprocess.run(["umount", "--lazy", str(point)], capture_output=True, timeout=60, check=False)
    left = mounts_under(path, Path("/proc/self/mountinfo").read_text(encoding="utf-8"))
    if left:
        raise PermanentError(f"refusing to delete {path}: still mounted: {', '.join(map(str, left))}")
    shutil.rmtree(path)


def tidy(root: Path) -> None:
    """Drop what debootstrap leaves that must not ship: apt lists and caches, host identity files."""
    for pattern in ("var/lib/apt/lists/*", "var/cache/apt/*.bin", "var/cache/apt/archives/*.deb"):
        for p in root.glob(pattern):
            if p.is_file() and not p.is_symlink():
                p.unlink()
    (root / "etc/hostname").write_text("localhost\n", encoding="utf-8")
    resolv = root / "etc/resolv.conf"
    if resolv.is_file() or resolv.is_symlink():
        resolv.unlink()  # Docker bind-mounts its own at run time


def make_rootfs_tar(flavor: Flavor, mirror: str, workdir: Path, log: list[str]) -> Path:
    """debootstrap into ``workdir/root`` and tar it to ``workdir/rootfs.tar``; caller removes workdir."""
    if shutil.which("debootstrap") is None:
        raise PermanentError("debootstrap is missing: apt-get install debootstrap, or pass --base-image")
    if os.geteuid() != 0:
        raise PermanentError("debootstrap needs root; run as root or pass --base-image")
    root = workdir / "root"
    root.mkdir()
    cmd = debootstrap_command(flavor, root, mirror)
    log.append("$ " + " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=DEBOOTSTRAP_TIMEOUT_S, check=False)
    log.append(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        why = f"debootstrap {flavor.suite} failed (exit {proc.returncode}):\n"
        raise PermanentError(why + "\n".join(tail))
    tidy(root)
    out = workdir / "rootfs.tar"
    tar = tar_command(root, out)
    log.append("$ " + " ".join(tar))
    proc = subprocess.run(tar, capture_output=True, text=True, timeout=TAR_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        raise PermanentError(f"tar of {root} failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return out


def temp_workdir(parent: Path | None = None) -> Path:
    return Path(tempfile.mkdtemp(prefix="slurmpod-rootfs.", dir=parent))
