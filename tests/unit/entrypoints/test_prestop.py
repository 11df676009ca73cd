"""preStop's decisions over the recording Slurm fake: what it drains, requeues, keeps and deletes.

Every case runs on the fake clock with a grace period of GRACE seconds; preStop must return inside it
whatever the controller does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from fakes.slurm_client import ADMIN_REASON_300, FakeClock, FakeSlurm
from fakes.supervisor import FakeSupervisor

from slurmpod import reasons
from slurmpod.entrypoints import prestop
from slurmpod.errors import TransientError
from slurmpod.slurm import SlurmRefused

NODE = "w-0"
GRACE = 60.0
HEALTH_REASON = reasons.health("gpu-ecc", "GPU 3 uncorrectable ECC errors: 2")


def _run(slurm: FakeSlurm, sup: FakeSupervisor | None = None) -> tuple[prestop.Report, FakeSupervisor]:
    sup = sup or FakeSupervisor()
    start = slurm.clock.now
    report = prestop.run(slurm, sup, NODE, GRACE, clock=slurm.clock)
    # Whatever happened, preStop returned inside the grace period, with time left for supervisord.
    assert slurm.clock.now - start <= GRACE - prestop.RESERVE_SECONDS + 1.0
    return report, sup


def test_admin_reason_fixture_is_long_and_quoted() -> None:
    assert len(ADMIN_REASON_300) == 300 and ADMIN_REASON_300[0] == ADMIN_REASON_300[-1] == '"'


# --- who holds the node: ours is drained and deleted, someone else's is kept ---


@dataclass(frozen=True)
class Hold:
    base: str
    flags: tuple[str, ...]
    reason: str
    drains: bool  # preStop drains with its own reason
    deletes: bool


HOLDS = [
    Hold("IDLE", ("DYNAMIC_NORM",), "", drains=True, deletes=True),
    Hold("IDLE", ("DYNAMIC_NORM", "DRAIN"), reasons.POD_TERMINATING, drains=True, deletes=True),
    Hold("DOWN", ("DYNAMIC_NORM", "NOT_RESPONDING"), "Not responding", drains=True, deletes=True),
    Hold("IDLE", ("DYNAMIC_NORM", "DRAIN"), ADMIN_REASON_300, drains=False, deletes=False),
    Hold("IDLE", ("DYNAMIC_NORM", "DRAIN"), HEALTH_REASON, drains=False, deletes=False),
    Hold("DOWN", ("DYNAMIC_NORM",), ADMIN_REASON_300, drains=False, deletes=False),
    # The autoscaler's scale-in: the pod goes as it asked, and leaves no node record behind.
    Hold("IDLE", ("DYNAMIC_NORM", "DRAIN"), reasons.AUTOSCALE_SCALE_IN, drains=True, deletes=True),
]


@pytest.mark.parametrize("hold", HOLDS, ids=["free", "our-old-drain", "slurmctld-not-responding", "admin-drain",
                                             "health-drain", "down-with-admin-reason", "autoscale-scale-in"])
def test_hold_decides_drain_and_delete(hold: Hold) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, hold.base, hold.flags, hold.reason)
    report, sup = _run(slurm)
    assert report.reached_controller and report.record
    assert report.drained is hold.drains
    assert bool(slurm.called("drain")) is hold.drains
    assert report.deleted is hold.deletes
    assert (NODE not in slurm.nodes_by_name) is hold.deletes
    if not hold.drains:
        assert report.kept_reason == hold.reason
        assert slurm.nodes_by_name[NODE].reason == hold.reason  # byte for byte
    else:
        assert slurm.called("drain") == [(NODE, reasons.POD_TERMINATING)]
    assert sup.actions == [("stop", "slurmd")]
    assert report.errors == []


def test_delete_comes_after_slurmd_stopped_and_node_emptied() -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE)
    order: list[str] = []
    sup = FakeSupervisor(on={"stop": lambda: order.append(f"stop after {slurm.methods[-1]}")})
    _run(slurm, sup)
    assert order == ["stop after jobs_on_node"]
    assert slurm.methods[-1] == "delete_node"


def test_no_record_is_not_drained_nor_deleted() -> None:
    slurm = FakeSlurm()
    report, sup = _run(slurm)
    assert report.reached_controller and not report.record
    assert slurm.methods == ["node"]
    assert not report.deleted
    assert sup.actions == [("stop", "slurmd")]


# --- the jobs on the node ---


def _batch(slurm: FakeSlurm, job_id: int) -> None:
    slurm.add_job(job_id, NODE)


def _interactive(slurm: FakeSlurm, job_id: int) -> None:
    slurm.add_job(job_id, NODE, batch=False)


def _no_requeue(slurm: FakeSlurm, job_id: int) -> None:
    slurm.add_job(job_id, NODE, requeue=False)


def _ends_meanwhile(slurm: FakeSlurm, job_id: int) -> None:
    slurm.add_job(job_id, NODE)
    slurm.end_when_listed.add(job_id)


def _completing(slurm: FakeSlurm, job_id: int) -> None:
    # Cancelled by its user, its epilog still running: slurmctld would accept a requeue and run it again.
    slurm.add_job(job_id, NODE, state="CANCELLED", completing=True)


def _lingers(slurm: FakeSlurm, job_id: int) -> None:
    slurm.add_job(job_id, NODE)
    slurm.linger_polls = 10**6  # a requeued job whose epilog never ends


@dataclass(frozen=True)
class JobCase:
    make: Callable[[FakeSlurm, int], None]
    requeued: bool
    reported: str  # a fragment of the not-requeued reason, "" when requeued
    emptied: bool


JOBS = [
    JobCase(_batch, requeued=True, reported="", emptied=True),
    JobCase(_interactive, requeued=False, reported="not a batch job", emptied=False),
    JobCase(_no_requeue, requeued=False, reported="disabled", emptied=False),
    JobCase(_ends_meanwhile, requeued=False, reported="already finished", emptied=True),
    JobCase(_lingers, requeued=True, reported="", emptied=False),
    JobCase(_completing, requeued=False, reported="completing", emptied=False),
]


@pytest.mark.parametrize("case", JOBS, ids=["batch", "interactive", "no-requeue", "ended-meanwhile", "lingers",
                                            "completing"])
def test_each_job_is_requeued_or_reported(case: JobCase) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, "ALLOCATED")
    case.make(slurm, 42)
    report, _ = _run(slurm)
    assert report.drained
    assert report.requeued == ([42] if case.requeued else [])
    if case.reported:
        assert case.reported in report.not_requeued[42]
    else:
        assert report.not_requeued == {}
    assert report.emptied is case.emptied
    # Deleted only once emptied (and drained by us); a job still there keeps the node record.
    assert report.deleted is case.emptied
    assert (NODE in slurm.nodes_by_name) is not case.emptied
    # Requeued jobs are made eligible at once only when the node emptied.
    assert report.released is (case.requeued and case.emptied)
    assert bool(slurm.called("start_now")) is report.released


def test_mixed_jobs_are_each_handled_and_node_kept() -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, "MIXED")
    _batch(slurm, 1)
    _batch(slurm, 2)
    _interactive(slurm, 3)
    _no_requeue(slurm, 4)
    report, _ = _run(slurm)
    assert report.requeued == [1, 2]
    assert set(report.not_requeued) == {3, 4}
    assert not report.deleted and NODE in slurm.nodes_by_name


def test_batch_jobs_are_released_together() -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, "ALLOCATED")
    _batch(slurm, 7)
    _batch(slurm, 8)
    report, _ = _run(slurm)
    assert slurm.called("start_now") == [((7, 8),)]
    assert slurm.jobs[7].start_now and slurm.jobs[8].start_now
    assert report.deleted


# --- a job of several nodes: slurmctld requeues it only when its other nodes are done with it ---


def test_release_waits_until_slurmctld_has_requeued_the_job() -> None:
    """A release sent while the job still completes elsewhere would be overwritten by the requeue's own
    begin time, and the job would wait out the hold after all."""
    slurm = FakeSlurm(requeue_lists=5)
    slurm.add_node(NODE, "ALLOCATED")
    _batch(slurm, 7)
    report, _ = _run(slurm)
    assert report.requeues_done and report.released and report.errors == []
    assert slurm.released_early == []
    assert slurm.methods.count("job_states") == 6  # five answers COMPLETING, the sixth PENDING
    assert set(slurm.called("job_states")) == {((7,),)}  # only the requeued job is asked for, never the queue
    assert "job_list" not in slurm.methods
    # the node went first: the wait holds back neither slurmd's stop nor the node's deletion
    assert slurm.methods.index("delete_node") < slurm.methods.index("job_states")
    assert slurm.methods[-1] == "start_now"


def test_a_requeue_that_never_finishes_is_released_at_the_deadline_and_reported() -> None:
    slurm = FakeSlurm(requeue_lists=10**6)
    slurm.add_node(NODE, "ALLOCATED")
    _batch(slurm, 7)
    report, _ = _run(slurm)  # returns inside the grace period
    assert report.deleted and report.released and not report.requeues_done
    assert any("still completing" in e for e in report.errors), report.errors


@pytest.mark.parametrize("fault", ["hangs", "non-json", "refuses"])
def test_an_unreadable_queue_delays_the_release_but_never_past_the_deadline(fault: str) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, "ALLOCATED")
    _batch(slurm, 7)
    FAULTS[fault](slurm, "job_states")
    report, _ = _run(slurm)
    assert report.deleted and report.released and not report.requeues_done
    assert slurm.methods[-1] == "start_now"


# --- a controller that is down, hangs, returns garbage or refuses, at each step ---


def _down(slurm: FakeSlurm, method: str) -> None:
    slurm.down_at = method


def _hangs(slurm: FakeSlurm, method: str) -> None:
    slurm.hang.add(method)


def _garbage(slurm: FakeSlurm, method: str) -> None:
    slurm.fail[method] = TransientError("scontrol show node --json printed no JSON (Expecting value): 'Segm'")


def _refuses(slurm: FakeSlurm, method: str) -> None:
    slurm.fail[method] = SlurmRefused("scontrol exited 1: Access/permission denied")


FAULTS = {"down": _down, "hangs": _hangs, "non-json": _garbage, "refuses": _refuses}


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("reason", ["", ADMIN_REASON_300], ids=["no-reason", "admin-reason"])
def test_unreadable_node_is_left_alone(fault: str, reason: str) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, "IDLE", ("DYNAMIC_NORM", "DRAIN") if reason else ("DYNAMIC_NORM",), reason)
    _batch(slurm, 5)
    FAULTS[fault](slurm, "node")
    report, sup = _run(slurm)
    # "No answer" is never "no record": nothing drained, requeued, overwritten or deleted.
    assert not report.reached_controller and not report.record
    assert not (set(slurm.methods) & {"drain", "requeue", "delete_node", "start_now"})
    assert slurm.nodes_by_name[NODE].reason == reason
    assert not report.deleted and report.errors
    assert sup.actions == [("stop", "slurmd")]  # slurmd still stops: kubelet's SIGTERM comes next


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_drain_failing_means_nothing_deleted(fault: str) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, "ALLOCATED")
    _batch(slurm, 5)
    FAULTS[fault](slurm, "drain")
    report, sup = _run(slurm)
    assert report.reached_controller and not report.drained
    assert not report.deleted and NODE in slurm.nodes_by_name
    assert report.errors
    assert sup.actions == [("stop", "slurmd")]


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_job_list_failing_means_nothing_deleted(fault: str) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, "ALLOCATED")
    _batch(slurm, 5)
    FAULTS[fault](slurm, "jobs_on_node")
    report, _ = _run(slurm)
    assert report.drained and not report.requeued
    assert not report.emptied and not report.deleted
    assert report.errors


@pytest.mark.parametrize("fault", ["down", "hangs", "non-json"])
def test_requeue_not_answered_keeps_the_node(fault: str) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, "ALLOCATED")
    _batch(slurm, 5)
    FAULTS[fault](slurm, "requeue")
    report, _ = _run(slurm)
    assert report.drained and report.requeued == []
    assert not report.deleted and NODE in slurm.nodes_by_name
    assert any("requeue 5" in e for e in report.errors)


def test_requeue_refused_is_reported_and_the_rest_goes_on() -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, "ALLOCATED")
    _batch(slurm, 5)
    _batch(slurm, 6)
    slurm.fail["requeue"] = SlurmRefused("scontrol requeue exited 1: Job is pending execution")
    report, _ = _run(slurm)
    assert set(report.not_requeued) == {5, 6}
    assert "pending execution" in report.not_requeued[5]


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_release_failing_is_reported(fault: str) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, "ALLOCATED")
    _batch(slurm, 5)
    FAULTS[fault](slurm, "start_now")
    report, _ = _run(slurm)
    assert report.requeued == [5] and report.emptied and not report.released
    assert report.errors


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_delete_failing_is_reported(fault: str) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE)
    FAULTS[fault](slurm, "delete_node")
    report, _ = _run(slurm)
    assert report.drained and report.emptied and not report.deleted
    assert NODE in slurm.nodes_by_name
    assert slurm.nodes_by_name[NODE].reason == reasons.POD_TERMINATING  # the next pod lifts it
    assert report.errors


def test_controller_back_within_the_grace_period() -> None:
    slurm = FakeSlurm(down_calls=20)
    slurm.add_node(NODE, "ALLOCATED")
    _batch(slurm, 5)
    report, _ = _run(slurm)
    assert report.drained and report.requeued == [5] and report.deleted
    assert report.errors == []


def test_slurmd_not_stopped_when_asked() -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE)
    sup = FakeSupervisor()
    report = prestop.run(slurm, sup, NODE, GRACE, clock=slurm.clock, stop_slurmd=False)
    assert sup.actions == [] and report.drained and not report.deleted


def test_tiny_grace_still_bounded() -> None:
    clock = FakeClock()
    slurm = FakeSlurm(clock=clock)
    slurm.hang.add("node")
    start = clock.now
    report = prestop.run(slurm, FakeSupervisor(), NODE, 2.0, clock=clock)
    assert not report.reached_controller
    assert clock.now - start <= 2.0
