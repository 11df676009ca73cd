"""Hook requests from slurmd's PrEp plugin (images/files/prep_slurmpod.c): they lack the job's comment and
extra, so the agent looks the job's skip list up, and only when a check the job could skip has failed
(a healthy hook makes no RPC). A request from the hook program, which has them, never looks anything up."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.slurm_client import FakeSlurm

from slurmpod import nvml
from slurmpod import well_known as wk
from slurmpod.errors import TransientError
from slurmpod.prolog_epilog import job, main
from slurmpod.prolog_epilog.agent import protocol
from slurmpod.prolog_epilog.agent.daemon import Agent, AgentSettings
from slurmpod.prolog_epilog.agent.protocol import HookAnswer, HookRequest
from slurmpod.prolog_epilog.check import Check
from slurmpod.prolog_epilog.result import CheckResult, Context, Remediation, fail, ok
from slurmpod.timing import Deadline, SystemClock

NODE = "gpu-0"
JOB = 9


class Lookups:
    """slurmctld's view of the job's comment and extra, counting the lookups."""

    def __init__(self, comment: str = "", extra: str = "", error: Exception | None = None) -> None:
        self.fields, self.error, self.calls = (comment, extra), error, []  # type: ignore[var-annotated]

    def __call__(self, job_id: int) -> tuple[str, str]:
        self.calls.append(job_id)
        if self.error is not None:
            raise self.error
        return self.fields


def _no_nvml() -> object:
    raise nvml.NvmlAbsent("no NVML library in this test")


def _agent(tmp_path: Path, nvlink: CheckResult, lookups: Lookups, *, skippable: bool = True) -> tuple[Agent, FakeSlurm]:
    settings = main.Settings(context=Context.PERIODIC, config_path=tmp_path / "health.yaml",
                             state_dir=tmp_path / "state", metrics_dir=None, node=NODE, expected_gpus=None, auth="",
                             real_memory_mib=0, act=True)
    checks = (Check("gpu-count", frozenset(Context), lambda env: ok("gpu-count", "8 GPUs")),
              Check("nvlink", frozenset(Context), lambda env: nvlink, skippable=skippable))
    agent = Agent(settings, AgentSettings(socket=tmp_path / "agent.sock"), checks=checks,  # type: ignore[arg-type]
                  library=_no_nvml, job_fields=lookups)
    slurm = FakeSlurm()
    slurm.add_node(NODE)
    agent.use_environment({"SLURMPOD_HEALTH_CONFIG": str(tmp_path / "health.yaml"),
                           "SLURMPOD_HEALTH_STATE_DIR": str(tmp_path / "state"),
                           "SLURMPOD_HEALTH_METRICS_DIR": "", wk.ENV_POD_NAME: NODE}, slurm=slurm)
    agent.open()
    return agent, slurm


def _ask(agent: Agent, *, from_plugin: bool, env: dict[str, str] | None = None) -> HookAnswer:
    """The request the plugin sends: no SLURMD_NODENAME either (the agent's node is its pod's)."""
    request = HookRequest(Context.PROLOG, {"SLURM_JOB_ID": str(JOB), **(env or {})}, 10.0,
                          job_fields=not from_plugin)
    answer = agent.hook(request, Deadline(SystemClock(), 10))
    assert isinstance(answer, HookAnswer), answer
    return answer


BROKEN = fail("nvlink", "GPU 5 link 2 down", Remediation.RESTART_POD)


def test_a_healthy_plugin_hook_looks_nothing_up(tmp_path: Path) -> None:
    lookups = Lookups("slurmpod:skip=nvlink")
    agent, _ = _agent(tmp_path, ok("nvlink"), lookups)
    assert _ask(agent, from_plugin=True).exit_code == 0
    assert lookups.calls == []


def test_a_failed_check_the_job_skips_is_skipped_after_one_lookup(tmp_path: Path) -> None:
    lookups = Lookups("run 3 slurmpod:skip=nvlink")
    agent, slurm = _agent(tmp_path, BROKEN, lookups)
    answer = _ask(agent, from_plugin=True)
    assert answer.exit_code == 0, answer.stderr
    assert lookups.calls == [JOB]
    assert slurm.nodes_by_name[NODE].reason in ("", None)


def test_the_extra_field_counts_as_the_comment_does(tmp_path: Path) -> None:
    lookups = Lookups("", "slurmpod:skip=nvlink")
    agent, _ = _agent(tmp_path, BROKEN, lookups)
    assert _ask(agent, from_plugin=True).exit_code == 0


@pytest.mark.parametrize("lookups", [Lookups("slurmpod:skip=xid"), Lookups("no opt-out"),
                                     Lookups(error=TransientError("slurmctld did not answer"))],
                         ids=["another-check", "none", "lookup-fails"])
def test_a_failed_check_the_job_does_not_skip_fails_the_hook(tmp_path: Path, lookups: Lookups) -> None:
    agent, slurm = _agent(tmp_path, BROKEN, lookups)
    answer = _ask(agent, from_plugin=True)
    assert answer.exit_code != 0 and "GPU 5 link 2 down" in answer.stderr
    assert lookups.calls == [JOB]
    assert "GPU 5 link 2 down" in slurm.nodes_by_name[NODE].reason


def test_a_check_no_job_may_skip_is_never_looked_up(tmp_path: Path) -> None:
    lookups = Lookups("slurmpod:skip=nvlink")
    agent, _ = _agent(tmp_path, BROKEN, lookups, skippable=False)
    assert _ask(agent, from_plugin=True).exit_code != 0
    assert lookups.calls == []


def test_the_hook_programs_request_carries_the_fields_and_looks_nothing_up(tmp_path: Path) -> None:
    """The environment slurmd gave the hook program is the whole truth: no comment means no skip list."""
    lookups = Lookups("slurmpod:skip=nvlink")
    agent, _ = _agent(tmp_path, BROKEN, lookups)
    assert _ask(agent, from_plugin=False).exit_code != 0
    assert _ask(agent, from_plugin=False, env={"SLURM_JOB_COMMENT": "slurmpod:skip=nvlink"}).exit_code == 0
    assert lookups.calls == []


def test_job_fields_travel_in_the_request_and_nothing_else_sets_them() -> None:
    request = HookRequest(Context.EPILOG, {"SLURM_JOB_ID": "4"}, 15.0, job_fields=False)
    line = protocol.encode_hook_request(request)
    assert b'"job_fields":false' in line.replace(b" ", b"")
    assert protocol.decode_request(line) == request
    assert protocol.decode_request(protocol.encode_hook_request(HookRequest(Context.EPILOG, {}, 15.0))).job_fields
    with pytest.raises(protocol.ProtocolError, match="job_fields"):
        protocol.decode_request(b'{"v":1,"hook":"prolog","deadline_s":1,"job_fields":"no","env":{}}\n')
    # The marker is not a variable a request may carry: only the agent sets it, from job_fields.
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_request(b'{"v":1,"hook":"prolog","deadline_s":1,"env":{"SLURMPOD_JOB_FIELDS":"lookup"}}\n')


def test_a_hooks_environment_says_whether_the_job_fields_are_in_it() -> None:
    assert job.from_env({"SLURM_JOB_ID": "3"}).skip_known
    assert not job.from_env({"SLURM_JOB_ID": "3", wk.ENV_JOB_FIELDS: wk.JOB_FIELDS_LOOKUP}).skip_known
