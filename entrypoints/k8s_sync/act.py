"""Carries out a pass's decisions. Each change gets one log line (object, reason, cause), an Event on
the pod or node it acted on, and a counter; a failed call is logged and counted, and the next pass
decides again from what it then reads. Label and condition updates mirror state, so they are logged
but raise no Event.
Ref: https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/event-v1/
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from slurmpod import well_known as wk
from slurmpod.entrypoints.k8s_sync.budget import Budget
from slurmpod.entrypoints.k8s_sync.decide import (
    Action,
    DeletePod,
    Drain,
    Mirror,
    NodeCondition,
    Plan,
    SetTaints,
    Undrain,
)
from slurmpod.entrypoints.k8s_sync.observe import WorkerPod
from slurmpod.errors import SlurmpodError
from slurmpod.kube.seam import Event, Kube, ObjectRef
from slurmpod.slurm import SlurmClient

log = logging.getLogger(__name__)

SOURCE = "slurmpod-k8s-sync"
SLURM_TIMEOUT_S = 15.0
# Counter names, for the exporter: one file, rewritten after every pass.
COUNTERS = ("passes", "passes_skipped", "drains", "undrains", "labels", "conditions", "pod_deletions",
            "node_taints", "node_untaints", "node_conditions", "remediations_deferred", "errors_kube",
            "errors_slurm", "events_failed")


def _pod_ref(pod: WorkerPod) -> ObjectRef:
    return ObjectRef("Pod", pod.name, pod.namespace, pod.uid)


class Executor:
    def __init__(self, kube: Kube, slurm: SlurmClient, counters: Counter[str], clock: Callable[[], float]) -> None:
        self._kube, self._slurm, self._counters, self._clock = kube, slurm, counters, clock

    def _event(self, about: ObjectRef, reason: str, message: str, kind: str = "Normal") -> None:
        try:
            self._kube.record_event(Event(about, reason, message, kind), SOURCE)
        except SlurmpodError as exc:
            self._counters["events_failed"] += 1
            log.warning("event not recorded", extra={"ctx": {"object": about.name, "err": str(exc)[:200]}})

    def _each(self, writes: list[tuple[str, Callable[[], None]]]) -> None:
        """Independent writes: one failing never keeps the next from being tried."""
        failed: SlurmpodError | None = None
        for counter, write in writes:
            try:
                write()
                self._counters[counter] += 1
            except SlurmpodError as exc:
                failed = exc
        if failed is not None:
            raise failed

    def _one(self, action: Action, budget: Budget) -> Budget:
        k, now = self._kube, self._clock()
        match action:
            case Drain(pod, reason, cause, was):
                self._slurm.drain(pod.name, reason, timeout=SLURM_TIMEOUT_S)
                self._counters["drains"] += 1
                log.info("drained", extra={"ctx": {"node": pod.name, "reason": reason, "cause": cause,
                                                   "was": was}})
                self._event(_pod_ref(pod), "SlurmNodeDrained", f"{reason} ({cause})")
            case Undrain(pod, reason, cause):
                self._slurm.resume(pod.name, timeout=SLURM_TIMEOUT_S)
                self._counters["undrains"] += 1
                log.info("drain lifted", extra={"ctx": {"node": pod.name, "reason": reason, "cause": cause}})
                self._event(_pod_ref(pod), "SlurmNodeResumed", f"lifted {reason!r}: {cause}")
            case Mirror(pod, state, label, condition):
                writes: list[tuple[str, Callable[[], None]]] = []
                if label:
                    writes.append(("labels", lambda: k.set_pod_labels(
                        pod.namespace, pod.name, {wk.LABEL_SLURM_STATE: state.value})))
                if condition is not None:
                    cond = condition
                    writes.append(("conditions", lambda: k.set_pod_condition(pod.namespace, pod.name, cond)))
                self._each(writes)
                log.info("pod state", extra={"ctx": {"pod": pod.name, "state": state.value,
                                                     "was": pod.labels.get(wk.LABEL_SLURM_STATE, "")}})
            case DeletePod(pod, reason):
                self._event(_pod_ref(pod), "SlurmpodRestartPod", f"deleting the pod: {reason}", "Warning")
                k.delete_pod(pod.namespace, pod.name, pod.uid)
                budget = budget.spend(now).restart(pod.name, reason)
                self._counters["pod_deletions"] += 1
                log.warning("pod deleted", extra={"ctx": {"pod": pod.name, "reason": reason,
                                                          "cause": "health remediation: restart pod"}})
            case SetTaints(node, taints, condition, cause, budgeted):
                k.set_node_taints(node.name, taints, node.resource_version)
                if budgeted:
                    budget = budget.spend(now)
                added = any(t.key == wk.TAINT_HARDWARE_FAULT for t in taints)
                self._counters["node_taints" if added else "node_untaints"] += 1
                log.warning("node tainted" if added else "node taint lifted", extra={"ctx": {
                    "node": node.name, "taint": wk.TAINT_HARDWARE_FAULT, "cause": cause}})
                ref = ObjectRef("Node", node.name)
                if added:
                    self._event(ref, "SlurmpodReplaceNode", f"tainted {wk.TAINT_HARDWARE_FAULT}: {cause}", "Warning")
                else:
                    self._event(ref, "SlurmpodNodeRepaired", f"taint {wk.TAINT_HARDWARE_FAULT} lifted: {cause}")
                if condition is not None:
                    k.set_node_condition(node.name, condition)
                    self._counters["node_conditions"] += 1
            case NodeCondition(node, condition, cause):
                k.set_node_condition(node.name, condition)
                self._counters["node_conditions"] += 1
                log.info("node condition", extra={"ctx": {"node": node.name, "condition": condition.type,
                                                          "status": condition.status, "cause": cause}})
        return budget

    def apply(self, plan: Plan, budget: Budget) -> Budget:
        """Every action in order; one failing never stops the others. Returns the budget left."""
        for action in plan.actions:
            try:
                budget = self._one(action, budget)
            except (SlurmpodError, ValueError) as exc:  # ValueError: a value the seam refused to send
                kind = "errors_slurm" if isinstance(action, Drain | Undrain) else "errors_kube"
                self._counters[kind] += 1
                log.warning("not done", extra={"ctx": {"action": type(action).__name__, "err": str(exc)[:300]}})
        if plan.deferred:
            self._counters["remediations_deferred"] += len(plan.deferred)
            log.warning("remediations deferred by the budget", extra={"ctx": {"objects": ",".join(plan.deferred)}})
        return budget


def write_counters(path: Path, counters: Counter[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({name: counters[name] for name in COUNTERS}, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)
