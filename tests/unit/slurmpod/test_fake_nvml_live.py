"""The fake libnvidia-ml.so.1 behaves like a live driver under a process that stays initialised.

State written after nvmlInit reaches the process; an XID reaches the event sets registered before it was
raised, once each, through nvmlEventSetWait with its timeout; "hang_after_init" wedges every call after
init. Each case loads its own copy of the library through ctypes, so no state is shared between cases.
Ref: https://docs.nvidia.com/deploy/nvml-api/group__nvmlEvents.html
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.gpu_libs import build, raise_xid, write_state

# nvmlReturn_t values and nvmlEventTypeXidCriticalError, from nvml.h.
# Ref: https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceEnumvs.html
SUCCESS, TIMEOUT, GPU_IS_LOST = 0, 10, 15
XID_EVENT = 0x8
HEALTHY = "gpus=8\nnvlinks=4\n"


class EventData(ctypes.Structure):
    """nvmlEventData_t."""

    _fields_ = [("device", ctypes.c_void_p), ("eventType", ctypes.c_ulonglong), ("eventData", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class Nvml:
    """One loaded copy of the fake, initialised on ``state``."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        assert lib.nvmlInit_v2() == SUCCESS

    def count(self) -> int:
        n = ctypes.c_uint()
        assert self.lib.nvmlDeviceGetCount_v2(ctypes.byref(n)) == SUCCESS
        return n.value

    def handle(self, index: int) -> ctypes.c_void_p:
        h = ctypes.c_void_p()
        assert self.lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(h)) == SUCCESS
        return h

    def uint(self, fn: str, handle: ctypes.c_void_p, *args: int) -> tuple[int, int]:
        """(return code, value) of an NVML query answering one unsigned int."""
        out = ctypes.c_uint()
        code = getattr(self.lib, fn)(handle, *(ctypes.c_uint(a) for a in args), ctypes.byref(out))
        return code, out.value

    def event_set(self, gpus: range | list[int]) -> ctypes.c_void_p:
        s = ctypes.c_void_p()
        assert self.lib.nvmlEventSetCreate(ctypes.byref(s)) == SUCCESS
        for g in gpus:
            self.register(s, g)
        return s

    def register(self, event_set: ctypes.c_void_p, gpu: int) -> None:
        assert self.lib.nvmlDeviceRegisterEvents(self.handle(gpu), ctypes.c_ulonglong(XID_EVENT), event_set) == SUCCESS

    def wait(self, event_set: ctypes.c_void_p, timeout_ms: int) -> tuple[int, int, int] | None:
        """(gpu index, event type, XID) of the next event, or None when the wait timed out."""
        data = EventData()
        code = self.lib.nvmlEventSetWait_v2(event_set, ctypes.byref(data), ctypes.c_uint(timeout_ms))
        if code == TIMEOUT:
            return None
        assert code == SUCCESS, code
        index = ctypes.c_uint()
        assert self.lib.nvmlDeviceGetIndex(ctypes.c_void_p(data.device), ctypes.byref(index)) == SUCCESS
        return index.value, data.eventType, data.eventData


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.getbasetemp() / "fake-gpu-libs")


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return write_state(tmp_path / "state", HEALTHY)


@pytest.fixture
def nvml(libs: Path, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Nvml]:
    """A fresh copy of the library (its own globals), initialised on ``state``."""
    copy = tmp_path / "libnvidia-ml.so.1"
    shutil.copy(libs / "libnvidia-ml.so.1", copy)
    monkeypatch.setenv("FAKE_NVML_STATE", str(state))
    monkeypatch.delenv("FAKE_NVML_GPUS", raising=False)
    nv = Nvml(ctypes.CDLL(str(copy)))
    yield nv
    nv.lib.nvmlShutdown()


def test_state_written_after_init_reaches_the_process(nvml: Nvml, state: Path) -> None:
    link = nvml.handle(2)
    assert nvml.uint("nvmlDeviceGetNvLinkState", link, 1) == (SUCCESS, 1)
    write_state(state, HEALTHY + "gpu.2.nvlink.1.down=1\ngpu.3.temp=97\n")
    assert nvml.uint("nvmlDeviceGetNvLinkState", link, 1) == (SUCCESS, 0)
    assert nvml.uint("nvmlDeviceGetTemperature", nvml.handle(3), 0) == (SUCCESS, 97)


def test_each_rewrite_is_seen_even_of_the_same_size_at_once(nvml: Nvml, state: Path) -> None:
    gpu = nvml.handle(0)
    for temp in (41, 42, 43):  # rewrites faster than a file time stamp moves
        write_state(state, HEALTHY + f"temp={temp}\n")
        assert nvml.uint("nvmlDeviceGetTemperature", gpu, 0) == (SUCCESS, temp)


def test_a_gpu_falls_off_the_bus_under_a_running_process(nvml: Nvml, state: Path) -> None:
    last, second = nvml.handle(7), nvml.handle(1)
    write_state(state, "gpus=7\nnvlinks=4\ngpu.1.lost=1\n")
    assert nvml.count() == 7
    assert nvml.uint("nvmlDeviceGetMinorNumber", last)[0] == GPU_IS_LOST
    assert nvml.uint("nvmlDeviceGetPersistenceMode", second)[0] == GPU_IS_LOST
    assert nvml.uint("nvmlDeviceGetPersistenceMode", nvml.handle(0)) == (SUCCESS, 1)


def test_a_set_registered_before_an_xid_gets_it_once(nvml: Nvml, state: Path) -> None:
    events = nvml.event_set(range(8))
    raise_xid(state, None, 3, 79)
    assert nvml.wait(events, 0) == (3, XID_EVENT, 79)
    assert nvml.wait(events, 0) is None
    assert nvml.wait(events, 50) is None


def test_xids_come_in_the_order_raised(nvml: Nvml, state: Path) -> None:
    events = nvml.event_set(range(8))
    raise_xid(state, None, 5, 48)
    raise_xid(state, None, 1, 94)
    assert [nvml.wait(events, 0), nvml.wait(events, 0), nvml.wait(events, 0)] == [
        (5, XID_EVENT, 48), (1, XID_EVENT, 94), None]


def test_an_xid_raised_before_a_set_was_registered_never_reaches_it(nvml: Nvml, state: Path) -> None:
    early = nvml.event_set([0])  # registered for GPU 0 only, so far
    raise_xid(state, None, 0, 48)
    raise_xid(state, None, 2, 79)
    late = nvml.event_set(range(8))
    nvml.register(early, 2)
    assert nvml.wait(late, 100) is None
    assert nvml.wait(early, 0) == (0, XID_EVENT, 48)  # GPU 0's came after its registration
    assert nvml.wait(early, 100) is None  # GPU 2's came before


def test_an_xid_on_an_unregistered_gpu_is_not_delivered(nvml: Nvml, state: Path) -> None:
    events = nvml.event_set([0, 1])
    raise_xid(state, None, 4, 79)
    assert nvml.wait(events, 50) is None


def test_every_registered_set_gets_the_xid(nvml: Nvml, state: Path) -> None:
    first, second = nvml.event_set(range(8)), nvml.event_set(range(8))
    raise_xid(state, None, 6, 119)
    assert nvml.wait(second, 0) == (6, XID_EVENT, 119)
    assert nvml.wait(first, 0) == (6, XID_EVENT, 119)
    assert (nvml.wait(first, 0), nvml.wait(second, 0)) == (None, None)


def test_a_state_rewrite_does_not_raise_old_xids_again(nvml: Nvml, state: Path) -> None:
    events = nvml.event_set(range(8))
    raise_xid(state, None, 3, 79)
    assert nvml.wait(events, 0) == (3, XID_EVENT, 79)
    write_state(state, state.read_text(encoding="utf-8") + "temp=50\n")
    assert nvml.wait(events, 0) is None


def test_a_wait_with_nothing_pending_times_out_after_its_timeout(nvml: Nvml) -> None:
    events = nvml.event_set(range(8))
    start = time.monotonic()
    assert nvml.wait(events, 300) is None
    assert time.monotonic() - start >= 0.29  # the fake counts whole milliseconds
    start = time.monotonic()
    assert nvml.wait(events, 0) is None  # no wait at all: well under a wait of 5 s even on a loaded machine
    assert time.monotonic() - start < 5.0


def test_a_wait_returns_an_xid_raised_while_it_waits(nvml: Nvml, state: Path) -> None:
    events = nvml.event_set(range(8))
    timer = threading.Timer(0.2, raise_xid, (state, None, 2, 48))
    timer.start()
    start = time.monotonic()
    try:
        assert nvml.wait(events, 10_000) == (2, XID_EVENT, 48)  # ctypes lets the timer run meanwhile
    finally:
        timer.join()
    assert time.monotonic() - start < 5.0


# Initialises, says so, waits for a line on stdin, then asks for the GPU count.
HANG_PROBE = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
print("init", lib.nvmlInit_v2(), flush=True)
sys.stdin.readline()
n = ctypes.c_uint()
print("count", lib.nvmlDeviceGetCount_v2(ctypes.byref(n)), n.value, flush=True)
"""


def _probe(libs: Path, state: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_NVML")}
    proc = subprocess.Popen([sys.executable, "-c", HANG_PROBE, str(libs / "libnvidia-ml.so.1")], env={
        **env, "FAKE_NVML_STATE": str(state)}, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "init 0\n"  # nvmlInit itself returns
    return proc


def _count_after_init(proc: subprocess.Popen[str], within: float) -> str | None:
    """What the probe prints for its count once told to go on, or None while the call is still blocked."""
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    try:
        out, _ = proc.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        assert proc.poll() is None
        return None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    return out


def test_without_a_hang_the_probe_returns(libs: Path, state: Path) -> None:
    assert _count_after_init(_probe(libs, state), 30) == "count 0 8\n"


def test_hang_after_init_blocks_the_first_call_after_init(libs: Path, state: Path) -> None:
    write_state(state, HEALTHY + "hang_after_init=1\n")
    assert _count_after_init(_probe(libs, state), 2.0) is None


def test_a_hang_written_under_a_running_process_blocks_its_next_call(libs: Path, state: Path) -> None:
    proc = _probe(libs, state)
    write_state(state, HEALTHY + "hang_after_init=1\n")
    assert _count_after_init(proc, 2.0) is None


def test_a_hang_lasts_while_the_state_says_so(libs: Path, state: Path) -> None:
    write_state(state, HEALTHY + "hang=nvmlDeviceGetCount\n")
    proc = _probe(libs, state)
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    time.sleep(1.0)
    assert proc.poll() is None  # still blocked
    write_state(state, HEALTHY)
    out, _ = proc.communicate(timeout=30)
    assert out == "count 0 8\n"
