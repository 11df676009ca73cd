"""`slurmpod daemon autoscale`: one pass every ``--interval`` seconds over the nodesets whose autoscaling
is on with mode slurmpod.

A pass reads everything first: slurmctld's nodes, the demand (the pending jobs each nodeset could
serve), and each nodeset's Scale. If any read fails or times out, the pass does nothing at all: a
slurmctld or an API server that does not answer never causes a scale-out, a drain, a lift or a
scale-in. A node's idle time counts from its LastBusyTime, which slurmctld keeps in its saved state,
so a restarted autoscaler goes on where it was; a pod's time starting (not yet a Slurm node) lives in
memory only, and a restarted autoscaler waits a whole idleSeconds again for it, which errs on the side
of keeping pods.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from slurmpod import podinfo
from slurmpod import well_known as wk
from slurmpod.entrypoints.autoscale import act, decide, observe
from slurmpod.entrypoints.cluster_spec import ClusterSpec, NodeSetSpec, demand_shape, load
from slurmpod.errors import BadInput, SlurmpodError
from slurmpod.kube.seam import Kube
from slurmpod.nodestate import NodeState
from slurmpod.slurm import Placeholder, SlurmClient
from slurmpod.timing import Clock, SystemClock

log = logging.getLogger(__name__)

SLURM_READ_TIMEOUT_S = 15.0
DEFAULT_INTERVAL_S = 15.0

# Every node record (placeholders too) -> nodeset -> nodes the pending jobs it could serve ask for;
# raises TransientError when it cannot tell.
Demand = Callable[[Sequence[NodeState]], Mapping[str, int]]


def managed(spec: ClusterSpec) -> tuple[NodeSetSpec, ...]:
    """The nodesets whose replicas this daemon sets."""
    return tuple(ns for ns in spec.nodesets if ns.autoscaling.by_slurmpod)


def observe_once(kube: Kube, slurm: SlurmClient, namespace: str, nodesets: Sequence[NodeSetSpec], *,
                 demand: Demand, now: float, wall: float | None = None) -> observe.Snapshot:
    """The pass's whole input; raises the first read that failed."""
    nodes = slurm.nodes(future=True, timeout=SLURM_READ_TIMEOUT_S)  # the placeholders too
    wanted = demand(nodes)
    views = []
    for ns in nodesets:
        what = f"StatefulSet {namespace}/{ns.stateful_set}"
        views.append(observe.NodeSetView(
            ns.name, ns.stateful_set, ns.autoscaling, observe.scale(kube.get_scale(namespace, ns.stateful_set), what),
            observe.members(ns.stateful_set, nodes), observe.demand(wanted, ns.name), ns.shape))
    return observe.Snapshot(tuple(views), now, wall)


def placeholder_of(nodeset: NodeSetSpec, node: str) -> Placeholder:
    """A pod's stand-in while it does not run: the nodeset's feature and its pods' shape."""
    shape = nodeset.shape
    return Placeholder(node, (nodeset.feature,), shape.cpus, shape.real_memory_mib, shape.gpus)


class Autoscaler:
    """The passes' memory: idle timers, counters, and what each nodeset last waited for."""

    def __init__(self, kube: Kube, slurm: SlurmClient, namespace: str, nodesets: Sequence[NodeSetSpec], *,
                 demand: Demand, counters: act.Counters | None = None) -> None:
        self.kube, self.slurm, self.namespace, self.nodesets, self.demand = kube, slurm, namespace, nodesets, demand
        self.counters: act.Counters = counters if counters is not None else {}
        self.timers: dict[str, decide.Timers] = {}
        self.waiting: dict[str, str] = {}
        self._by_name = {ns.name: ns for ns in nodesets}

    def placeholder(self, nodeset: str, node: str) -> Placeholder:
        return placeholder_of(self._by_name[nodeset], node)

    def one_pass(self, now: float, wall: float | None = None) -> tuple[decide.Plan, ...]:
        """The plans carried out; none when a read failed. ``wall``: the time since the epoch, which lets a
        node first seen idle count from its LastBusyTime."""
        try:
            snap = observe_once(self.kube, self.slurm, self.namespace, self.nodesets, demand=self.demand, now=now,
                                wall=wall)
        except SlurmpodError as exc:
            log.warning("pass skipped: nothing read, nothing changed", extra={"ctx": {"err": str(exc)[:300]}})
            return ()
        executor = act.Executor(self.kube, self.slurm, self.namespace, self.counters, self.placeholder)
        plans = []
        for view in snap.nodesets:
            timers = decide.tick(view, self.timers.get(view.name, decide.Timers()), snap.now, snap.wall)
            self.timers[view.name] = timers
            plan = decide.plan(view, timers, snap.now)
            if plan.waiting != self.waiting.get(view.name, ""):
                self.waiting[view.name] = plan.waiting
                if plan.waiting:
                    log.info("waiting", extra={"ctx": {"nodeset": view.name, "replicas": view.replicas,
                                                       "demand": view.demand, "why": plan.waiting}})
            executor.apply(plan)
            plans.append(plan)
        return tuple(plans)


def run(kube: Kube, slurm: SlurmClient, namespace: str, nodesets: Sequence[NodeSetSpec], *, demand: Demand,
        counters_file: Path, interval_s: float = DEFAULT_INTERVAL_S, clock: Clock | None = None,
        passes: int | None = None, wall_clock: Callable[[], float] = time.time) -> int:
    clock = clock or SystemClock()
    scaler = Autoscaler(kube, slurm, namespace, nodesets, demand=demand, counters=act.load_counters(counters_file))
    names = [ns.name for ns in nodesets]
    done = 0
    while passes is None or done < passes:
        started = clock.monotonic()
        scaler.one_pass(started, wall_clock())
        act.write_counters(counters_file, scaler.counters, names)
        done += 1
        if passes is not None and done >= passes:
            break
        clock.sleep(max(0.0, interval_s - (clock.monotonic() - started)))
    return 0


def _demand_source(spec: ClusterSpec, client: SlurmClient) -> Demand:
    """Each managed nodeset's demand from `squeue --states=PENDING --json`, by slurmpod.demand's rules (the
    exporter computes the same numbers for slurmpod_nodeset_demand_nodes)."""
    from slurmpod import demand  # noqa: PLC0415 - the controller's alone

    shapes = [demand_shape(spec, ns) for ns in managed(spec)]

    def read(nodes: Sequence[NodeState]) -> dict[str, int]:
        jobs = client.pending_jobs(timeout=SLURM_READ_TIMEOUT_S)
        names = {n.name for n in nodes}
        return {shape.name: demand.demand_nodes(jobs, demand.with_records(shape, names)) for shape in shapes}

    return read


def main(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from slurmpod.kube import access, library  # noqa: PLC0415 - the client library: the controller's daemons' alone
    from slurmpod.slurm import CliSlurmClient  # noqa: PLC0415

    if not args.interval > 0:
        raise BadInput.one("--interval", str(args.interval), "must be a positive number of seconds")
    spec = load(Path(env.get(wk.ENV_CLUSTER_SPEC, wk.CLUSTER_SPEC_FILE)))
    nodesets = managed(spec)
    if not nodesets:
        raise BadInput.one("nodesets[].autoscaling", "", "no nodeset has autoscaling enabled with mode slurmpod")
    namespace = podinfo.identity(env).namespace
    kube = library.LibraryKube(access.in_cluster(env))
    client = CliSlurmClient()
    log.info("autoscale started", extra={"ctx": {
        "namespace": namespace, "interval_s": args.interval,
        "nodesets": ",".join(f"{ns.name}={ns.stateful_set}[{ns.autoscaling.min_replicas},"
                             f"{ns.autoscaling.max_replicas}]" for ns in nodesets)}})
    return run(kube, client, namespace, nodesets, demand=_demand_source(spec, client),
               counters_file=Path(args.counters), interval_s=args.interval)
