"""`slurmpod daemon health-agent` over the fake libnvidia-ml (tests/fakes/nvml), in a process of its own:
an NVML call that never returns makes its check "unknown" within the check's timeout, the answer comes
within the request's deadline, and the agent then exits to open NVML afresh in a new process; an XID
raised between jobs reaches the agent's lifetime event set."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes.gpu_libs import build, raise_xid, write_state

from slurmpod.prolog_epilog.agent import daemon, protocol
from slurmpod.prolog_epilog.agent.client import Client
from slurmpod.prolog_epilog.agent.protocol import Answer, HookAnswer, HookRequest, Request
from slurmpod.prolog_epilog.job import JobInfo
from slurmpod.prolog_epilog.result import CheckResult, Context, Status, Unknown


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.getbasetemp() / "fake-gpu-libs")


def _start(libs: Path, tmp: Path, state: str, extra_config: str = "") -> tuple[subprocess.Popen[str], Path]:
    (tmp / "kmsg").write_text("", encoding="utf-8")
    # The check's timeout (0.5 s) is below the adapter's per-call deadline (2 s): the check itself is
    # what does not return, as a check does whose call is stuck longer than the check may take.
    (tmp / "health.yaml").write_text(
        f"kernel_log: {tmp / 'kmsg'}\n"
        "checks: {temperature: {timeout: 0.5}, cuda-memory: {enabled: false}, nccl-allreduce: {enabled: false}}\n"
        + extra_config, encoding="utf-8")
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
        # Only a new process can open NVML again: having answered, the agent exits for supervisord to
        # start it afresh, and a hook asking meanwhile gets no answer (it runs the checks itself).
        out = proc.communicate(timeout=daemon.EXIT_GRACE_S + 10)[0]
        assert proc.returncode == daemon.EXIT_NVML_HUNG, out[-3000:]
        assert "the agent exits so that a new process opens NVML afresh" in out, out[-3000:]
        assert Client(sock).ask(Request(Context.PROLOG, JobInfo(5)), 2.0) is None
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


def test_an_nvml_library_gone_from_the_pod_fails_the_prolog_though_the_session_holds_it(
        libs: Path, tmp_path: Path) -> None:
    """The agent keeps the library it opened; a job or hook started after the file went cannot load
    it. The prolog then judges the node as one without NVML, and the next run after the file is back
    passes on the same session."""
    own = tmp_path / "libs"
    shutil.copytree(libs, own, symlinks=True)
    library = own / "libnvidia-ml.so.1"
    proc, sock = _start(own, tmp_path, "gpus=2", "expected_gpus: 2\n")
    try:
        library.rename(own / "libnvidia-ml.so.1.away")
        gone = _by_check(Client(sock).ask(Request(Context.PROLOG, JobInfo(21, (0, 1))), 8.0))["gpu-count"]
        (own / "libnvidia-ml.so.1.away").rename(library)
        back = _by_check(Client(sock).ask(Request(Context.PROLOG, JobInfo(22, (0, 1))), 8.0))["gpu-count"]
    finally:
        out = _stop(proc, sock)
    assert isinstance(gone, CheckResult) and gone.status is Status.FAIL, gone
    assert gone.reason == "no NVML library, 2 GPUs expected", gone
    assert isinstance(back, CheckResult) and (back.status, back.reason) == (Status.OK, "2 GPUs"), back
    assert out.count("NVML open") == 1 and f"NVML open ({library})" in out, out[-3000:]


def _hook(sock: Path, hook: str, env: dict[str, str], wait: float = 10.0) -> HookAnswer:
    """One hook request, as the thin client sends it."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(wait)
        s.connect(str(sock))
        s.sendall(protocol.encode_hook_request(HookRequest(protocol.HOOKS[hook], env, wait)))
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    answer = protocol.decode_hook_answer(data)
    assert isinstance(answer, HookAnswer), answer
    return answer


def test_an_xid_raised_between_jobs_fails_the_next_prolog_through_the_agent_and_not_without_it(
        libs: Path, tmp_path: Path) -> None:
    """The driver gives an XID only to the event sets registered when it is raised (the fake does the
    same). Raised between two jobs, and never written to the kernel log here, it reaches the agent's
    set, held since the pod started, and the next prolog fails on it; a prolog that registers its own
    set afterwards, as the hook without the agent does, cannot see it."""
    healthy = "gpus=2\nnvlinks=0\nname=NVIDIA H100 80GB HBM3\n"
    proc, sock = _start(libs, tmp_path, healthy)
    try:
        job = {"SLURM_JOB_ID": "11", "SLURMD_NODENAME": "gpu-0", "SLURM_JOB_GPUS": "0,1"}
        first = _hook(sock, "prolog", job)
        assert (first.exit_code, first.stderr) == (0, "")
        assert _hook(sock, "epilog", job).exit_code == 0
        raise_xid(tmp_path / "state", None, 1, 79)  # between the jobs: NVML only
        without = _python_prolog(libs, tmp_path, {**job, "SLURM_JOB_ID": "12"})
        assert without.returncode == 0, without.stderr  # the per-run set came too late
        second = _hook(sock, "prolog", {**job, "SLURM_JOB_ID": "12"})
    finally:
        _stop(proc, sock)
    assert second.exit_code == 1
    assert "slurmpod prolog: fail: xid: XID 79 (GPU has fallen off the bus) on GPU 1" in second.stderr


def _python_prolog(libs: Path, tmp: Path, job: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`slurmpod-prolog` with the agent switched off, over the same GPUs, config and a state dir of its
    own that has already read the kernel log (a worker whose earlier prologs ran)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "FAKE_NVML", "CUDA_"))}
    env.update(LD_LIBRARY_PATH=str(libs), FAKE_NVML_STATE=str(tmp / "state"), SLURMPOD_AUTH="slurm",
               SLURMPOD_HEALTH_AGENT_SOCKET="", SLURMPOD_HEALTH_CONFIG=str(tmp / "health.yaml"),
               SLURMPOD_HEALTH_STATE_DIR=str(tmp / "sd-python"), SLURMPOD_HEALTH_METRICS_DIR="", **job)
    (tmp / "sd-python").mkdir(exist_ok=True)
    (tmp / "sd-python" / "xid.json").write_text('{"kmsg_seq": 0}', encoding="utf-8")
    check = subprocess.run([str(Path(sys.executable).with_name("slurmpod")), "check", "run", "--context", "prolog",
                            "--json"], env=env, capture_output=True, text=True, timeout=60, check=False)
    return check
