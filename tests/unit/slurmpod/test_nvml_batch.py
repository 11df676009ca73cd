"""``Nvml.batch``: many NVML calls in one hand-off to the adapter's worker thread, under one deadline.

Each case runs in a fresh Python process over the fake libnvidia-ml (tests/fakes/nvml), loaded by the
dynamic linker, as the health agent loads the real one; nothing in slurmpod or pynvml is patched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakes.gpu_libs import build, write_state

PROBE = """
import json, queue, sys, threading, time
from slurmpod import nvml

handoffs = 0
put = queue.Queue.put
def counted(self, item, *a, **kw):
    global handoffs
    if threading.current_thread().name != "nvml" and isinstance(item, tuple):
        handoffs += 1
    return put(self, item, *a, **kw)
queue.Queue.put = counted  # counts what reaches the worker; the calls themselves run as they are

out = {}
with nvml.session(call_timeout=float(sys.argv[1])) as nv:
    def read():
        names = [nv.call("nvmlDeviceGetName", nv.handle(i)) for i in range(nv.count())]
        return {"names": [n.decode() if isinstance(n, bytes) else n for n in names],
                "thread": threading.current_thread().name,
                "unsupported": nv.optional("nvmlDeviceGetTemperature", nv.handle(0), 0)}
    handoffs = 0
    start = time.monotonic()
    try:
        out["batch"] = nv.batch(read)
    except nvml.NvmlHung as exc:
        out["hung"] = str(exc)
        out["after"] = None
        try:
            nv.count()
        except nvml.NvmlHung as again:
            out["after"] = str(again)
    out["seconds"] = time.monotonic() - start
    out["handoffs"] = handoffs
    if "hung" not in out:
        try:
            nv.batch(lambda: nv.call("nvmlDeviceGetHandleByIndex", 99))
        except nvml.NvmlError as exc:
            out["error"] = type(exc).__name__
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.getbasetemp() / "fake-gpu-libs")


def _probe(libs: Path, tmp: Path, state: str, timeout: float) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_NVML", "CUDA_"))}
    env.update(LD_LIBRARY_PATH=str(libs), FAKE_NVML_STATE=str(write_state(tmp / "state", state)))
    proc = subprocess.run([sys.executable, "-P", "-c", PROBE, str(timeout)], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_a_batch_runs_its_calls_on_the_worker_in_one_handoff(libs: Path, tmp_path: Path) -> None:
    got = _probe(libs, tmp_path, "gpus=8\nunsupported=nvmlDeviceGetTemperature", 10.0)
    batch = got["batch"]
    assert isinstance(batch, dict)
    assert len(batch["names"]) == 8
    assert batch["thread"] == "nvml"
    assert batch["unsupported"] is None  # NVML's codes are translated inside a batch too
    assert got["handoffs"] == 1  # 18 calls, one hand-off
    assert got["error"] == "NvmlError"  # an invalid index inside a batch raises to the batch's caller


def test_a_batch_whose_call_hangs_names_that_call_in_time_and_ends_the_session(libs: Path, tmp_path: Path) -> None:
    got = _probe(libs, tmp_path, "gpus=2\nhang=nvmlDeviceGetName", 0.5)
    assert "batch" not in got
    assert got["hung"] == "nvmlDeviceGetName did not return within 0.5 s"
    assert isinstance(got["seconds"], float) and got["seconds"] < 5.0
    assert got["after"] == "nvmlDeviceGetCount: not called, NVML hung earlier in nvmlDeviceGetName"
