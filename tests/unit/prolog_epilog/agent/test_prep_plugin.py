"""slurmd's PrEp plugin (images/files/prep_slurmpod.c), built here with the host's C compiler against the
few Slurm names it uses (prep_stub/), and called as slurmd 24.11 calls it (prep_harness.c): what it asks
the agent, how it maps the answer to slurmd's return code, and its fallback to the Python hook, which
never holds slurmd past a bound and leaves nothing of the hook's behind. The images build the same
source against their own Slurm, and the cluster suite runs it in slurmd (tests/cluster/test_health_agent.py).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import ckit
import pytest

FILES = ckit.FILES
HERE = Path(__file__).parent
PROLOG_FALLBACK_S = 1.5  # built shorter than the shipped 25 s, so a hook that hangs ends the test soon
JOB = 41


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the harness, the directory of stand-in Python hooks the plugin falls back to)."""
    root = tmp_path_factory.mktemp("prep")
    hooks = root / "python-hooks"
    hooks.mkdir()
    ckit.build(root / "prep_slurmpod.so", "-fPIC", "-shared", f"-I{HERE / 'prep_stub'}", f'-DFALLBACK_DIR="{hooks}"',
               f"-DPROLOG_FALLBACK_S={PROLOG_FALLBACK_S}", str(FILES / "prep_slurmpod.c"),
               str(FILES / "slurmpod_agent_ask.c"), what="the PrEp plugin")
    harness = ckit.build(root / "prep_harness", "-rdynamic", f"-I{HERE / 'prep_stub'}", f"-I{FILES}",
                         str(HERE / "prep_harness.c"), "-ldl", what="the PrEp harness")
    return harness, hooks


def _hook(hooks: Path, name: str, body: str) -> None:
    path = hooks / name
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)


def _call(built: tuple[Path, Path], hook: str, sock: Path | str) -> tuple[int, float, list[str]]:
    """(slurmd's return code, seconds in the call, the plugin's log lines)."""
    harness, _ = built
    plugin = harness.parent / "prep_slurmpod.so"
    done = subprocess.run([str(harness), str(plugin), hook, str(JOB)], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "SLURMPOD_HEALTH_AGENT_SOCKET": str(sock),
                               "SLURMPOD_HEALTH_AGENT_WAIT": "2"}, check=True)
    *logs, last = done.stdout.splitlines()
    m = re.fullmatch(r"rc=(-?\d+) seconds=([\d.]+)", last)
    assert m, done.stdout
    return int(m[1]), float(m[2]), logs


class Agent:
    """A socket that answers one hook line with ``reply`` and keeps the requests it read."""

    def __init__(self, path: Path, reply: bytes) -> None:
        self.requests: list[dict[str, object]] = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(4)
        self.reply = reply
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while not data.endswith(b"\n"):
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                self.requests.append(json.loads(data))
                conn.sendall(self.reply)


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Callable[[bytes], Agent]]:
    made: list[Agent] = []

    def start(reply: bytes) -> Agent:
        made.append(Agent(tmp_path / f"agent{len(made)}.sock", reply))
        return made[-1]

    yield start
    for a in made:
        a.sock.close()


def _answer(code: int, stderr: bytes = b"") -> bytes:
    return f'{{"v":1,"ok":true,"exit":{code},"stderr_len":{len(stderr)}}}\n'.encode() + stderr


def test_a_healthy_prolog_is_one_request_with_the_jobs_fields_and_no_process(
        built: tuple[Path, Path], agent: Callable[[bytes], Agent], tmp_path: Path) -> None:
    _hook(built[1], "slurmpod-prolog", f"touch {tmp_path / 'python-ran'}\n")
    a = agent(_answer(0))
    rc, _, logs = _call(built, "prolog", a.sock.getsockname())
    assert (rc, logs) == (0, [])
    assert not (tmp_path / "python-ran").exists()
    (request,) = a.requests
    assert (request["hook"], request["job_fields"]) == ("prolog", False)
    assert request["env"] == {"SLURM_JOB_ID": str(JOB), "SLURM_JOBID": str(JOB), "SLURM_JOB_UID": "2000",
                              "SLURM_JOB_GID": "2000", "SLURM_SCRIPT_CONTEXT": "prolog_slurmd",
                              "SLURM_JOB_PARTITION": "main", "SLURM_JOB_NODELIST": "gpu-[0-1]",
                              "CUDA_VISIBLE_DEVICES": "0,1", "SLURM_JOB_GPUS": "0,1"}


def test_a_failing_hook_is_a_wait_status_and_its_findings_are_error_lines(
        built: tuple[Path, Path], agent: Callable[[bytes], Agent]) -> None:
    a = agent(_answer(1, b"slurmpod epilog: fail: xid: XID 79 on GPU 1\nsecond line\n"))
    rc, _, logs = _call(built, "epilog", a.sock.getsockname())
    assert os.WIFEXITED(rc) and os.WEXITSTATUS(rc) == 1
    assert logs == [f"error: prep/slurmpod: epilog job {JOB}: slurmpod epilog: fail: xid: XID 79 on GPU 1",
                    f"error: prep/slurmpod: epilog job {JOB}: second line"]
    assert a.requests[0]["env"]["SLURM_SCRIPT_CONTEXT"] == "epilog_slurmd"  # type: ignore[index]


@pytest.mark.parametrize("reply", [b'{"v":1,"ok":false,"error":"busy"}\n', b"garbage\n"], ids=["refused", "garbled"])
def test_an_agent_that_does_not_answer_hands_the_job_to_the_python_hook(
        built: tuple[Path, Path], agent: Callable[[bytes], Agent], tmp_path: Path, reply: bytes) -> None:
    seen = tmp_path / "env"
    _hook(built[1], "slurmpod-prolog", f"env > {seen}; ls /proc/$$/fd > {seen}.fds; echo checked; exit 3\n")
    rc, _, logs = _call(built, "prolog", agent(reply).sock.getsockname())
    assert os.WEXITSTATUS(rc) == 3
    assert logs[0].startswith(f"info: prep/slurmpod: prolog job {JOB}: health agent: ")
    assert logs[1:] == [f"error: prep/slurmpod: prolog job {JOB}: checked"]
    env = dict(line.split("=", 1) for line in seen.read_text(encoding="utf-8").splitlines() if "=" in line)
    assert env["SLURMPOD_HEALTH_AGENT_SOCKET"] == "" and env["SLURMPOD_JOB_FIELDS"] == "lookup"
    assert (env["SLURM_JOB_ID"], env["CUDA_VISIBLE_DEVICES"], env["SLURM_SCRIPT_CONTEXT"]) == (
        str(JOB), "0,1", "prolog_slurmd")
    assert "NOT_A_HOOK_VARIABLE" not in env
    assert "7" not in Path(f"{seen}.fds").read_text(encoding="utf-8").split()  # slurmd's (the harness's)


def test_no_socket_falls_back_without_a_word(built: tuple[Path, Path], tmp_path: Path) -> None:
    _hook(built[1], "slurmpod-prolog", "exit 0\n")
    assert _call(built, "prolog", tmp_path / "absent.sock")[::2] == (0, [])


def test_a_python_hook_that_hangs_is_killed_with_its_group_at_its_bound(
        built: tuple[Path, Path], tmp_path: Path) -> None:
    pid = tmp_path / "child.pid"
    _hook(built[1], "slurmpod-prolog", f"sleep 300 & echo $! > {pid}; sleep 300\n")
    rc, seconds, logs = _call(built, "prolog", tmp_path / "absent.sock")
    assert os.WEXITSTATUS(rc) == 1 and PROLOG_FALLBACK_S <= seconds < PROLOG_FALLBACK_S + 2
    assert logs[-1].startswith(f"error: prep/slurmpod: prolog job {JOB}: ") and "was killed" in logs[-1]
    _gone(int(pid.read_text(encoding="utf-8")))


def test_what_a_finished_hook_left_in_its_group_is_killed(built: tuple[Path, Path], tmp_path: Path) -> None:
    """As slurmd's run_command() does with a script's process group; a sweeper in a session of its own
    is not in it."""
    pid = tmp_path / "child.pid"
    _hook(built[1], "slurmpod-prolog", f"sleep 300 >/dev/null 2>&1 & echo $! > {pid}; exit 0\n")
    rc, seconds, _ = _call(built, "prolog", tmp_path / "absent.sock")
    assert rc == 0 and seconds < PROLOG_FALLBACK_S
    _gone(int(pid.read_text(encoding="utf-8")))


def _gone(pid: int) -> None:
    end = time.monotonic() + 5
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return
        if state == "Z":  # killed; init (or the test's reaper) takes it
            return
        time.sleep(0.05)
    raise AssertionError(f"pid {pid}, left in the hook's group, still runs")
