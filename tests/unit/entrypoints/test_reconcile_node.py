"""reconcile-node's decisions over the recording Slurm fake: wait, lift only our drain, re-register a
stale record, and carry someone else's reason across it byte for byte."""

from __future__ import annotations

import logging

import pytest
from fakes.slurm_client import ADMIN_REASON_300, FakeSlurm
from fakes.supervisor import FakeSupervisor

from slurmpod import reasons
from slurmpod.entrypoints.daemons import CLAIM_DEADLINE, Reconciler, claim_placeholder
from slurmpod.errors import TransientError
from slurmpod.nodestate import NodeState
from slurmpod.slurm import DEFAULT_TIMEOUT, SlurmRefused

NODE = "w-0"
CONF = "CPUs=2 RealMemory=24105 CoreSpecCount=1 MemSpecLimit=23081 Features=workers,ib"
SHAPE: dict[str, object] = dict(cpus=2, real_memory=24105, specialized_cores=1, specialized_memory=23081,
                                features=("workers", "ib"))
OLD_SHAPE: dict[str, object] = {**SHAPE, "specialized_cores": 0, "features": ("workers",)}
HEALTH_REASON = reasons.health("gpu-ecc", "GPU 3 uncorrectable ECC errors: 2")


def _registers_afresh(slurm: FakeSlurm) -> FakeSupervisor:
    """A supervisor whose `start slurmd` makes slurmd register the pod's own definition."""
    return FakeSupervisor(on={"start": lambda: slurm.add_node(NODE, "IDLE", ("DYNAMIC_NORM",), "", **SHAPE)})


def test_admin_reason_fixture_is_long_and_quoted() -> None:
    assert len(ADMIN_REASON_300) == 300 and ADMIN_REASON_300.startswith('"') and ADMIN_REASON_300.endswith('"')


# --- lifting: only the predecessor's preStop drain ---


@pytest.mark.parametrize(
    ("base", "flags", "reason", "lifted"),
    [
        ("IDLE", ("DYNAMIC_NORM", "DRAIN"), reasons.POD_TERMINATING, True),
        ("IDLE", ("DYNAMIC_NORM", "DRAIN"), ADMIN_REASON_300, False),
        ("IDLE", ("DYNAMIC_NORM", "DRAIN"), HEALTH_REASON, False),
        ("IDLE", ("DYNAMIC_NORM", "DRAIN"), "slurmpod: looks like ours", False),
        ("DOWN", ("DYNAMIC_NORM",), ADMIN_REASON_300, False),
        ("IDLE", ("DYNAMIC_NORM",), "", False),
        # slurmctld dropped the DRAIN flag on re-registration but kept our reason text (seen on 24.11.5)
        ("IDLE", ("DYNAMIC_NORM",), reasons.POD_TERMINATING, True),
        ("IDLE", ("DYNAMIC_NORM",), ADMIN_REASON_300, False),
    ],
    ids=["our-drain", "admin-drain", "health-drain", "fake-prefix", "down-admin", "no-reason",
         "our-reason-flag-dropped", "admin-reason-flag-dropped"],
)
def test_only_the_lifecycle_drain_is_lifted(base: str, flags: tuple[str, ...], reason: str, lifted: bool) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, base, flags, reason, **SHAPE)
    sup = FakeSupervisor()
    assert Reconciler(slurm, sup, NODE, slurm.clock).run(CONF) == 0
    assert bool(slurm.called("resume")) is lifted
    after = slurm.nodes_by_name[NODE]
    assert after.reason == ("" if lifted else reason)
    assert after.drained is (not lifted and "DRAIN" in flags)
    assert sup.actions == []  # a matching record is never re-registered
    assert not slurm.called("delete_node")
    # Once the node is as it should be, slurmctld schedules: by the RESUME, or else by an update that changes
    # nothing (a dynamic node's registration alone does not schedule).
    assert slurm.called("ask_to_schedule") == ([] if lifted else [(NODE,)])


def test_a_failed_request_to_schedule_is_logged_and_never_fails_the_step(caplog: pytest.LogCaptureFixture) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, "IDLE", ("DYNAMIC_NORM",), "", **SHAPE)
    slurm.fail["ask_to_schedule"] = SlurmRefused("scontrol update exited 1: Invalid feature specification")
    assert Reconciler(slurm, FakeSupervisor(), NODE, slurm.clock).run(CONF) == 0
    assert "could not ask slurmctld to schedule" in caplog.text


def test_waits_however_long_the_controller_is_down() -> None:
    slurm = FakeSlurm(down_calls=400)
    slurm.add_node(NODE, "IDLE", ("DYNAMIC_NORM", "DRAIN"), reasons.POD_TERMINATING, **SHAPE)
    start = slurm.clock.now
    assert Reconciler(slurm, FakeSupervisor(), NODE, slurm.clock).run(CONF) == 0
    assert len(slurm.calls) > 400
    assert slurm.clock.now - start > 3600  # more than an hour of backoff on the fake clock
    assert max(slurm.clock.slept) <= 10.0  # backoff is capped
    assert slurm.called("resume") == [(NODE,)]
    assert slurm.nodes_by_name[NODE].reason == ""


@pytest.mark.parametrize(
    "fault",
    [TransientError("scontrol show node --json printed no JSON (Expecting value): ''"),
     TransientError("scontrol show node timed out after 10 s")],
    ids=["non-json", "hang"],
)
def test_bad_answers_are_waited_out(fault: TransientError) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, "IDLE", ("DYNAMIC_NORM", "DRAIN"), reasons.POD_TERMINATING, **SHAPE)

    class Flaky(FakeSlurm):
        left = 50

        def node(self, name: str, *, future: bool = False, timeout: float = DEFAULT_TIMEOUT) -> NodeState | None:
            if self.left:
                self.left -= 1
                raise fault
            return super().node(name, future=future, timeout=timeout)

    flaky = Flaky(clock=slurm.clock, nodes_by_name=slurm.nodes_by_name)
    Reconciler(flaky, FakeSupervisor(), NODE, flaky.clock).run(CONF)
    assert flaky.called("resume") == [(NODE,)]


def test_waits_for_slurmd_to_register() -> None:
    """No record, then UNKNOWN, then registered: nothing is done before it registered."""
    seen: list[str] = []

    class Registering(FakeSlurm):
        def node(self, name: str, *, future: bool = False, timeout: float = DEFAULT_TIMEOUT) -> NodeState | None:
            n = len(self.called("node"))
            if n == 5:
                self.add_node(NODE, "UNKNOWN", ("DYNAMIC_NORM", "DRAIN", "NOT_RESPONDING"), reasons.POD_TERMINATING,
                              **SHAPE)
            if n == 10:
                self.add_node(NODE, "IDLE", ("DYNAMIC_NORM", "DRAIN"), reasons.POD_TERMINATING,
                              **SHAPE)
            seen.append(str(self.nodes_by_name.get(NODE)))
            return super().node(name, future=future, timeout=timeout)

    slurm = Registering()
    Reconciler(slurm, FakeSupervisor(), NODE, slurm.clock).run(CONF)
    assert slurm.methods.index("resume") == 11
    assert seen[0] == "None" and seen[-1].startswith("IDLE+DRAIN")


# --- a stale record: stop slurmd, delete, start, re-apply a foreign reason ---


@pytest.mark.parametrize(
    ("base", "flags", "reason", "reapplied"),
    [
        ("IDLE", ("DYNAMIC_NORM", "DRAIN"), ADMIN_REASON_300, True),
        ("DOWN", ("DYNAMIC_NORM",), ADMIN_REASON_300, True),
        ("IDLE", ("DYNAMIC_NORM", "DRAIN"), HEALTH_REASON, True),
        ("IDLE", ("DYNAMIC_NORM", "DRAIN"), reasons.POD_TERMINATING, False),
        ("IDLE", ("DYNAMIC_NORM",), "", False),
    ],
    ids=["admin-drain-300-quoted", "down-with-admin-reason", "health-drain", "our-drain", "no-reason"],
)
def test_stale_record_is_replaced_and_foreign_reason_kept(base: str, flags: tuple[str, ...], reason: str,
                                                          reapplied: bool) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, base, flags, reason, **OLD_SHAPE)
    sup = _registers_afresh(slurm)
    order: list[str] = []
    sup.on["stop"] = lambda: order.append("stop")
    register = sup.on["start"]

    def start() -> None:
        order.append("start")
        register()

    sup.on["start"] = start
    slurm_delete = slurm.delete_node

    def delete(name: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        order.append("delete")
        slurm_delete(name, timeout=timeout)

    slurm.delete_node = delete  # type: ignore[method-assign]

    assert Reconciler(slurm, sup, NODE, slurm.clock).run(CONF) == 0
    assert order == ["stop", "delete", "start"]
    after = slurm.nodes_by_name[NODE]
    assert after.specialized_cores == 1 and after.features == ("workers", "ib")  # the pod's own definition
    if reapplied:
        assert after.reason == reason  # byte for byte: quotes, length, everything
        assert len(after.reason) == len(reason)
        assert after.held
        assert slurm.called("drain") == [(NODE, reason)]
    else:
        assert after.reason == "" and not after.held
        assert not slurm.called("drain")
    assert not slurm.called("resume")


@pytest.mark.parametrize("reason", [ADMIN_REASON_300, reasons.POD_TERMINATING, ""], ids=["admin", "ours", "none"])
def test_stale_record_with_jobs_is_never_deleted(reason: str) -> None:
    slurm = FakeSlurm()
    flags = ("DYNAMIC_NORM", "DRAIN") if reason else ("DYNAMIC_NORM",)
    slurm.add_node(NODE, "ALLOCATED", flags, reason, **OLD_SHAPE)
    slurm.add_job(9, NODE)
    sup = _registers_afresh(slurm)
    assert Reconciler(slurm, sup, NODE, slurm.clock).run(CONF) == 0
    assert sup.actions == []
    assert not slurm.called("delete_node")
    assert slurm.nodes_by_name[NODE].specialized_cores == 0  # old record kept while the job runs
    if reason != reasons.POD_TERMINATING:
        assert slurm.nodes_by_name[NODE].reason == reason


def test_stale_record_waits_out_a_controller_down_during_delete() -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, "IDLE", ("DYNAMIC_NORM", "DRAIN"), ADMIN_REASON_300, **OLD_SHAPE)
    sup = _registers_afresh(slurm)
    sup.on["stop"] = lambda: setattr(slurm, "down_calls", 300)
    Reconciler(slurm, sup, NODE, slurm.clock).run(CONF)
    assert sup.actions == [("stop", "slurmd"), ("start", "slurmd")]
    assert slurm.nodes_by_name[NODE].reason == ADMIN_REASON_300
    assert slurm.methods.count("delete_node") == 301


def test_delete_refused_still_restarts_slurmd() -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, "IDLE", ("DYNAMIC_NORM",), "", **OLD_SHAPE)
    slurm.fail["delete_node"] = SlurmRefused("scontrol delete exited 1: Node has jobs")
    sup = _registers_afresh(slurm)
    with pytest.raises(SlurmRefused):  # supervisord restarts reconcile-node; slurmd is not left stopped
        Reconciler(slurm, sup, NODE, slurm.clock).run(CONF)
    assert sup.actions == [("stop", "slurmd"), ("start", "slurmd")]


def test_no_expected_conf_never_re_registers() -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, "IDLE", ("DYNAMIC_NORM",), "", **OLD_SHAPE)
    sup = FakeSupervisor()
    Reconciler(slurm, sup, NODE, slurm.clock).run("")
    assert sup.actions == [] and not slurm.called("delete_node")


# --- a FUTURE placeholder that refused this pod's registration ---


def test_a_placeholder_that_refused_the_registration_is_replaced_by_the_pods_own_record() -> None:
    slurm = FakeSlurm()
    # What slurmctld leaves when slurmd -Z registers against a FUTURE record of another shape (seen on 24.11.5).
    slurm.add_node(NODE, "FUTURE", ("DYNAMIC_NORM", "DRAIN", "INVALID_REG"), "CoreSpec differ",
                   cpus=1, real_memory=900, features=("workers",))
    sup = _registers_afresh(slurm)
    assert Reconciler(slurm, sup, NODE, slurm.clock).run(CONF) == 0
    assert sup.actions == [("stop", "slurmd"), ("start", "slurmd")]
    assert slurm.called("delete_node") == [(NODE,)]
    after = slurm.nodes_by_name[NODE]
    assert after.base == "IDLE" and after.reason == "" and not after.drained
    assert not slurm.called("drain")  # slurmctld's "differ" reason is not carried across


@pytest.mark.parametrize(
    ("base", "flags", "refused"),
    [("FUTURE", ("DYNAMIC_NORM", "DRAIN", "INVALID_REG"), True),
     ("FUTURE", ("DYNAMIC_NORM",), False),  # not registered yet: wait, never delete
     ("IDLE", ("DYNAMIC_NORM", "INVALID_REG"), False),  # a registered record: the stale-field path
     ("IDLE", ("DYNAMIC_NORM",), False)],
    ids=["refused-placeholder", "untaken-placeholder", "registered-invalid", "registered"],
)
def test_only_a_refused_placeholder_counts_as_refused(base: str, flags: tuple[str, ...], refused: bool) -> None:
    from slurmpod.entrypoints.daemons import refused_by_placeholder

    assert refused_by_placeholder(NodeState(NODE, base, frozenset(flags))) is refused


# --- claim-placeholder: before slurmd starts ---


@pytest.mark.parametrize(
    ("base", "flags", "claimed"),
    [
        ("FUTURE", ("DYNAMIC_NORM",), True),  # the autoscaler's placeholder
        ("FUTURE", ("DYNAMIC_NORM", "DRAIN", "INVALID_REG"), True),  # one that refused an earlier slurmd
        ("IDLE", ("DYNAMIC_NORM",), False),  # an earlier pod's record: reconcile-node's to judge
        ("ALLOCATED", ("DYNAMIC_NORM",), False),
        ("DOWN", ("DYNAMIC_NORM", "NOT_RESPONDING"), False),
    ],
    ids=["placeholder", "refused-placeholder", "idle-record", "busy-record", "down-record"],
)
def test_claim_deletes_only_a_placeholder(base: str, flags: tuple[str, ...], claimed: bool) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, base, flags, "", **OLD_SHAPE)
    assert claim_placeholder(slurm, NODE, slurm.clock) is claimed
    assert (NODE not in slurm.nodes_by_name) is claimed


def test_claim_with_no_record_does_nothing_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    slurm = FakeSlurm()
    assert claim_placeholder(slurm, NODE, slurm.clock) is False
    assert not slurm.called("delete_node")
    assert "no placeholder to claim" in caplog.text


def test_a_claim_waits_out_a_controller_that_does_not_answer_yet(caplog: pytest.LogCaptureFixture) -> None:
    """slurmctld busy or not yet reachable from a pod that just started: the claim retries, and the
    placeholder is gone before slurmd starts."""
    caplog.set_level(logging.INFO)
    slurm = FakeSlurm(down_calls=4)
    slurm.add_node(NODE, "FUTURE", ("DYNAMIC_NORM",), "", **OLD_SHAPE)
    started = slurm.clock.now
    assert claim_placeholder(slurm, NODE, slurm.clock) is True
    assert NODE not in slurm.nodes_by_name
    assert slurm.clock.now - started <= CLAIM_DEADLINE
    assert "claimed the placeholder" in caplog.text


def test_a_delete_whose_answer_was_lost_counts_as_claimed() -> None:
    """The delete landed, its answer timed out: the next try finds no record, and does not delete again."""
    slurm = FakeSlurm()
    slurm.add_node(NODE, "FUTURE", ("DYNAMIC_NORM",), "", **OLD_SHAPE)
    delete = slurm.delete_node

    def lands_then_times_out(name: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        delete(name, timeout=timeout)
        raise TransientError(f"scontrol delete timed out after {timeout:g} s")

    slurm.delete_node = lands_then_times_out  # type: ignore[method-assign]
    assert claim_placeholder(slurm, NODE, slurm.clock) is True
    assert NODE not in slurm.nodes_by_name
    assert len(slurm.called("delete_node")) == 1


@pytest.mark.parametrize("hangs", [False, True], ids=["errors", "hangs"])
@pytest.mark.parametrize("method", ["node", "delete_node"])
def test_a_claim_that_fails_never_stops_slurmd_starting(method: str, hangs: bool,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    """A controller that errors or does not answer for good: retried until the claim's deadline, logged,
    and slurmd starts (reconcile-node is the way back)."""
    slurm = FakeSlurm()
    slurm.add_node(NODE, "FUTURE", ("DYNAMIC_NORM",), "", **OLD_SHAPE)
    if hangs:
        slurm.hang.add(method)
    else:
        slurm.fail[method] = TransientError("scontrol: Unable to contact slurm controller")
    started = slurm.clock.now
    assert claim_placeholder(slurm, NODE, slurm.clock) is False
    assert slurm.nodes_by_name[NODE].base == "FUTURE"
    assert slurm.clock.now - started <= CLAIM_DEADLINE
    assert len(slurm.called(method)) > 1
    assert "slurmctld did not answer" in caplog.text


def test_a_claim_slurmctld_refuses_is_not_retried(caplog: pytest.LogCaptureFixture) -> None:
    slurm = FakeSlurm()
    slurm.add_node(NODE, "FUTURE", ("DYNAMIC_NORM",), "", **OLD_SHAPE)
    slurm.fail["delete_node"] = SlurmRefused("scontrol delete exited 1: Access/permission denied")
    assert claim_placeholder(slurm, NODE, slurm.clock) is False
    assert len(slurm.called("delete_node")) == 1
    assert "placeholder not claimed" in caplog.text
