"""Build the binaries once per machine (build-control-plane.sh beside this module; it caches them in the
layout's cache dir and says how long each step took), and import the pause image."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import time
from importlib import resources
from typing import Any, TextIO

from slurmpod.errors import PermanentError
from slurmpod_host.kube.layout import PAUSE_IMAGE, Layout

BUILD_TIMEOUT_S = 3600  # a cold build is 6-8 min on 2 cores; this bounds a stuck mirror
BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl",
            "pause")


def built(layout: Layout) -> bool:
    return all(layout.bin(b).is_file() for b in BINARIES)


def ensure(layout: Layout, out: TextIO = sys.stdout) -> float:
    """Run the build script (a no-op once built, apart from checking the runtime packages); seconds taken."""
    started = time.monotonic()
    script = resources.files("slurmpod_host.kube").joinpath("build-control-plane.sh")
    with resources.as_file(script) as path:
        proc = subprocess.run(["bash", str(path), str(layout.cache)], stdout=out, stderr=subprocess.STDOUT,
                              timeout=BUILD_TIMEOUT_S, check=False)
    if proc.returncode != 0 or not built(layout):
        raise PermanentError(f"control-plane build failed (exit {proc.returncode}); its output is above")
    return time.monotonic() - started


def import_pause(layout: Layout, client: Any) -> bool:
    """`docker import` a one-file image holding the static pause binary, once; True when it was made.

    The kubelet runs it as every pod's sandbox. Ref: https://github.com/kubernetes/kubernetes/tree/v1.20.2/build/pause
    """
    if client.images.list(name=PAUSE_IMAGE):
        return False
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(layout.bin("pause")), arcname="pause")
    proc = subprocess.run(["docker", "import", "--change", 'ENTRYPOINT ["/pause"]', "-", PAUSE_IMAGE],
                          input=buf.getvalue(), capture_output=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise PermanentError(f"docker import {PAUSE_IMAGE}: {proc.stderr.decode(errors='replace').strip()}")
    return True
