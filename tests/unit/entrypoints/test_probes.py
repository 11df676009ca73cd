"""Readiness per role and liveness over the recording fakes of Slurm and supervisord."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.slurm_client import FakeSlurm
from fakes.supervisor import FakeSupervisor

from slurmpod import podinfo, reasons
from slurmpod import well_known as wk
from slurmpod.entrypoints.probes import live, ready
from slurmpod.entrypoints.supervisor import ProgramStatus
from slurmpod.errors import TransientError
from slurmpod.slurm import SlurmRefused

NODE = "w-0"


@pytest.mark.parametrize(
    ("base", "flags", "reason", "ok"),
    [
        ("IDLE", ("DYNAMIC_NORM",), "", True),
        ("ALLOCATED", ("DYNAMIC_NORM",), "", True),
        ("MIXED", ("DYNAMIC_NORM",), "", True),
        ("IDLE", ("DYNAMIC_NORM", "DRAIN"), reasons.POD_TERMINATING, False),
        ("ALLOCATED", ("DYNAMIC_NORM", "DRAIN"), "admin: maintenance", False),
        ("DOWN", ("DYNAMIC_NORM",), "admin: broken PSU", False),
        ("IDLE", ("DYNAMIC_NORM", "NOT_RESPONDING"), "", False),
        ("IDLE", ("DYNAMIC_NORM", "INVALID_REG"), "", False),
        ("UNKNOWN", ("DYNAMIC_NORM",), "", False),
    ],
    ids=["idle", "allocated", "mixed", "drained-by-us", "draining-admin", "down", "not-responding", "invalid-reg",
         "unknown"],
)
def test_worker_ready_when_its_node_is_usable(base: str, flags: tuple[str, ...], reason: str, ok: bool) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, base, flags, reason)
    verdict = ready(slurm, "worker", NODE, 5.0)
    assert verdict.ok is ok
    assert NODE in verdict.why
    if reason:
        assert reason in verdict.why


def test_worker_unregistered_is_not_ready() -> None:
    verdict = ready(FakeSlurm(), "worker", NODE, 5.0)
    assert not verdict.ok and "not registered" in verdict.why


@pytest.mark.parametrize("role", ["worker", "controller", "login"])
@pytest.mark.parametrize(
    "fault",
    ["down", "hangs", "non-json", "refuses"],
)
def test_controller_trouble_is_not_ready(role: str, fault: str) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE)
    method = {"worker": "node", "controller": "ping", "login": "sinfo_summary"}[role]
    if fault == "down":
        slurm.down = True
    elif fault == "hangs":
        slurm.hang.add(method)
    elif fault == "non-json":
        slurm.fail[method] = TransientError("scontrol show node --json printed no JSON: 'garbage'")
    else:
        slurm.fail[method] = SlurmRefused("scontrol exited 1: Access/permission denied")
    verdict = ready(slurm, role, NODE, 5.0)
    assert not verdict.ok
    assert "not registered" not in verdict.why  # an error is never read as "no record"
    assert slurm.methods == [method]
    assert slurm.clock.now - 1000.0 <= 5.0  # the probe's own timeout bounds it


@pytest.mark.parametrize(("answer", "ok"), [(True, True), (False, False)], ids=["up", "down"])
def test_controller_ready_is_ping(answer: bool, ok: bool) -> None:
    slurm = FakeSlurm(ping_answer=answer)
    assert ready(slurm, "controller", "ctl-0", 5.0).ok is ok
    assert slurm.methods == ["ping"]


def test_login_ready_is_sinfo() -> None:
    slurm = FakeSlurm()
    assert ready(slurm, "login", "login-0", 5.0).ok
    assert slurm.methods == ["sinfo_summary"]


@pytest.mark.parametrize(
    ("programs", "ok", "named"),
    [
        ((("munged", "RUNNING"), ("slurmd", "RUNNING")), True, ""),
        ((("munged", "RUNNING"), ("reconcile-node", "EXITED")), True, ""),
        ((("munged", "RUNNING"), ("slurmd", "FATAL")), False, "slurmd FATAL"),
        ((("munged", "RUNNING"), ("slurmd", "BACKOFF")), False, "slurmd BACKOFF"),
        ((("munged", "UNKNOWN"), ("slurmd", "RUNNING")), False, "munged UNKNOWN"),
        ((("slurmd", "STARTING"),), True, ""),
    ],
    ids=["all-running", "one-shot-exited", "fatal", "backoff", "unknown", "starting"],
)
def test_live_from_program_states(programs: tuple[tuple[str, str], ...], ok: bool, named: str) -> None:
    sup = FakeSupervisor(programs=tuple(ProgramStatus(n, s) for n, s in programs))
    verdict = live(sup, 5.0)
    assert verdict.ok is ok
    assert named in verdict.why


def test_live_fails_when_supervisord_is_unreachable() -> None:
    verdict = live(FakeSupervisor(unreachable=True), 5.0)
    assert not verdict.ok and "supervisord" in verdict.why


@pytest.mark.parametrize(
    ("labels", "env_role", "role"),
    [
        ('slurmpod.io/role="controller"\n', None, "controller"),
        ('slurmpod.io/role="login"\napp="x"\n', "worker", "login"),
        (None, "login", "login"),
        (None, None, "worker"),
        ("not kubelet format", "controller", "controller"),
        ('app="x"\n', None, "worker"),
    ],
    ids=["label", "label-over-env", "env", "default", "malformed-labels-fall-back", "no-role-label"],
)
def test_role_of(tmp_path: Path, labels: str | None, env_role: str | None, role: str) -> None:
    if labels is not None:
        (tmp_path / wk.PODINFO_LABELS).write_text(labels)
    env = {wk.ENV_PODINFO_DIR: str(tmp_path)}
    if env_role:
        env[wk.ENV_POD_ROLE] = env_role
    assert podinfo.identity(env).role == role
