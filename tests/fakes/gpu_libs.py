"""Build the C stand-ins (libnvidia-ml.so.1, libcudart.so, libnccl.so.2) once into a directory.

Tests put that directory on LD_LIBRARY_PATH of a subprocess and describe the node in a key=value state
file named by FAKE_NVML_STATE (see tests/fakes/nvml/fake_nvml.c for the keys). The fake reads the file on
every call, so it is always replaced at once (a temp file renamed over it), never rewritten in place.

An XID, as the driver raises it, is two things: an event for the NVML event sets registered at the time
(``xid.SEQ=GPU:CODE`` in the state file) and a record in the kernel log, which a check that starts later
reads (prolog_epilog/checks/gpu/xid.py). ``raise_xid`` writes both.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

_XID_KEY = re.compile(r"^xid\.(\d+)=", re.MULTILINE)

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


def replace_file(path: Path, text: str) -> Path:
    """Write ``path`` at once: a reader sees the old file or the new one, never half of either."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.new")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


def write_state(path: Path, text: str) -> Path:
    """The fakes' state file, replaced at once; a running process sees it on its next NVML call."""
    return replace_file(path, text.strip() + "\n")


def next_seq(text: str) -> int:
    """A sequence number past every XID in ``text``: the time in microseconds, which grows on its own
    across rewrites of the file (an event set remembers the numbers it has seen, not the lines)."""
    seen = [int(m.group(1)) for m in _XID_KEY.finditer(text)]
    return max([time.time_ns() // 1000, *(n + 1 for n in seen)])


def xid_line(gpu: int, code: int, seq: int) -> str:
    """The state line for XID ``code`` raised on ``gpu`` at ``seq``."""
    return f"xid.{seq}={gpu}:{code}\n"


def kmsg_record(gpu: int, code: int, seq: int) -> str:
    """The kernel log record the driver writes for it, in /dev/kmsg's "prio,seq,usec,flags;text" form.

    The fake NVML puts GPU i on PCI bus 0x10 + i. Ref: https://docs.nvidia.com/deploy/xid-errors/index.html
    (the "NVRM: Xid (PCI:...)" line), https://www.kernel.org/doc/Documentation/ABI/testing/dev-kmsg
    """
    usec = time.clock_gettime_ns(time.CLOCK_BOOTTIME) // 1000  # the kernel log's clock: since boot
    return f"4,{seq},{usec},-;NVRM: Xid (PCI:0000:{0x10 + gpu:02x}:00): {code}, pid=0, name=fake\n"


def raise_xid(state: Path, kernel_log: Path | None, gpu: int, code: int) -> int:
    """XID ``code`` on ``gpu`` now: an event for the event sets registered now (state file) and a record
    appended to ``kernel_log`` (when given, for checks that start later). Returns its sequence number."""
    text = state.read_text(encoding="utf-8") if state.exists() else ""
    seq = next_seq(text)
    replace_file(state, (text if not text or text.endswith("\n") else text + "\n") + xid_line(gpu, code, seq))
    if kernel_log is not None:
        old = kernel_log.read_text(encoding="utf-8") if kernel_log.exists() else ""
        replace_file(kernel_log, old + kmsg_record(gpu, code, seq))
    return seq
