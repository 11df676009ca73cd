"""The thin hook client (images/files/slurmpod_hook.c), built here with the host's C compiler, against a
real agent socket: it exits with the agent's decision and prints its findings; it carries exactly the
SLURM* environment, byte for byte, however hostile the values; and whenever the agent does not answer
(no socket, nothing listening, silent, refusing, garbled) it runs the Python hook in its place with the
agent switched off, within the wait it was given."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import ckit
import pytest
from fakes.slurm_client import FakeSlurm

from slurmpod import nvml
from slurmpod.prolog_epilog.agent import protocol, server
from slurmpod.prolog_epilog.agent.daemon import Agent, AgentSettings
from slurmpod.prolog_epilog.agent.protocol import HookAnswer, HookRequest, Refusal, Request
from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.main import Settings
from slurmpod.prolog_epilog.result import CheckResult, Context, fail, ok
from slurmpod.timing import Deadline, SystemClock

SOURCE = ckit.FILES / "slurmpod_hook.c"
ASK = ckit.FILES / "slurmpod_agent_ask.c"
SLURMD_WAIT = Path(__file__).with_name("slurmd_wait.c")
NODE = "gpu-0"
FALLBACK_EXIT = 7
# The stand-in Python hook: says it ran, and with what agent socket setting.
FALLBACK = f"""#!/bin/sh
printf '%s|%s\\n' "$0" "${{SLURMPOD_HEALTH_AGENT_SOCKET-unset}}" >> "$(dirname "$0")/ran"
exit {FALLBACK_EXIT}
"""


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client built as the worker image builds it, its Python hooks in a directory of stand-ins."""
    root = tmp_path_factory.mktemp("hook-client")
    fallback = root / "python-hooks"
    fallback.mkdir()
    for name in ("slurmpod-prolog", "slurmpod-epilog", "slurmpod-healthcheck"):
        (fallback / name).write_text(FALLBACK, encoding="utf-8")
        (fallback / name).chmod(0o755)
    built = root / "bin" / "slurmpod-prolog"
    built.parent.mkdir()
    ckit.build(built, f'-DFALLBACK_DIR="{fallback}"', str(SOURCE), str(ASK), what="the hook client")
    for name in ("slurmpod-epilog", "slurmpod-healthcheck"):
        (built.parent / name).symlink_to(built.name)
    return built.parent


def _ran(client: Path) -> list[str]:
    path = client.parent / "python-hooks" / "ran"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    path.unlink(missing_ok=True)
    return lines


def _env(sock: Path | str, extra: dict[str, str] | None = None, wait: str = "5") -> dict[str, str]:
    """A hook's environment as slurmd gives it, pointed at ``sock``."""
    return {"PATH": "/usr/bin:/bin", "SLURMPOD_HEALTH_AGENT_SOCKET": str(sock), "SLURMPOD_HEALTH_AGENT_WAIT": wait,
            "SLURM_JOB_ID": "41", "SLURMD_NODENAME": NODE, **(extra or {})}


def _run(client: Path, hook: str, sock: Path | str, extra: dict[str, str] | None = None,
         wait: str = "5") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(client / hook)], env=_env(sock, extra, wait), capture_output=True, timeout=30,
                          check=False)


class Serving:
    """A socket served by ``handler`` on a thread, as the agent serves it."""

    def __init__(self, path: Path, handler: server.Handler) -> None:
        self.srv = server.Server(server.bind(path, gid=None), handler, frozenset({os.geteuid()}), SystemClock())
        self.thread = threading.Thread(target=self.srv.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.srv.stop()
        self.thread.join(2)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[server.Handler], Path]]:
    started: list[Serving] = []

    def start(handler: server.Handler) -> Path:
        path = tmp_path / f"agent{len(started)}.sock"
        started.append(Serving(path, handler))
        return path

    yield start
    for s in started:
        s.stop()


def _no_nvml() -> object:
    raise nvml.NvmlAbsent("no NVML library in this test")


def _agent(tmp_path: Path, verdict: Callable[[CheckEnv], CheckResult]) -> tuple[Agent, FakeSlurm]:
    settings = Settings(context=Context.PERIODIC, config_path=tmp_path / "health.yaml", state_dir=tmp_path / "state",
                        metrics_dir=None, node=NODE, expected_gpus=None, auth="", real_memory_mib=0, act=False)
    agent = Agent(settings, AgentSettings(socket=tmp_path / "agent.sock"), checks=(
        Check("temperature", frozenset(Context), verdict),), library=_no_nvml)  # type: ignore[arg-type]
    slurm = FakeSlurm()
    slurm.add_node(NODE)
    agent.use_environment({"SLURMPOD_HEALTH_CONFIG": str(tmp_path / "health.yaml"),
                           "SLURMPOD_HEALTH_STATE_DIR": str(tmp_path / "state"),
                           "SLURMPOD_HEALTH_METRICS_DIR": "", "SLURM_JOB_ID": "999"}, slurm=slurm)
    agent.open()
    return agent, slurm


def test_a_healthy_prolog_exits_0_through_the_agent_without_the_python_hook(
        client: Path, tmp_path: Path, serve: Callable[[server.Handler], Path]) -> None:
    agent, slurm = _agent(tmp_path, lambda env: ok("temperature", "41 C"))
    done = _run(client, "slurmpod-prolog", serve(agent.handle))
    assert (done.returncode, done.stderr) == (0, b"")
    assert _ran(client) == []
    assert slurm.called("drain") == []


def test_a_failing_check_in_the_agent_drains_and_the_client_exits_1_with_the_finding(
        client: Path, tmp_path: Path, serve: Callable[[server.Handler], Path]) -> None:
    agent, slurm = _agent(tmp_path, lambda env: fail("temperature", f"GPU 0 97 C in job {env.job.job_id}"))
    done = _run(client, "slurmpod-prolog", serve(agent.handle))
    assert done.returncode == 1
    # The job is the client's (41), not one the agent's own environment held (999).
    assert done.stderr.decode() == "slurmpod prolog: fail: temperature: GPU 0 97 C in job 41\n"
    assert [c[0] for c in slurm.called("drain")] == [NODE]
    assert _ran(client) == []


def test_slurmd_finds_the_hook_exited_when_its_output_ends(
        client: Path, tmp_path: Path, serve: Callable[[server.Handler], Path]) -> None:
    """slurmd sleeps 10 ms and more whenever a hook's output has ended but the hook cannot be reaped yet.
    The client's holder closes the output only once the client has exited, so slurmd never waits; the
    same client without the holder was late in 7 to 40 runs of 50 here."""
    harness = tmp_path / "slurmd-wait"
    subprocess.run([shutil.which("cc") or "gcc", "-O2", "-Wall", "-Werror", "-o", str(harness), str(SLURMD_WAIT)],
                   check=True)
    agent, _ = _agent(tmp_path, lambda env: ok("temperature", "41 C"))
    done = subprocess.run([str(harness), "50", str(client / "slurmpod-prolog")], env=_env(serve(agent.handle)),
                          capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout == "0 late, 0 failed of 50\n"
    assert _ran(client) == []


def test_each_program_name_is_its_own_hook(client: Path, serve: Callable[[server.Handler], Path]) -> None:
    seen: list[Context] = []

    def record(request: Request | HookRequest, deadline: Deadline) -> HookAnswer | Refusal:
        assert isinstance(request, HookRequest)
        seen.append(request.context)
        return HookAnswer(0)

    path = serve(record)
    for hook in ("slurmpod-prolog", "slurmpod-epilog", "slurmpod-healthcheck"):
        assert _run(client, hook, path).returncode == 0
    assert seen == [Context.PROLOG, Context.EPILOG, Context.PERIODIC]


def test_another_program_name_is_bad_input(client: Path, tmp_path: Path) -> None:
    other = tmp_path / "slurmpod-taskprolog"
    other.symlink_to(client / "slurmpod-prolog")
    done = subprocess.run([str(other)], capture_output=True, check=False)
    assert done.returncode == 2
    assert b"program name slurmpod-taskprolog is none of" in done.stderr


HOSTILE = {
    "SLURM_JOB_COMMENT": 'x","SLURMPOD_HEALTH_CONFIG":"/tmp/evil"}\n{"v":1',
    "SLURM_JOB_NAME": "back\\slash \"quoted\" \t tab \x1b[31m escape",
    "SLURM_JOB_EXTRA": "slurmpod:skip=nvlink " + "é" * 300,
    "SLURM_JOB_GPUS": "0,1",
    "CUDA_VISIBLE_DEVICES": "0,1",
    "SLURMPOD_HEALTH_CONFIG": "/tmp/evil",  # not a hook variable: the agent's own stays
    "PYTHONPATH": "/tmp/evil",
    "SLURM_lower": "not a Slurm name",
}


def test_the_request_carries_exactly_the_slurm_variables_byte_for_byte(
        client: Path, serve: Callable[[server.Handler], Path]) -> None:
    got: list[dict[str, str]] = []

    def record(request: Request | HookRequest, deadline: Deadline) -> HookAnswer | Refusal:
        assert isinstance(request, HookRequest)
        got.append(dict(request.env))
        return HookAnswer(0, "line one\nline two \"quoted\"\n")

    done = _run(client, "slurmpod-epilog", serve(record), HOSTILE)
    assert done.returncode == 0, done.stderr
    assert done.stderr == b"line one\nline two \"quoted\"\n"
    wanted = {k: v for k, v in HOSTILE.items() if k.startswith("SLURM_J") or k == "CUDA_VISIBLE_DEVICES"}
    assert got == [{**wanted, "SLURM_JOB_ID": "41", "SLURMD_NODENAME": NODE}]
    assert _ran(client) == []


def test_a_value_that_is_not_utf8_is_refused_and_the_python_hook_runs(
        client: Path, serve: Callable[[server.Handler], Path]) -> None:
    path = serve(lambda r, d: HookAnswer(0))
    env = {"PATH": "/usr/bin", "SLURMPOD_HEALTH_AGENT_SOCKET": str(path), "SLURMPOD_HEALTH_AGENT_WAIT": "5"}
    done = subprocess.run([str(client / "slurmpod-prolog")], env={**env, "SLURM_JOB_NAME": b"\xff\xfe".decode(
        "utf-8", "surrogateescape")}, capture_output=True, check=False)
    assert done.returncode == FALLBACK_EXIT
    assert b"health agent: refused; running the checks here" in done.stderr
    assert _ran(client) == [f"{client.parent / 'python-hooks' / 'slurmpod-prolog'}|"]


def test_no_socket_runs_the_python_hook_with_the_agent_off_and_says_nothing(client: Path, tmp_path: Path) -> None:
    done = _run(client, "slurmpod-healthcheck", tmp_path / "absent.sock")
    assert (done.returncode, done.stderr) == (FALLBACK_EXIT, b"")
    assert _ran(client) == [f"{client.parent / 'python-hooks' / 'slurmpod-healthcheck'}|"]


def test_an_empty_socket_setting_runs_the_python_hook(client: Path) -> None:
    assert _run(client, "slurmpod-prolog", "").returncode == FALLBACK_EXIT
    assert len(_ran(client)) == 1


def test_a_stale_socket_with_no_agent_runs_the_python_hook(client: Path, tmp_path: Path) -> None:
    stale = tmp_path / "stale.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(stale))
    s.close()  # the file stays; nothing listens: what a killed agent leaves
    done = _run(client, "slurmpod-prolog", stale)
    assert done.returncode == FALLBACK_EXIT
    assert b"health agent: Connection refused; running the checks here" in done.stderr


def test_a_silent_agent_is_given_up_on_after_the_wait(client: Path, tmp_path: Path) -> None:
    path = tmp_path / "silent.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)  # accepts (in the kernel's backlog) and never answers: a wedged agent
    try:
        start = time.monotonic()
        done = _run(client, "slurmpod-prolog", path, wait="0.5")
        took = time.monotonic() - start
    finally:
        listener.close()
    assert done.returncode == FALLBACK_EXIT
    assert b"health agent: no answer in time" in done.stderr
    assert 0.5 <= took < 10  # the wait, and a process start or two


@pytest.mark.parametrize(("answer", "said"), [
    (b'{"v":1,"ok":false,"error":"busy: another run holds the checks"}\n', b"refused"),
    (b'{"v":1,"ok":true,"exit":0}\n', b"answer not understood"),
    (b'{"v":1,"ok":true,"exit":300,"stderr_len":0}\n', b"answer not understood"),
    (b'{"v":1,"ok":true,"exit":0,"stderr_len":10}\nshort', b"answer cut short"),
    (b'{"v":1,"ok":true,"exit":0,"stderr_len":0} trailing\n', b"answer not understood"),
    (b"no newline at all", b"no answer"),
])
def test_an_answer_it_cannot_use_runs_the_python_hook(client: Path, tmp_path: Path, answer: bytes,
                                                      said: bytes) -> None:
    path = tmp_path / "odd.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def answer_once() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(protocol.MAX_REQUEST_BYTES)
            conn.sendall(answer)

    t = threading.Thread(target=answer_once, daemon=True)
    t.start()
    try:
        done = _run(client, "slurmpod-prolog", path)
    finally:
        t.join(5)
        listener.close()
    assert done.returncode == FALLBACK_EXIT
    assert b"health agent: " + said in done.stderr


def test_the_agents_own_decoder_reads_what_it_writes() -> None:
    data = protocol.encode_hook_answer(HookAnswer(1, "slurmpod prolog: fail: xid: XID 79\n"))
    assert data.startswith(b'{"v":1,"ok":true,"exit":1,"stderr_len":35}\n')
    assert protocol.decode_hook_answer(data) == HookAnswer(1, "slurmpod prolog: fail: xid: XID 79\n")
    request = HookRequest(Context.EPILOG, {"SLURM_JOB_ID": "5"}, 3.0)
    assert protocol.decode_request(protocol.encode_hook_request(request)) == request


@pytest.mark.parametrize(("line", "field"), [
    (b'{"v":1,"hook":"taskprolog","deadline_s":1,"env":{}}\n', "hook"),
    (b'{"v":1,"hook":"prolog","deadline_s":1,"env":{"PATH":"/tmp"}}\n', "env"),
    (b'{"v":1,"hook":"prolog","deadline_s":1,"env":{"SLURM_X":"a\\u0000b"}}\n', "env.SLURM_X"),
    (b'{"v":1,"hook":"prolog","deadline_s":0,"env":{}}\n', "deadline_s"),
    (b'{"v":1,"hook":"prolog","deadline_s":1,"env":[]}\n', "env"),
    (b'{"v":1,"hook":"prolog","deadline_s":1,"env":{},"extra":1}\n', "extra"),
])
def test_a_bad_hook_request_is_refused_naming_the_field(line: bytes, field: str) -> None:
    with pytest.raises(protocol.ProtocolError) as caught:
        protocol.decode_request(line)
    assert caught.value.problems[0].field == field
