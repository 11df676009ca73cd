"""The health agent's live metrics, scraped over real HTTP from prometheus_client's server: the hooks'
check outcomes and durations, when each check last passed, the XID totals by GPU and code, and the hooks
answered by exit code; label values no one can turn into a series of their own; and a port held by
someone else is bound once it is free, while the hooks go on."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.slurm_client import FakeSlurm
from prometheus_client.parser import text_string_to_metric_families

from slurmpod import nvml
from slurmpod.prolog_epilog.agent import exporter
from slurmpod.prolog_epilog.agent.daemon import Agent, AgentSettings
from slurmpod.prolog_epilog.agent.protocol import HookAnswer, HookRequest
from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.main import Settings
from slurmpod.prolog_epilog.result import CheckResult, Context, Remediation, fail, ok
from slurmpod.prolog_epilog.state import StateDir
from slurmpod.timing import Deadline, SystemClock

NODE = "gpu-0"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _no_nvml() -> object:
    raise nvml.NvmlAbsent("no NVML library in this test")


class Temperature:
    """A check whose verdict the test sets."""

    def __init__(self) -> None:
        self.verdict: CheckResult = ok("temperature", "41 C")

    def __call__(self, env: CheckEnv) -> CheckResult:
        return self.verdict


def _agent(tmp_path: Path, temperature: Temperature) -> Agent:
    settings = Settings(context=Context.PERIODIC, config_path=tmp_path / "health.yaml", state_dir=tmp_path / "state",
                        metrics_dir=None, node=NODE, expected_gpus=None, auth="", real_memory_mib=0, act=False)
    checks = (Check("temperature", frozenset(Context), temperature),
              Check("disk", frozenset(Context), lambda env: ok("disk")))
    agent = Agent(settings, AgentSettings(socket=tmp_path / "agent.sock", metrics_port=0), checks=checks,
                  library=_no_nvml)  # type: ignore[arg-type]
    slurm = FakeSlurm()
    slurm.add_node(NODE)
    agent.use_environment({"SLURMPOD_HEALTH_CONFIG": str(tmp_path / "health.yaml"),
                           "SLURMPOD_HEALTH_STATE_DIR": str(tmp_path / "state"),
                           "SLURMPOD_HEALTH_METRICS_DIR": ""}, slurm=slurm)
    agent.open()
    return agent


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Agent, Temperature, int]]:
    temperature = Temperature()
    agent = _agent(tmp_path, temperature)
    srv, _ = exporter.serve(agent.observations, agent.xid_totals, 0, addr="127.0.0.1")  # 0: any free port
    yield agent, temperature, srv.server_port
    srv.shutdown()


def _scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _hook(agent: Agent, context: Context, job_id: int) -> HookAnswer:
    answer = agent.hook(HookRequest(context, {"SLURM_JOB_ID": str(job_id), "SLURMD_NODENAME": NODE}),
                        Deadline(SystemClock(), 10))
    assert isinstance(answer, HookAnswer)
    return answer


def test_the_hooks_outcomes_are_served_live(served: tuple[Agent, Temperature, int]) -> None:
    agent, temperature, port = served
    before = time.time()
    assert _hook(agent, Context.PROLOG, 7).exit_code == 0
    got = _scrape(port)
    prolog = (("check", "temperature"), ("context", "prolog"))
    assert got[("slurmpod_health_check_status", prolog)] == 0
    assert got[("slurmpod_health_check_last_success_timestamp_seconds", prolog)] >= before
    assert ("slurmpod_health_check_duration_seconds", prolog) in got
    assert got[("slurmpod_health_last_run_timestamp_seconds", (("context", "prolog"),))] >= before
    assert got[("slurmpod_health_agent_hooks_total", (("exit_code", "0"), ("hook", "prolog")))] == 1

    passed_at = got[("slurmpod_health_check_last_success_timestamp_seconds", prolog)]
    temperature.verdict = fail("temperature", "GPU 0 97 C", Remediation.DRAIN)
    assert _hook(agent, Context.PROLOG, 8).exit_code == 1
    got = _scrape(port)
    assert got[("slurmpod_health_check_status", prolog)] == 2  # the textfile's scale: 2 is fail
    # It failed now: when it last passed stays the earlier run's time; disk passed again.
    assert got[("slurmpod_health_check_last_success_timestamp_seconds", prolog)] == passed_at
    disk = (("check", "disk"), ("context", "prolog"))
    assert got[("slurmpod_health_check_last_success_timestamp_seconds", disk)] > passed_at
    assert got[("slurmpod_health_agent_hooks_total", (("exit_code", "1"), ("hook", "prolog")))] == 1
    assert got[("slurmpod_health_agent_hooks_total", (("exit_code", "0"), ("hook", "prolog")))] == 1


def test_the_agents_own_periodic_runs_are_served(served: tuple[Agent, Temperature, int]) -> None:
    agent, _, port = served
    agent.periodic_pass()
    got = _scrape(port)
    assert got[("slurmpod_health_check_status", (("check", "temperature"), ("context", "periodic")))] == 0


def test_xid_totals_are_served_by_gpu_and_code_from_the_state_dir(served: tuple[Agent, Temperature, int],
                                                                  tmp_path: Path) -> None:
    _, _, port = served
    StateDir(tmp_path / "state").write("xid", {"totals": {"1:79": 2, "3:48": 1}})
    got = _scrape(port)
    assert got[("slurmpod_health_xid_total", (("gpu", "1"), ("xid", "79")))] == 2
    assert got[("slurmpod_health_xid_total", (("gpu", "3"), ("xid", "48")))] == 1


def test_a_hostile_state_key_stays_one_label_value(served: tuple[Agent, Temperature, int], tmp_path: Path) -> None:
    _, _, port = served
    hostile = '0"} 1\nslurmpod_health_check_status{check="x",context="prolog'
    StateDir(tmp_path / "state").write("xid", {"totals": {f"{hostile}:79": 5}})
    got = _scrape(port)
    assert got[("slurmpod_health_xid_total", (("gpu", hostile), ("xid", "79")))] == 5
    assert not any(name == "slurmpod_health_check_status" for name, _ in got)  # no series smuggled in


def test_a_taken_port_is_bound_once_free_and_the_hooks_go_on(tmp_path: Path) -> None:
    temperature = Temperature()
    agent = _agent(tmp_path, temperature)
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    stop = threading.Event()
    live = exporter.LiveMetrics(agent.observations, agent.xid_totals, port, stop, retry_s=0.05, addr="127.0.0.1")
    try:
        live.start()
        assert not live.bound.is_set()
        assert _hook(agent, Context.PROLOG, 9).exit_code == 0  # the agent does not wait for its port
        holder.close()
        assert live.bound.wait(5.0), "the freed port was not bound within 100 retries"
        assert _scrape(port)[("slurmpod_health_check_status", (("check", "temperature"), ("context", "prolog")))] == 0
    finally:
        stop.set()
        live.shutdown()
        holder.close()


def test_port_0_serves_nothing(tmp_path: Path) -> None:
    agent = _agent(tmp_path, Temperature())
    live = exporter.LiveMetrics(agent.observations, agent.xid_totals, 0, threading.Event())
    live.start()
    assert not live.bound.is_set()
