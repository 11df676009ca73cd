"""Drain, undrain and re-assert over the recording Slurm fake, by the reasons module's rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.slurm_client import FakeSlurm

from slurmpod import reasons
from slurmpod.prolog_epilog.actions import Action, act, owned_drain_check
from slurmpod.prolog_epilog.result import CheckResult, Context, Remediation, fail, ok, warn
from slurmpod.prolog_epilog.state import StateDir

NODE = "gpu-0"
BAD = (ok("gpu-count"), fail("remap", "row remap pending: GPU 1 needs a reset", Remediation.RESTART_POD))
GOOD = (ok("gpu-count"), ok("remap"))
ADMIN = "maintenance: swap PSU (ticket 42)"


def _run(slurm: FakeSlurm, state: StateDir, context: Context, results: tuple[CheckResult, ...], n: int = 3) -> Action:
    return act(context, results, node=NODE, slurm=slurm, state=state, clean_runs_to_undrain=n)


@pytest.fixture
def state(tmp_path: Path) -> StateDir:
    return StateDir(tmp_path / "state")


@pytest.mark.parametrize("context", [Context.PROLOG, Context.EPILOG], ids=["prolog", "epilog"])
def test_the_healthy_hook_path_makes_no_slurm_rpc(state: StateDir, context: Context) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE)
    assert _run(slurm, state, context, (*GOOD, warn("clocks", "slow"))) is Action.NONE
    assert slurm.calls == []


@pytest.mark.parametrize("context", [Context.PROLOG, Context.EPILOG, Context.PERIODIC],
                         ids=["prolog", "epilog", "periodic"])
def test_a_failure_drains_with_the_checks_reason(state: StateDir, context: Context) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE)
    assert _run(slurm, state, context, BAD) is Action.DRAINED
    node = slurm.nodes_by_name[NODE]
    assert node.drained
    # The remap check asks for a pod restart (a GPU reset): the reason says so for k8s-sync.
    assert node.reason == "slurmpod: remap: restart pod: row remap pending: GPU 1 needs a reset"
    assert reasons.owner(node.reason) is reasons.Owner.HEALTH


def test_startup_never_calls_slurm(state: StateDir) -> None:
    slurm = FakeSlurm()
    assert _run(slurm, state, Context.STARTUP, BAD) is Action.NONE
    assert slurm.calls == []


@pytest.mark.parametrize("results", [BAD, GOOD], ids=["failing", "clean"])
def test_an_admin_drain_is_never_touched(state: StateDir, results: tuple[CheckResult, ...]) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, flags=("DYNAMIC_NORM", "DRAIN"), reason=ADMIN)
    for _ in range(6):
        _run(slurm, state, Context.PERIODIC, results, n=1)
    assert slurm.nodes_by_name[NODE].reason == ADMIN
    assert slurm.nodes_by_name[NODE].drained
    assert slurm.called("drain") == [] and slurm.called("resume") == []


@pytest.mark.parametrize("context", [Context.PROLOG, Context.PERIODIC], ids=["prolog", "periodic"])
def test_a_failure_replaces_the_autoscalers_drain(state: StateDir, context: Context) -> None:
    """So the autoscaler, lifting its drain when demand returns, never puts a faulty node back in service."""
    slurm = FakeSlurm()
    slurm.add_node(NODE, flags=("DYNAMIC_NORM", "DRAIN"), reason=reasons.AUTOSCALE_SCALE_IN)
    assert _run(slurm, state, context, BAD) is Action.DRAINED
    node = slurm.nodes_by_name[NODE]
    assert node.drained and reasons.owner(node.reason) is reasons.Owner.HEALTH
    assert not reasons.autoscale_may_lift(node)


def test_a_clean_run_never_lifts_the_autoscalers_drain(state: StateDir) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, flags=("DYNAMIC_NORM", "DRAIN"), reason=reasons.AUTOSCALE_SCALE_IN)
    for _ in range(5):
        _run(slurm, state, Context.PERIODIC, GOOD, n=1)
    assert slurm.nodes_by_name[NODE].reason == reasons.AUTOSCALE_SCALE_IN
    assert slurm.called("drain") == [] and slurm.called("resume") == []


def test_undrain_only_after_n_clean_periodic_runs(state: StateDir) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE)
    assert _run(slurm, state, Context.PERIODIC, BAD) is Action.DRAINED
    assert [_run(slurm, state, Context.PERIODIC, GOOD) for _ in range(3)] == [
        Action.COUNTING, Action.COUNTING, Action.RESUMED]
    assert not slurm.nodes_by_name[NODE].drained
    assert slurm.nodes_by_name[NODE].reason == ""


def test_a_failure_in_between_restarts_the_count(state: StateDir) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE)
    _run(slurm, state, Context.PERIODIC, BAD)
    _run(slurm, state, Context.PERIODIC, GOOD)
    _run(slurm, state, Context.PERIODIC, GOOD)
    assert _run(slurm, state, Context.PERIODIC, BAD) is Action.KEPT
    assert [_run(slurm, state, Context.PERIODIC, GOOD) for _ in range(3)][-1] is Action.RESUMED


def test_clean_prologs_do_not_count_toward_undrain(state: StateDir) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE)
    _run(slurm, state, Context.PERIODIC, BAD)
    for _ in range(5):
        _run(slurm, state, Context.PROLOG, GOOD)
    assert _run(slurm, state, Context.PERIODIC, GOOD) is Action.COUNTING


def test_the_periodic_run_reasserts_a_lost_drain(state: StateDir) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE)
    _run(slurm, state, Context.PERIODIC, BAD)
    # slurmctld dropped the DRAIN flag when a pod of the same name re-registered
    slurm.add_node(NODE)
    assert _run(slurm, state, Context.PERIODIC, BAD) is Action.REASSERTED
    assert slurm.nodes_by_name[NODE].drained
    assert reasons.health_check_of(slurm.nodes_by_name[NODE].reason) == "remap"


def test_a_warning_never_drains(state: StateDir) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE)
    _run(slurm, state, Context.PERIODIC, (warn("clocks", "hw_slowdown"),))
    assert slurm.called("drain") == []


def test_slurm_not_answering_is_reported_not_raised(state: StateDir) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE)
    slurm.down = True
    assert _run(slurm, state, Context.PROLOG, BAD) is Action.FAILED


MEM_BAD = (ok("gpu-count"), fail("gpu-memory", "memory held: GPU 0 2048 MiB by pid 4242", Remediation.RESTART_POD))
ENABLED = frozenset({"gpu-count", "gpu-memory", "remap"})


def _periodic(slurm: FakeSlurm, state: StateDir, results: tuple[CheckResult, ...]) -> Action:
    return act(Context.PERIODIC, results, node=NODE, slurm=slurm, state=state, clean_runs_to_undrain=3,
               enabled=ENABLED)


def test_a_prolog_only_checks_drain_is_lifted_only_by_runs_that_rechecked_it(state: StateDir) -> None:
    # gpu-memory is a prolog/epilog check: periodic runs of the others alone must not return the node,
    # or the next job's prolog fails there again and the job is requeued over and over.
    slurm = FakeSlurm()
    slurm.add_node(NODE)
    assert act(Context.PROLOG, MEM_BAD, node=NODE, slurm=slurm, state=state, clean_runs_to_undrain=3,
               enabled=ENABLED) is Action.DRAINED
    assert owned_drain_check(state) == "gpu-memory"  # what the periodic run plans to re-run
    assert [_periodic(slurm, state, (ok("gpu-count"),)) for _ in range(5)] == [Action.COUNTING] * 5
    assert slurm.nodes_by_name[NODE].drained
    rechecked = (ok("gpu-count"), ok("gpu-memory"))
    assert [_periodic(slurm, state, rechecked) for _ in range(3)] == [
        Action.COUNTING, Action.COUNTING, Action.RESUMED]
    assert not slurm.nodes_by_name[NODE].drained
    assert owned_drain_check(state) is None


def test_a_drain_from_before_this_pods_state_is_rechecked_first(state: StateDir) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE)
    slurm.drain(NODE, reasons.health("gpu-memory", "memory held"))  # by the pod this one replaced
    assert owned_drain_check(state) is None
    assert _periodic(slurm, state, (ok("gpu-count"),)) is Action.COUNTING
    assert owned_drain_check(state) == "gpu-memory"
    assert [_periodic(slurm, state, (ok("gpu-count"), ok("gpu-memory"))) for _ in range(3)][-1] is Action.RESUMED


def test_a_drain_by_a_check_the_config_turned_off_is_lifted_by_clean_runs(state: StateDir) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE)
    slurm.drain(NODE, reasons.health("nccl", "bus bandwidth 12 GB/s"))
    assert [_periodic(slurm, state, GOOD) for _ in range(3)][-1] is Action.RESUMED


def test_a_periodic_restart_or_replace_failure_requeues_the_running_batch_jobs(state: StateDir) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, base="ALLOCATED")
    slurm.add_job(1, NODE)
    slurm.add_job(2, NODE, requeue=False)
    slurm.add_job(3, NODE, batch=False)
    slurm.add_job(4, "gpu-1")
    slurm.add_job(5, NODE, state="CANCELLED", completing=True)  # ended: a requeue would run it again
    replace = (fail("xid", "XID 79 on GPU 0", Remediation.REPLACE_NODE),)
    assert _run(slurm, state, Context.PERIODIC, replace) is Action.DRAINED
    assert slurm.called("requeue") == [(1,)]
    assert slurm.nodes_by_name[NODE].reason == "slurmpod: xid: replace node: XID 79 on GPU 0"


@pytest.mark.parametrize(("context", "remediation"), [
    (Context.PERIODIC, Remediation.DRAIN), (Context.PROLOG, Remediation.REPLACE_NODE),
    (Context.EPILOG, Remediation.RESTART_POD)], ids=["drain-only", "prolog", "epilog"])
def test_no_other_failure_requeues_anything(state: StateDir, context: Context, remediation: Remediation) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, base="ALLOCATED")
    slurm.add_job(1, NODE)
    assert _run(slurm, state, context, (fail("mounts", "not mounted: /data", remediation),)) is Action.DRAINED
    assert slurm.called("requeue") == []


def test_a_refused_requeue_does_not_stop_the_others(state: StateDir) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, base="ALLOCATED")
    slurm.add_job(1, NODE)
    slurm.add_job(2, NODE)
    slurm.end_when_listed.add(1)  # ends right after the listing: its requeue is refused
    assert _run(slurm, state, Context.PERIODIC, BAD) is Action.DRAINED
    assert 2 in [args[0] for args in slurm.called("requeue")]
