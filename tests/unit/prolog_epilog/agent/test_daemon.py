"""The agent over checks declared here (no NVML: the library is absent): its schedule keeps each
check's latest verdict, a periodic request reuses fresh ones, a stuck check is "unknown" within its
timeout while the socket keeps answering, and the hooks take the same decision through the agent as
without it, or fall back to running the checks when it is down, late or garbled."""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from fakes.slurm_client import FakeClock, FakeSlurm

from slurmpod import nvml
from slurmpod.prolog_epilog import main, runner
from slurmpod.prolog_epilog.actions import Action
from slurmpod.prolog_epilog.agent import protocol, server
from slurmpod.prolog_epilog.agent.client import Client
from slurmpod.prolog_epilog.agent.daemon import Agent, AgentSettings
from slurmpod.prolog_epilog.agent.protocol import Answer, Request
from slurmpod.prolog_epilog.agent.state import Latest
from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.job import JobInfo
from slurmpod.prolog_epilog.result import CheckResult, Context, Remediation, Status, Unknown, Verdict, fail, ok
from slurmpod.timing import Deadline, SystemClock

NODE = "gpu-0"
NEVER = threading.Event()  # never set: a check waiting on it is stuck like a call into a wedged driver


def _result(v: object) -> CheckResult:
    assert isinstance(v, CheckResult), v
    return v


def _no_nvml() -> object:
    raise nvml.NvmlAbsent("no NVML library in this test")


class Counting:
    """A check whose verdict the test sets, counting its runs."""

    def __init__(self, name: str, verdict: CheckResult | None = None) -> None:
        self.name, self.runs = name, 0
        self.verdict = verdict or ok(name, "fine")

    def __call__(self, env: CheckEnv) -> CheckResult:
        self.runs += 1
        return self.verdict

    def check(self, **kw: object) -> Check:
        return Check(self.name, frozenset(Context), self, **kw)  # type: ignore[arg-type]


def _settings(tmp_path: Path, context: Context = Context.PERIODIC) -> main.Settings:
    return main.Settings(context=context, config_path=tmp_path / "health.yaml", state_dir=tmp_path / "state",
                         metrics_dir=None, node=NODE, expected_gpus=None, auth="", real_memory_mib=0, act=True)


def _agent(tmp_path: Path, checks: tuple[Check, ...], clock: object | None = None, **kw: float) -> Agent:
    return Agent(_settings(tmp_path), AgentSettings(socket=tmp_path / "agent.sock", **kw),  # type: ignore[arg-type]
                 clock=clock, checks=checks, library=_no_nvml)  # type: ignore[arg-type]


def test_the_schedule_keeps_the_latest_verdict_of_each_check(tmp_path: Path) -> None:
    clock = FakeClock()
    temp, disk = Counting("temperature"), Counting("disk")
    agent = _agent(tmp_path, (temp.check(), disk.check()), clock)
    agent.open()
    agent.periodic_pass()
    first = agent.latest.get("temperature")
    assert first is not None and _result(first.verdict).status is Status.OK
    clock.sleep(60)
    temp.verdict = fail("temperature", "GPU 0 97 C")
    agent.periodic_pass()
    now = agent.latest.snapshot()
    assert now["temperature"].verdict == dataclasses.replace(temp.verdict, duration=0.0)
    assert now["temperature"].at == first.at + 60
    assert _result(now["disk"].verdict).status is Status.OK
    assert (temp.runs, disk.runs) == (2, 2)


def test_a_periodic_request_reuses_fresh_verdicts_and_runs_stale_ones(tmp_path: Path) -> None:
    clock = FakeClock()
    temp = Counting("temperature")
    agent = _agent(tmp_path, (temp.check(),), clock, max_age_s=120.0)
    agent.open()
    agent.periodic_pass()
    clock.sleep(30)
    answer = agent.answer(Request(Context.PERIODIC), Deadline(clock, 10))
    assert isinstance(answer, Answer)
    assert (temp.runs, answer.verdicts[0].age_s) == (1, 30.0)
    clock.sleep(100)  # 130 s old: run again
    answer = agent.answer(Request(Context.PERIODIC), Deadline(clock, 10))
    assert isinstance(answer, Answer)
    assert (temp.runs, answer.verdicts[0].age_s) == (2, 0.0)


class _SlowLatest(Latest):
    """Records a run's verdicts only after a while, as a loaded node might: a request waiting for the
    run must still find them."""

    def record(self, verdicts: Iterable[Verdict], at: float) -> None:
        time.sleep(0.3)
        super().record(verdicts, at)


def test_a_periodic_request_that_waited_for_the_scheduled_run_reuses_its_verdicts(tmp_path: Path) -> None:
    entered, release = threading.Event(), threading.Event()
    runs = []

    def gated(env: CheckEnv) -> CheckResult:
        runs.append(1)
        entered.set()
        release.wait(5)
        return ok("gated", "fine")

    agent = _agent(tmp_path, (Check("gated", frozenset(Context), gated, timeout=5),))
    agent.latest = _SlowLatest()
    agent.open()
    scheduled = threading.Thread(target=agent.periodic_pass)
    scheduled.start()
    assert entered.wait(5)
    answers: list[object] = []
    waiting = threading.Thread(target=lambda: answers.append(
        agent.answer(Request(Context.PERIODIC), Deadline(SystemClock(), 10))))
    waiting.start()
    time.sleep(0.2)  # the request reaches the run lock the scheduled run holds
    release.set()
    scheduled.join(5)
    waiting.join(10)
    assert len(runs) == 1, "the waiting request ran the checks again"
    answer = answers[0]
    assert isinstance(answer, Answer) and _result(answer.verdicts[0].verdict).status is Status.OK


def test_a_prolog_request_runs_its_checks_for_its_job(tmp_path: Path) -> None:
    temp = Counting("temperature")
    agent = _agent(tmp_path, (temp.check(), Check("nvlink", frozenset(Context), temp, skippable=True)))
    agent.open()
    agent.periodic_pass()
    answer = agent.answer(Request(Context.PROLOG, JobInfo(7, (), frozenset({"nvlink"}))), Deadline(SystemClock(), 5))
    assert isinstance(answer, Answer)
    assert [(a.verdict.check, _result(a.verdict).status) for a in answer.verdicts] == [("temperature", Status.OK),
                                                                              ("nvlink", Status.SKIPPED)]
    assert temp.runs == 3  # both in the periodic pass; in the prolog, temperature only (the job skips nvlink)
    assert answer.job_id == 7


def _stuck(env: CheckEnv) -> CheckResult:
    NEVER.wait()
    return ok("stuck")


@pytest.fixture
def listening(tmp_path: Path) -> Iterator[tuple[Agent, Path]]:
    checks = (Check("stuck", frozenset(Context), _stuck, timeout=0.3), Counting("disk").check())
    agent = _agent(tmp_path, checks)
    agent.open()
    path = tmp_path / "agent.sock"
    srv = server.Server(server.bind(path, gid=None), agent.answer, frozenset({os.geteuid()}),
                        SystemClock())
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield agent, path
    srv.stop()
    thread.join(2)


def test_a_stuck_check_is_unknown_within_its_timeout_and_the_socket_keeps_answering(
        listening: tuple[Agent, Path]) -> None:
    _, path = listening
    results: list[tuple[float, Answer | None]] = []

    def ask() -> None:
        start = time.monotonic()
        got = Client(path).ask(Request(Context.PERIODIC, JobInfo(1)), 3.0)
        results.append((time.monotonic() - start, got))

    askers = [threading.Thread(target=ask) for _ in range(2)]  # at once: the second waits for the run lock
    for t in askers:
        t.start()
    for t in askers:
        t.join(5)
    assert len(results) == 2
    for took, answer in results:
        assert answer is not None and took < 3.0
        stuck = answer.verdicts[0].verdict
        assert isinstance(stuck, Unknown) and stuck.timeout == pytest.approx(0.3)
        assert _result(answer.verdicts[1].verdict).status is Status.OK  # the run went on after it
        # the hook's decision: the runner's "timed out" failure, as without the agent
        assert runner.resolve(stuck) == fail("stuck", "timed out after 0.3 s", Remediation.DRAIN,
                                             duration=stuck.duration)


# --- the hooks: same decision through the agent, or without it ---

def _checks(broken: bool) -> tuple[Check, ...]:
    remap = fail("remap", "row remap pending: GPU 1", Remediation.RESTART_POD) if broken else ok("remap")
    return (Counting("gpu-count", ok("gpu-count", "8 GPUs")).check(), Counting("remap", remap).check())


def _hook(tmp_path: Path, checks: tuple[Check, ...], agent: main.AgentClient | None,
          *, in_process: bool = True) -> tuple[main.Report, FakeSlurm]:
    slurm = FakeSlurm()
    slurm.add_node(NODE)

    def libraries(planned: tuple[runner.Planned, ...]) -> None:
        if not in_process:
            raise AssertionError("the hook ran the checks itself although the agent answered")

    report = main.execute(_settings(tmp_path, Context.PROLOG), {"SLURM_JOB_ID": "5"}, slurm=slurm,
                          checks=checks, libraries=libraries, agent=agent)
    return report, slurm


def _decision(report: main.Report, slurm: FakeSlurm) -> tuple[object, ...]:
    return (report.exit_code, report.action, slurm.nodes_by_name[NODE].reason,
            [(r.check, r.status, r.reason, r.remediation) for r in report.results])


class Garbled:
    """A socket that answers ``reply`` (or nothing, holding the connection) to any line."""

    def __init__(self, path: Path, reply: bytes | None) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(4)
        self.reply = reply
        self.held: list[socket.socket] = []
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.recv(4096)
            if self.reply is None:
                self.held.append(conn)  # never answers
            else:
                conn.sendall(self.reply)
                conn.close()


@pytest.mark.parametrize("broken", [True, False], ids=["failing", "healthy"])
@pytest.mark.parametrize("agent_is", ["absent", "stale-socket", "garbled", "late", "refusing"])
def test_a_hook_whose_agent_does_not_answer_decides_as_without_one(tmp_path: Path, broken: bool,
                                                                   agent_is: str) -> None:
    today = _decision(*_hook(tmp_path / "today", _checks(broken), None))
    path = tmp_path / "agent.sock"
    if agent_is == "stale-socket":
        server.bind(path, gid=None).close()
    elif agent_is != "absent":
        reply = {"garbled": b'{"v": 1, "ok": true, "verdicts": "all fine"}\n', "late": None,
                 "refusing": protocol.encode_answer(protocol.Refusal("busy"))}[agent_is]
        Garbled(path, reply)
    start = time.monotonic()
    report, slurm = _hook(tmp_path / "fallback", _checks(broken), Client(path))
    assert _decision(report, slurm) == today
    # prolog deadline 20 s: the hook waits at most half of it for the agent
    assert time.monotonic() - start < (main.AGENT_SHARE * 20 + 2 if agent_is == "late" else 2)


@pytest.mark.parametrize("broken", [True, False], ids=["failing", "healthy"])
def test_a_hook_fed_by_the_agent_decides_as_without_it(tmp_path: Path, broken: bool) -> None:
    today = _decision(*_hook(tmp_path / "today", _checks(broken), None))
    agent = _agent(tmp_path / "agent", _checks(broken))
    agent.open()
    path = tmp_path / "agent.sock"
    srv = server.Server(server.bind(path, gid=None), agent.answer, frozenset({os.geteuid()}),
                        SystemClock())
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    try:
        report, slurm = _hook(tmp_path / "via-agent", _checks(broken), Client(path), in_process=False)
    finally:
        srv.stop()
    assert _decision(report, slurm) == today
    if broken:
        assert slurm.nodes_by_name[NODE].reason == "slurmpod: remap: restart pod: row remap pending: GPU 1"
        assert report.action is Action.DRAINED
