"""Image build figures: cold build per flavor, Python-only rebuild, uncompressed image sizes."""

from __future__ import annotations

import argparse
import io
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from slurmpod_host.bench.report import Figure, Report
from slurmpod_host.images import build as image_build

MB = 1_000_000
# Issue floors: Python-only rebuild <= 60 s; worker image (no GPU libraries) <= 450 MB.
REBUILD_FLOOR_S = 60.0
WORKER_FLOOR_MB = 450.0


def _args(flavor: str) -> argparse.Namespace:
    return argparse.Namespace(flavor=flavor, role=None, base_image=None, mirror=None, log_file=None,
                              values_file=None)


def _remove_flavor(client: object, flavor: str, suite: str) -> None:
    """Remove this flavor's images and its debootstrapped rootfs, so the next build is cold."""
    import docker  # noqa: PLC0415 - host-only dependency

    assert isinstance(client, docker.DockerClient)
    for image in client.images.list():
        tags = [t for t in image.tags if t.startswith("slurmpod/")]
        if any(t.endswith(f":{flavor}") or f":{flavor}-" in t or t.endswith(f":{suite}") for t in tags):
            for tag in tags:
                client.images.remove(tag, force=True, noprune=False)
    client.images.prune(filters={"dangling": True})


def cold_build(report: Report, flavor: str, suite: str, repo: Path) -> None:
    import docker  # noqa: PLC0415

    _remove_flavor(docker.from_env(), flavor, suite)
    settings, requested = image_build.settings_from_args(_args(flavor), repo)
    started = time.monotonic()
    image_build.build(settings, requested, out=io.StringIO())
    report.add(Figure(f"cold build {flavor} (debootstrap + all images)", "s", time.monotonic() - started))


def _copy_with_python_change(repo: Path, into: Path) -> Path:
    files = subprocess.run(["git", "-C", str(repo), "ls-files", "-co", "--exclude-standard"], capture_output=True,
                           text=True, timeout=60, check=True).stdout.splitlines()
    for rel in files:
        src = repo / rel
        if src.is_file():
            dst = into / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    init = into / "slurmpod" / "__init__.py"
    init.write_text(init.read_text(encoding="utf-8") + f"\n# bench: python-only change {time.time()}\n",
                    encoding="utf-8")
    return into


def rebuild_after_python_change(report: Report, flavor: str, repo: Path) -> None:
    """Rebuild every image from a copy of the tree whose only change is one Python line."""
    with tempfile.TemporaryDirectory(prefix="slurmpod-bench-") as tmp:
        tree = _copy_with_python_change(repo, Path(tmp))
        settings, requested = image_build.settings_from_args(_args(flavor), tree)
        started = time.monotonic()
        built = image_build.build(settings, requested, out=io.StringIO())
        seconds = time.monotonic() - started
    apt_steps = [s for b in built for s in b.steps if "apt-get" in s.instruction]
    apt_reused = bool(apt_steps) and all(s.cached for s in apt_steps)
    report.add(Figure(f"rebuild {flavor} after a Python-only change", "s", seconds,
                      floor=f"<= {REBUILD_FLOOR_S:.0f} s, apt layers reused",
                      ok=seconds <= REBUILD_FLOOR_S and apt_reused))
    report.notes.append(f"rebuild {flavor}: " + ", ".join(f"{b.name} {b.cached_steps}/{len(b.steps)} steps cached"
                                                           for b in built)
                        + (f"; all {len(apt_steps)} apt steps reused" if apt_reused else "; apt layers NOT reused"))
    # Put the real tree's images back so later figures measure the checked-in code.
    settings, requested = image_build.settings_from_args(_args(flavor), repo)
    image_build.build(settings, requested, out=io.StringIO())


def sizes(report: Report, flavor: str) -> None:
    import docker  # noqa: PLC0415

    client = docker.from_env()
    for role in ("base", "controller", "worker", "login"):
        size = client.images.get(f"slurmpod/{role}:{flavor}").attrs["Size"] / MB
        floor = f"<= {WORKER_FLOOR_MB:.0f} MB" if role == "worker" else ""
        report.add(Figure(f"image slurmpod/{role}:{flavor} uncompressed", "MB", size, floor=floor,
                          ok=(size <= WORKER_FLOOR_MB) if role == "worker" else None))
