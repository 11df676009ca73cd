"""`slurmpod daemon health-agent` over the fake libnvidia-ml (tests/fakes/nvml), in a process of its own:
an NVML call that never returns makes its check "unknown" within the check's timeout, the answer comes
within the request's deadline, and the socket goes on answering."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes.gpu_libs import build, write_state

from slurmpod.prolog_epilog.agent.client import Client
from slurmpod.prolog_epilog.agent.protocol import Answer, Request
from slurmpod.prolog_epilog.job import JobInfo
from slurmpod.prolog_epilog.result import CheckResult, Context, Status, Unknown


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.getbasetemp() / "fake-gpu-libs")


def _start(libs: Path, tmp: Path, state: str) -> tuple[subprocess.Popen[str], Path]:
    (tmp / "kmsg").write_text("", encoding="utf-8")
    # The check's timeout (0.5 s) is below the adapter's per-call deadline (2 s): the check itself is
    # what does not return, as a check does whose call is stuck longer than the check may take.
    (tmp / "health.yaml").write_text(
        f"kernel_log: {tmp / 'kmsg'}\n"
        "checks: {temperature: {timeout: 0.5}, cuda-memory: {enabled: false}, nccl-allreduce: {enabled: false}}\n",
        encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "FAKE_NVML", "CUDA_"))}
    env.update(LD_LIBRARY_PATH=str(libs), FAKE_NVML_STATE=str(write_state(tmp / "state", state)),
               SLURMPOD_AUTH="slurm")
    sock = tmp / "run" / "agent.sock"
    slurmpod = Path(sys.executable).with_name("slurmpod")
    proc = subprocess.Popen([str(slurmpod), "daemon", "health-agent", "--socket", str(sock), "--interval", "3600",
                             "--config", str(tmp / "health.yaml"), "--state-dir", str(tmp / "sd")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    end = time.monotonic() + 30
    while not sock.exists():
        if proc.poll() is not None or time.monotonic() > end:
            proc.kill()
            pytest.fail(f"the agent did not start: {proc.communicate(timeout=5)[0][-3000:]}")
        time.sleep(0.05)
    return proc, sock


def _stop(proc: subprocess.Popen[str], sock: Path) -> str:
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=10)[0]
    assert proc.returncode == 0, out[-3000:]
    assert not sock.exists()
    return out


def _by_check(answer: Answer | None) -> dict[str, CheckResult | Unknown]:
    assert answer is not None
    return {a.verdict.check: a.verdict for a in answer.verdicts}


def test_a_hung_nvml_call_is_unknown_within_the_deadline(libs: Path, tmp_path: Path) -> None:
    proc, sock = _start(libs, tmp_path, "gpus=2\nhang=nvmlDeviceGetTemperature")
    try:
        start = time.monotonic()
        periodic = _by_check(Client(sock).ask(Request(Context.PERIODIC), 8.0))
        assert time.monotonic() - start < 8.0
        temperature = periodic["temperature"]
        assert isinstance(temperature, Unknown), temperature
        assert temperature.timeout == 0.5
        count = periodic["gpu-count"]
        assert isinstance(count, CheckResult) and (count.status, count.reason) == (Status.OK, "2 GPUs")
        disk = periodic["disk"]
        assert isinstance(disk, CheckResult) and disk.status is Status.OK  # the run went on
        # The session is hung now: the next run is answered at once, its GPU checks say so.
        start = time.monotonic()
        prolog = _by_check(Client(sock).ask(Request(Context.PROLOG, JobInfo(4)), 5.0))
        assert time.monotonic() - start < 3.0
        count = prolog["gpu-count"]
        assert isinstance(count, CheckResult) and count.status is Status.FAIL
        assert count.reason.startswith("NVML hung")
    finally:
        if proc.poll() is None:
            _stop(proc, sock)


def test_a_healthy_node_is_answered_from_the_held_session(libs: Path, tmp_path: Path) -> None:
    proc, sock = _start(libs, tmp_path, "gpus=8\nnvlinks=4\nfabric.state=3")
    try:
        first = _by_check(Client(sock).ask(Request(Context.PROLOG, JobInfo(9, (0, 1))), 8.0))
        assert {type(v) for v in first.values()} == {CheckResult}
        statuses = {v.check: v.status for v in first.values() if isinstance(v, CheckResult)}
        assert statuses["gpu-count"] is Status.OK and Status.FAIL not in statuses.values(), first
    finally:
        out = _stop(proc, sock)
    assert out.count("NVML open") == 1  # one session for every run
