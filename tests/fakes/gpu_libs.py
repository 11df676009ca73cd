"""Build the C stand-ins (libnvidia-ml.so.1, libcudart.so, libnccl.so.2) once into a directory.

Tests put that directory on LD_LIBRARY_PATH of a subprocess and describe the node in a key=value state
file named by FAKE_NVML_STATE (see tests/fakes/nvml/fake_nvml.c for the keys).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

FAKES = Path(__file__).resolve().parent
SOURCES = {
    "libnvidia-ml.so.1": FAKES / "nvml" / "fake_nvml.c",
    "libcudart.so": FAKES / "cuda" / "fake_cudart.c",
    "libnccl.so.2": FAKES / "nccl" / "fake_nccl.c",
}


def build(out: Path, state_dir: str | None = None) -> Path:
    """Compile every stand-in into ``out`` (skipping those already there); returns ``out``.

    ``state_dir``: the fake NVML then reads ``state_dir/<hostname>`` when FAKE_NVML_STATE is unset (for
    processes started without the test's environment, such as Slurm's hooks in a fake-GPU pod).
    """
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise RuntimeError("a C compiler is needed for the fake GPU libraries (bootstrap-host.sh installs gcc)")
    out.mkdir(parents=True, exist_ok=True)
    for name, src in SOURCES.items():
        if not (out / name).exists():
            defines = [f'-DFAKE_NVML_STATE_DIR="{state_dir}"'] if state_dir else []
            subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wall", *defines, "-o", str(out / name), str(src)],
                           check=True, timeout=120)
    return out


def write_state(path: Path, text: str) -> Path:
    """A state file for the fakes (and no XIDs delivered yet)."""
    path.write_text(text.strip() + "\n", encoding="utf-8")
    Path(f"{path}.delivered").unlink(missing_ok=True)
    return path
