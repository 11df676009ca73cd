"""The host's C compiler, for unit tests that build the images' C sources (images/files) into harnesses,
with the warnings the image builds use (install-hooks.sh)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import paths

FILES = paths.REPO / "images" / "files"
FLAGS = ("-O2", "-Wall", "-Wextra", "-Werror")


def build(out: Path, *args: str, what: str) -> Path:
    """Compiles ``args`` (sources and options) into ``out`` with FLAGS; ``what`` names it when there is no
    compiler. Returns ``out``."""
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, f"a C compiler is needed to build {what} (apt-get install gcc)"
    subprocess.run([cc, *FLAGS, "-o", str(out), *args], check=True)
    return out
