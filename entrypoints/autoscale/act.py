"""Carries out a nodeset's plan. Each decision gets one log line (nodeset, action, from, to, nodes, why)
and its counter; a failed call is logged, and the next pass decides again from what it then reads.

A replicas change is made at the resourceVersion the pass read: when anyone changed the StatefulSet
meanwhile (a user, `helm upgrade`, another scaler), the API server answers 409 and nothing changes.
A drain or a lift reads its node again first and goes ahead only if the node is still as the plan saw
it, so a reason an admin or a health check set in between is never overwritten or lifted.
Ref: https://kubernetes.io/docs/reference/using-api/api-concepts/#conflicts
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from slurmpod import reasons
from slurmpod.entrypoints.autoscale.decide import REASON, Decision, Kind, Plan
from slurmpod.errors import SlurmpodError
from slurmpod.kube.seam import Kube
from slurmpod.nodestate import NodeState
from slurmpod.slurm import Placeholder, SlurmClient

log = logging.getLogger(__name__)

SLURM_TIMEOUT_S = 15.0

# nodeset -> action -> decisions carried out (nodes, for drain and undrain)
Counters = dict[str, dict[str, int]]


def _may_drain(node: NodeState | None) -> bool:
    """Still in service with no job, and no reason anyone holds it for."""
    return node is not None and node.usable_idle and not node.busy


def _may_lift(node: NodeState | None) -> bool:
    return node is not None and reasons.autoscale_may_lift(node)


class Executor:
    def __init__(self, kube: Kube, slurm: SlurmClient, namespace: str, counters: Counters,
                 placeholder: Callable[[str, str], Placeholder] | None = None) -> None:
        """``placeholder(nodeset, node)``: the FUTURE record for a node of that nodeset; None: make none."""
        self._kube, self._slurm, self._namespace, self._counters = kube, slurm, namespace, counters
        self._placeholder = placeholder

    def _count(self, plan: Plan, kind: Kind, n: int = 1) -> None:
        per = self._counters.setdefault(plan.nodeset, {k.value: 0 for k in Kind})
        per[kind.value] = per.get(kind.value, 0) + n

    def _log(self, plan: Plan, d: Decision, nodes: Iterable[str] = ()) -> None:
        to = d.to if d.kind in (Kind.SCALE_OUT, Kind.SCALE_IN) else plan.replicas
        log.info("autoscale", extra={"ctx": {"nodeset": plan.nodeset, "action": d.kind.value, "from": plan.replicas,
                                             "to": to, "nodes": ",".join(nodes), "why": d.why}})

    def _each(self, plan: Plan, d: Decision, ready: Callable[[NodeState | None], bool],
              change: Callable[[str], None]) -> None:
        """``change`` each node ``ready`` still says yes to when read again; one failing never stops the next."""
        done: list[str] = []
        for name in d.nodes:
            try:
                if not ready(self._slurm.node(name, timeout=SLURM_TIMEOUT_S)):
                    log.info("changed meanwhile; left as it is", extra={"ctx": {
                        "nodeset": plan.nodeset, "action": d.kind.value, "node": name}})
                    continue
                change(name)
                done.append(name)
            except (SlurmpodError, ValueError) as exc:
                log.warning("not done", extra={"ctx": {"nodeset": plan.nodeset, "action": d.kind.value, "node": name,
                                                       "err": str(exc)[:300]}})
        if done:
            self._count(plan, d.kind, len(done))
            self._log(plan, d, done)

    def _scale(self, plan: Plan, d: Decision) -> None:
        self._kube.set_scale(self._namespace, plan.stateful_set, d.to, plan.resource_version)
        self._count(plan, d.kind)
        self._log(plan, d)

    def _make_placeholders(self, plan: Plan) -> None:
        if self._placeholder is None:
            return
        made = []
        for name in plan.placeholders:
            try:
                self._slurm.create_future_node(self._placeholder(plan.nodeset, name), timeout=SLURM_TIMEOUT_S)
                made.append(name)
            except (SlurmpodError, ValueError) as exc:
                log.warning("placeholder not made", extra={"ctx": {"nodeset": plan.nodeset, "node": name,
                                                                   "err": str(exc)[:300]}})
        if made:
            log.info("placeholders made", extra={"ctx": {"nodeset": plan.nodeset, "nodes": ",".join(made)}})

    def apply(self, plan: Plan) -> None:
        """Every decision in order; one failing never stops the others. Placeholders for the ordinals left
        without a pod come last."""
        for d in plan.decisions:
            match d.kind:
                case Kind.DRAIN:
                    self._each(plan, d, _may_drain, lambda n: self._slurm.drain(n, REASON, timeout=SLURM_TIMEOUT_S))
                case Kind.UNDRAIN:
                    self._each(plan, d, _may_lift, lambda n: self._slurm.resume(n, timeout=SLURM_TIMEOUT_S))
                case Kind.SCALE_OUT | Kind.SCALE_IN:
                    try:
                        self._scale(plan, d)
                    except (SlurmpodError, ValueError) as exc:  # ValueError: a value the seam refused to send
                        log.warning("not done; decided again next pass", extra={"ctx": {
                            "nodeset": plan.nodeset, "action": d.kind.value, "from": plan.replicas, "to": d.to,
                            "err": str(exc)[:300]}})
        self._make_placeholders(plan)


def load_counters(path: Path) -> Counters:
    """What the file holds; an unreadable or garbled file counts as nothing done."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    decisions = raw.get("decisions") if isinstance(raw, dict) else None
    out: Counters = {}
    for nodeset, per in (decisions if isinstance(decisions, dict) else {}).items():
        if isinstance(nodeset, str) and isinstance(per, dict):
            out[nodeset] = {k.value: per[k.value] for k in Kind
                            if isinstance(per.get(k.value), int) and not isinstance(per.get(k.value), bool)}
    return out


def write_counters(path: Path, counters: Mapping[str, Mapping[str, int]], nodesets: Iterable[str]) -> None:
    """``{"decisions": {nodeset: {action: n}}}``, every action of every nodeset named (0 when none), replaced
    atomically so the exporter never reads half a file."""
    names = sorted({*nodesets, *counters})
    doc = {"decisions": {n: {k.value: int(counters.get(n, {}).get(k.value, 0)) for k in Kind} for n in names}}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)
