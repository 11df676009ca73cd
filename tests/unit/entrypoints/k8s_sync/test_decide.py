"""k8s-sync's decisions, pass by pass, over recording fakes of the Kubernetes and Slurm seams.

Each test builds a small world (two Kubernetes nodes, one worker pod on each, their Slurm nodes), runs
real passes of the daemon, and asserts what Slurm and the API server were asked to do.
"""

from __future__ import annotations

import datetime
from collections import Counter
from pathlib import Path

import pytest
from fakes.kube import FakeKube
from fakes.slurm_client import FakeSlurm

from slurmpod import reasons
from slurmpod import well_known as wk
from slurmpod.entrypoints.cluster_spec import K8sSyncSpec
from slurmpod.entrypoints.k8s_sync import budget, daemon, decide
from slurmpod.errors import PermanentError, TransientError
from slurmpod.kube.seam import Taint

NS = "slurm"
T0 = datetime.datetime(2026, 12, 2, 4, 0, 0, tzinfo=datetime.UTC).timestamp()
SPEC = K8sSyncSpec(enabled=True, not_ready_grace_seconds=30, ready_settle_seconds=10)
TGT = daemon.target(NS, {})
K8S_CORDONED = "slurmpod: k8s: cordoned"
ADMIN = "rack 7 maintenance (admin)"


def rfc3339(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class World:
    def __init__(self, spec: K8sSyncSpec = SPEC, left: int = 10) -> None:
        self.kube, self.slurm, self.spec = FakeKube(), FakeSlurm(), spec
        self.now = T0 + 3600
        self.counters: Counter[str] = Counter()
        self.left = budget.Budget(left, 3600)
        for i in (0, 1):
            self.kube.add_node(f"n{i}")
            self.kube.add_pod(f"w-{i}", f"n{i}", namespace=NS, created=rfc3339(T0))
            self.slurm.add_node(f"w-{i}")

    def node(self, name: str) -> dict:  # type: ignore[type-arg]
        return self.kube.nodes[name]

    def set_ready(self, name: str, status: str, since: float) -> None:
        self.node(name)["status"]["conditions"] = [
            {"type": "Ready", "status": status, "lastTransitionTime": rfc3339(since)}]

    def cordon(self, name: str, on: bool = True, why: dict[str, str] | None = None) -> None:
        self.node(name)["spec"]["unschedulable"] = on
        if why is not None:
            self.node(name)["metadata"]["annotations"] = why

    def run(self, advance: float = 0.0) -> None:
        self.now += advance
        self.left = daemon.one_pass(self.kube, self.slurm, TGT, self.spec, left=self.left, counters=self.counters,
                                    clock=lambda: self.now)

    def reason(self, node: str) -> str:
        return self.slurm.nodes_by_name[node].reason

    def drained(self, node: str) -> bool:
        return self.slurm.nodes_by_name[node].drained

    def settle(self) -> None:
        """A pass that writes the pods' labels and conditions, then forget every call so far."""
        self.run()
        self.kube.calls.clear()
        self.slurm.calls.clear()
        self.kube.events.clear()
        self.counters.clear()


@pytest.fixture
def w() -> World:
    world = World()
    world.settle()
    return world


# --- Kubernetes -> Slurm: cordon ---

def test_cordon_drains_only_that_nodes_workers_and_uncordon_lifts(w: World) -> None:
    w.cordon("n0")
    w.run()
    assert (w.reason("w-0"), w.drained("w-0")) == (K8S_CORDONED, True)
    assert not w.drained("w-1") and w.reason("w-1") == ""
    assert [(e.about.kind, e.about.name, e.reason) for e in w.kube.events] == [("Pod", "w-0", "SlurmNodeDrained")]
    assert "node n0 cordoned" in w.kube.events[0].message
    w.cordon("n0", on=False)
    w.run()
    assert not w.drained("w-0") and w.reason("w-0") == ""
    assert w.counters["drains"] == 1 and w.counters["undrains"] == 1


@pytest.mark.parametrize(("annotations", "reason"), [
    ({wk.ANNOTATION_CORDON_REASON: "kernel upgrade"}, "slurmpod: k8s: cordoned: kernel upgrade"),
    ({wk.ANNOTATION_SLINKY_CORDON_REASON: "GPU ECC error"}, "slurmpod: k8s: cordoned: GPU ECC error"),
    ({wk.ANNOTATION_SLINKY_CORDON_REASON: "slinky's", wk.ANNOTATION_CORDON_REASON: "ours"},
     "slurmpod: k8s: cordoned: ours"),
    ({wk.ANNOTATION_CORDON_REASON: "   "}, K8S_CORDONED),
], ids=["ours", "slinky", "ours-first", "blank"])
def test_the_cordon_reason_annotation_names_the_why(w: World, annotations: dict[str, str], reason: str) -> None:
    w.cordon("n0", why=annotations)
    w.run()
    assert w.reason("w-0") == reason


def test_a_hostile_cordon_reason_stays_one_short_line(w: World) -> None:
    w.cordon("n0", why={wk.ANNOTATION_CORDON_REASON: "a\nState=RESUME\r\nReason=x\0" + "y" * 10_000})
    w.run()
    reason = w.reason("w-0")
    assert reason.startswith("slurmpod: k8s: cordoned: a State=RESUME Reason=x")
    assert "\n" not in reason and "\r" not in reason and len(reason) <= reasons.MAX_OWN_REASON
    assert reasons.owner(reason) is reasons.Owner.K8S


def test_a_changed_cordon_reason_updates_our_drain(w: World) -> None:
    w.cordon("n0")
    w.run()
    w.cordon("n0", why={wk.ANNOTATION_CORDON_REASON: "disk swap"})
    w.run()
    assert w.reason("w-0") == "slurmpod: k8s: cordoned: disk swap"


def test_a_lifted_drain_is_put_back_while_the_cause_lasts(w: World) -> None:
    w.cordon("n0")
    w.run()
    w.slurm.resume("w-0")  # an admin's `scontrol update state=resume`
    w.run()
    assert (w.reason("w-0"), w.drained("w-0")) == (K8S_CORDONED, True)
    assert w.counters["drains"] == 2


def test_a_reason_left_on_a_node_in_service_holds_nothing(w: World) -> None:
    """Without accounting, slurmctld 24.11 keeps a node's old reason text after RESUME: ours is not lifted
    again (nothing holds the node), and an admin's old one does not keep a cordon from draining."""
    w.slurm.add_node("w-0", flags=("DYNAMIC_NORM",), reason=K8S_CORDONED)
    w.slurm.add_node("w-1", flags=("DYNAMIC_NORM",), reason=ADMIN)
    w.run()
    assert w.slurm.called("resume") == [] and w.slurm.called("drain") == []
    cond = {c["type"]: c for c in w.kube.pods["w-1"]["status"]["conditions"]}[wk.CONDITION_SLURM_NODE]
    assert ADMIN not in cond["message"]
    w.cordon("n1")
    w.run()
    assert (w.reason("w-1"), w.drained("w-1")) == (K8S_CORDONED, True)


def test_an_admin_drain_on_a_cordoned_node_is_never_changed(w: World) -> None:
    w.slurm.drain("w-0", ADMIN)
    w.cordon("n0")
    w.run()
    assert w.reason("w-0") == ADMIN
    w.cordon("n0", on=False)
    w.run()
    assert (w.reason("w-0"), w.drained("w-0")) == (ADMIN, True)
    assert w.slurm.called("resume") == [] and w.counters["drains"] == 0


def test_an_admin_reason_put_over_ours_is_theirs_from_then_on(w: World) -> None:
    w.cordon("n0")
    w.run()
    w.slurm.drain("w-0", ADMIN)  # scontrol update state=drain reason=... over our drain
    w.cordon("n0", on=False)
    w.run()
    assert (w.reason("w-0"), w.drained("w-0")) == (ADMIN, True)


def test_a_cordon_replaces_the_autoscalers_drain_so_its_lift_never_returns_the_node(w: World) -> None:
    w.slurm.drain("w-0", reasons.AUTOSCALE_SCALE_IN)
    w.cordon("n0")
    w.run()
    assert (w.reason("w-0"), w.drained("w-0")) == (K8S_CORDONED, True)
    assert reasons.autoscale_may_lift(w.slurm.nodes_by_name["w-0"]) is False
    w.cordon("n0", on=False)
    w.run()
    assert not w.drained("w-0")  # k8s-sync's own drain, lifted by k8s-sync once the cause is gone


def test_the_autoscalers_drain_on_a_schedulable_node_is_left_alone(w: World) -> None:
    w.slurm.drain("w-0", reasons.AUTOSCALE_SCALE_IN)
    w.run()
    w.run()
    assert (w.reason("w-0"), w.drained("w-0")) == (reasons.AUTOSCALE_SCALE_IN, True)
    assert w.slurm.called("resume") == []


@pytest.mark.parametrize("reason", [
    "slurmpod: gpu.xid: replace node: XID 79 on GPU 0", "slurmpod: pod terminating",
    "slurm-operator: cordoned", "NVSentinel: GPU fell off the bus", "Not responding"],
    ids=["health", "prestop", "slinky", "nvsentinel", "slurmctld"])
def test_reasons_of_others_survive_cordon_and_uncordon(w: World, reason: str) -> None:
    w.slurm.drain("w-0", reason)
    for on in (True, False, True, False):
        w.cordon("n0", on=on)
        w.run()
        assert (w.reason("w-0"), w.drained("w-0")) == (reason, True)
    assert w.slurm.called("resume") == []


# --- Kubernetes -> Slurm: NotReady ---

def test_not_ready_drains_only_past_the_grace_period_and_lifts_after_settling(w: World) -> None:
    w.set_ready("n1", "Unknown", w.now)  # the node-lifecycle controller's status for a silent kubelet
    w.run(advance=SPEC.not_ready_grace_seconds - 1)
    assert not w.drained("w-1")
    w.run(advance=1)
    assert w.reason("w-1") == "slurmpod: k8s: node not ready"
    ready_at = w.now
    w.set_ready("n1", "True", ready_at)
    w.run(advance=SPEC.ready_settle_seconds - 1)
    assert w.drained("w-1"), "lifted before the node had settled"
    w.run(advance=1)
    assert not w.drained("w-1") and w.reason("w-1") == ""
    assert not w.drained("w-0")


def test_a_flapping_ready_condition_never_drains_and_a_drained_one_stays_drained(w: World) -> None:
    for _ in range(6):  # NotReady 20 s, Ready 5 s, again: never NotReady for the whole grace period
        w.set_ready("n0", "False", w.now)
        w.run(advance=20)
        w.set_ready("n0", "True", w.now)
        w.run(advance=5)
    assert w.slurm.called("drain") == []
    w.set_ready("n0", "False", w.now)
    w.run(advance=SPEC.not_ready_grace_seconds)
    assert w.drained("w-0")
    for _ in range(4):  # Ready only 5 s at a time: the drain stays
        w.set_ready("n0", "True", w.now)
        w.run(advance=5)
        w.set_ready("n0", "False", w.now)
        w.run(advance=5)
        assert w.drained("w-0")
    assert w.slurm.called("resume") == []


@pytest.mark.parametrize("case", ["no-ready-condition", "no-transition-time", "no-node-object", "unscheduled"])
def test_an_unknown_node_state_changes_nothing(w: World, case: str) -> None:
    w.cordon("n0")
    w.run()
    w.cordon("n0", on=False)
    if case == "no-ready-condition":
        w.node("n0")["status"]["conditions"] = []
    elif case == "no-transition-time":
        w.node("n0")["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    elif case == "no-node-object":
        del w.kube.nodes["n0"]
    else:
        w.kube.pods["w-0"]["spec"]["nodeName"] = ""
    w.run(advance=600)
    assert w.reason("w-0") == K8S_CORDONED, "lifted on an unknown state"


# --- an API server that errors or times out ---

@pytest.mark.parametrize("fault", ["down", "nodes-timeout", "pods-503", "pods-403"])
def test_an_api_server_that_fails_never_drains_or_lifts(w: World, fault: str) -> None:
    w.cordon("n0")
    w.run()  # drained, with our reason
    w.cordon("n0", on=False)  # the cause is gone, but nothing can read that
    w.cordon("n1")  # and another cause appears
    if fault == "down":
        w.kube.down = True
    elif fault == "nodes-timeout":
        w.kube.fail["list_nodes"] = TransientError("Kubernetes API list nodes: ReadTimeoutError: read timed out")
    elif fault == "pods-503":
        w.kube.fail["list_pods"] = TransientError("Kubernetes API list pods: HTTP 503")
    else:
        w.kube.fail["list_pods"] = PermanentError("Kubernetes API list pods: HTTP 403 forbidden")
    w.slurm.calls.clear()
    w.kube.calls.clear()
    for _ in range(5):
        w.run(advance=60)
    assert w.slurm.called("drain") == [] and w.slurm.called("resume") == []
    assert w.kube.writes == []
    assert (w.reason("w-0"), w.reason("w-1")) == (K8S_CORDONED, "")
    assert w.counters["passes_skipped"] == 5
    w.kube.down, w.kube.fail = False, {}
    w.run()
    assert (w.reason("w-0"), w.reason("w-1")) == ("", K8S_CORDONED)


def test_slurmctld_that_fails_gets_no_kubernetes_writes(w: World) -> None:
    w.cordon("n0")
    w.slurm.down = True
    w.run()
    assert w.kube.writes == [] and w.counters["passes_skipped"] == 1


def test_one_failed_write_does_not_stop_the_others(w: World) -> None:
    w.kube.fail["record_event"] = TransientError("Kubernetes API event: HTTP 503")
    w.kube.fail["set_pod_labels"] = PermanentError("Kubernetes API label pod: HTTP 403")
    w.cordon("n0")
    w.cordon("n1")
    w.run()
    assert w.drained("w-0") and w.drained("w-1")
    w.run()  # the pods' state is now "drained": the labels fail, the conditions go through
    assert w.counters["events_failed"] == 2 and w.counters["errors_kube"] == 2
    assert [args[1] for args in w.kube.called("set_pod_condition")] == ["w-0", "w-1"]


# --- Slurm -> Kubernetes: the pods' state ---

@pytest.mark.parametrize(("base", "flags", "reason", "label", "status", "why"), [
    ("IDLE", (), "", "idle", "True", "Idle"),
    ("MIXED", (), "", "allocated", "True", "Allocated"),
    ("ALLOCATED", (), "", "allocated", "True", "Allocated"),
    ("IDLE", ("COMPLETING",), "", "allocated", "True", "Allocated"),
    ("ALLOCATED", ("DRAIN",), ADMIN, "allocated", "False", "Draining"),
    ("IDLE", ("DRAIN",), ADMIN, "drained", "False", "Drained"),
    ("DOWN", (), "Not responding", "down", "False", "Down"),
    ("IDLE", ("NOT_RESPONDING",), "", "down", "False", "Down"),
    ("FUTURE", (), "", "down", "True", "Down"),
], ids=["idle", "mixed", "allocated", "completing", "draining", "drained", "down", "not-responding", "future"])
def test_each_pod_carries_its_slurm_state(base: str, flags: tuple[str, ...], reason: str, label: str,
                                          *, status: str, why: str) -> None:
    w = World()
    w.slurm.add_node("w-0", base=base, flags=("DYNAMIC_NORM", *flags), reason=reason)
    w.run()
    pod = w.kube.pods["w-0"]
    assert pod["metadata"]["labels"][wk.LABEL_SLURM_STATE] == label
    cond = {c["type"]: c for c in pod["status"]["conditions"]}[wk.CONDITION_SLURM_NODE]
    assert (cond["status"], cond["reason"]) == (status, why)
    assert reason in cond["message"]
    w.kube.calls.clear()
    w.run()
    assert w.kube.writes == [], "an unchanged state is written again"


def test_a_job_starting_and_ending_flips_the_label(w: World) -> None:
    w.slurm.add_node("w-1", base="ALLOCATED")
    w.run()
    assert w.kube.pods["w-1"]["metadata"]["labels"][wk.LABEL_SLURM_STATE] == "allocated"
    w.slurm.add_node("w-1", base="IDLE")
    w.run()
    assert w.kube.pods["w-1"]["metadata"]["labels"][wk.LABEL_SLURM_STATE] == "idle"
    assert w.counters["labels"] == 2


def test_pods_of_another_release_or_namespace_are_never_touched() -> None:
    w = World()
    w.kube.add_pod("w-9", "n0", namespace="other")
    w.kube.add_pod("w-8", "n0", namespace=NS, labels={wk.LABEL_INSTANCE: "theirs"})
    w.slurm.add_node("w-9")
    w.slurm.add_node("w-8")
    w.cordon("n0")
    tgt = daemon.target(NS, {wk.LABEL_INSTANCE: "ours"})
    w.kube.pods["w-0"]["metadata"]["labels"][wk.LABEL_INSTANCE] = "ours"
    daemon.one_pass(w.kube, w.slurm, tgt, SPEC, left=w.left, counters=w.counters, clock=lambda: w.now)
    assert [args[0] for args in w.slurm.called("drain")] == ["w-0"]
    assert {args[1] for args in w.kube.called("set_pod_labels")} == {"w-0"}


# --- remediation ---

RESTART = "slurmpod: gpu.xid: restart pod: XID 31 on GPU 0 (MMU fault)"
REPLACE = "slurmpod: gpu.xid: replace node: XID 79 on GPU 0 (fell off the bus)"
REMEDY = K8sSyncSpec(enabled=True, restart_pod=True, replace_node=True)


def test_remediations_are_off_unless_turned_on(w: World) -> None:
    w.slurm.add_node("w-0", flags=("DYNAMIC_NORM", "DRAIN"), reason=RESTART, reason_time=int(w.now))
    w.slurm.add_node("w-1", flags=("DYNAMIC_NORM", "DRAIN"), reason=REPLACE, reason_time=int(w.now))
    w.run()
    assert "delete_pod" not in w.kube.writes and "set_node_taints" not in w.kube.writes


def test_restart_pod_deletes_the_pod_of_a_drained_idle_node_once() -> None:
    w = World(REMEDY)
    w.slurm.add_node("w-0", base="ALLOCATED", flags=("DYNAMIC_NORM", "DRAIN"), reason=RESTART,
                     reason_time=int(w.now))
    w.run()
    assert w.kube.called("delete_pod") == [], "deleted while a job still ran"
    w.slurm.add_node("w-0", flags=("DYNAMIC_NORM", "DRAIN"), reason=RESTART, reason_time=int(w.now))
    w.run()
    assert w.kube.called("delete_pod") == [(NS, "w-0", "uid-w-0")]
    assert [e.reason for e in w.kube.events if e.about.name == "w-0"] == ["SlurmpodRestartPod"]
    # The StatefulSet's replacement registers again and re-applies the reason (a newer reason time):
    # it is left alone, one restart per fault.
    w.kube.add_pod("w-0", "n0", namespace=NS, uid="uid-w-0-new", created=rfc3339(w.now + 5))
    w.slurm.add_node("w-0", flags=("DYNAMIC_NORM", "DRAIN"), reason=RESTART, reason_time=int(w.now + 10))
    w.run(advance=60)
    assert len(w.kube.called("delete_pod")) == 1
    # A new fault (another reason) on that node is a new restart.
    again = "slurmpod: mounts: restart pod: not mounted: /datasets"
    w.slurm.add_node("w-0", flags=("DYNAMIC_NORM", "DRAIN"), reason=again, reason_time=int(w.now))
    w.run()
    assert [args[2] for args in w.kube.called("delete_pod")] == ["uid-w-0", "uid-w-0-new"]


def test_replace_node_taints_only_once_the_node_is_idle_and_lifts_when_back_in_service() -> None:
    w = World(REMEDY)
    other = Taint("example.com/other", "x", "NoSchedule")
    w.node("n1")["spec"]["taints"] = [other.as_json()]
    w.slurm.add_node("w-1", base="ALLOCATED", flags=("DYNAMIC_NORM", "DRAIN"), reason=REPLACE)
    w.run()
    assert w.kube.called("set_node_taints") == [], "tainted while the job still ran"
    w.slurm.add_node("w-1", flags=("DYNAMIC_NORM", "DRAIN"), reason=REPLACE)  # the job requeued: idle
    w.run()
    (name, taints, _rv), = w.kube.called("set_node_taints")
    assert name == "n1" and taints == (other, Taint(wk.TAINT_HARDWARE_FAULT, "gpu.xid", "NoSchedule"))
    cond = {c["type"]: c for c in w.node("n1")["status"]["conditions"]}[wk.CONDITION_HARDWARE_FAULT]
    assert (cond["status"], cond["reason"]) == ("True", "GpuXid") and "XID 79" in cond["message"]
    assert cond["message"].startswith(f"{NS}/w-1: ")
    assert [e.reason for e in w.kube.events if e.about.kind == "Node"] == ["SlurmpodReplaceNode"]
    w.run()
    assert len(w.kube.called("set_node_taints")) == 1, "tainted twice"
    w.slurm.add_node("w-1")  # repaired: the health check lifted its drain
    w.run()
    assert w.node("n1")["spec"]["taints"] == [other.as_json()]
    cond = {c["type"]: c for c in w.node("n1")["status"]["conditions"]}[wk.CONDITION_HARDWARE_FAULT]
    assert cond["status"] == "False"


def test_another_releases_workers_never_lift_a_taint_they_did_not_set() -> None:
    w = World(REMEDY)
    w.node("n1")["spec"]["taints"] = [Taint(wk.TAINT_HARDWARE_FAULT, "xid", "NoSchedule").as_json()]
    w.node("n1")["status"]["conditions"].append({
        "type": wk.CONDITION_HARDWARE_FAULT, "status": "True", "reason": "Xid",
        "message": "other-namespace/gpu-worker-0: slurmpod: xid: replace node: XID 79"})
    w.run()  # our w-1 on n1 is in service, but the fault is another release's
    assert w.kube.called("set_node_taints") == []
    w.node("n1")["status"]["conditions"] = [c for c in w.node("n1")["status"]["conditions"]
                                            if c["type"] != wk.CONDITION_HARDWARE_FAULT]
    w.run()  # no condition at all (an admin removed it): whose taint it is cannot be told
    assert w.kube.called("set_node_taints") == []


def test_a_drain_class_health_reason_asks_for_no_remediation() -> None:
    w = World(REMEDY)
    w.slurm.add_node("w-0", flags=("DYNAMIC_NORM", "DRAIN"), reason="slurmpod: mounts: not mounted: /datasets",
                     reason_time=int(w.now))
    w.slurm.add_node("w-1", flags=("DYNAMIC_NORM", "DRAIN"), reason="replace node: said an admin")
    w.run()
    assert "delete_pod" not in w.kube.writes and "set_node_taints" not in w.kube.writes


def test_the_budget_limits_remediations_across_the_cluster_and_survives_a_restart(tmp_path: Path) -> None:
    spec = K8sSyncSpec(enabled=True, restart_pod=True, replace_node=True, max_remediations=1,
                       remediation_window_seconds=3600)
    kube, slurm = FakeKube(), FakeSlurm()
    for i in (0, 1):
        kube.add_node(f"n{i}")
        kube.add_pod(f"w-{i}", f"n{i}", namespace=NS)
        slurm.add_node(f"w-{i}", flags=("DYNAMIC_NORM", "DRAIN"), reason=REPLACE)
    now = [T0]
    daemon.run(kube, slurm, TGT, spec, state_dir=tmp_path, clock=lambda: now[0], sleep=lambda s: None, passes=3)
    assert [args[0] for args in kube.called("set_node_taints")] == ["n0"]
    # A restarted daemon inside the window gets no fresh allowance.
    daemon.run(kube, slurm, TGT, spec, state_dir=tmp_path, clock=lambda: now[0] + 60, sleep=lambda s: None, passes=1)
    assert len(kube.called("set_node_taints")) == 1
    now[0] += 3601
    daemon.run(kube, slurm, TGT, spec, state_dir=tmp_path, clock=lambda: now[0], sleep=lambda s: None, passes=1)
    assert [args[0] for args in kube.called("set_node_taints")] == ["n0", "n1"]
    counters = (tmp_path / "counters.json").read_text()
    assert '"node_taints": 1' in counters


def test_a_restarted_daemon_restarts_no_pod_twice_for_one_fault(tmp_path: Path) -> None:
    spec = K8sSyncSpec(enabled=True, restart_pod=True)
    kube, slurm = FakeKube(), FakeSlurm()
    kube.add_node("n0")
    kube.add_pod("w-0", "n0", namespace=NS)
    slurm.add_node("w-0", flags=("DYNAMIC_NORM", "DRAIN"), reason=RESTART)
    daemon.run(kube, slurm, TGT, spec, state_dir=tmp_path, clock=lambda: T0, sleep=lambda s: None, passes=1)
    kube.add_pod("w-0", "n0", namespace=NS, uid="uid-new")
    daemon.run(kube, slurm, TGT, spec, state_dir=tmp_path, clock=lambda: T0 + 5, sleep=lambda s: None, passes=2)
    assert [args[2] for args in kube.called("delete_pod")] == ["uid-w-0"]
    (tmp_path / "remediations.json").write_text("{not json")  # a garbled file: nothing remembered
    assert budget.load(tmp_path / "remediations.json", 3, 60).restarted == {}


def test_the_plan_is_a_pure_function_of_its_input(w: World) -> None:
    from slurmpod.entrypoints.k8s_sync import observe

    w.cordon("n0")
    snap = daemon.observe_once(w.kube, w.slurm, TGT, w.now)
    assert decide.plan(snap, SPEC, 5) == decide.plan(snap, SPEC, 5)
    assert isinstance(snap.nodes["n0"], observe.KubeNode) and snap.nodes["n0"].unschedulable
    assert w.kube.writes == [] and w.slurm.called("drain") == []
