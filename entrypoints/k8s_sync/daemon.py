"""`slurmpod daemon k8s-sync`: one pass at least every ``intervalSeconds``, and one at once when a Node
changes (a watch), so a cordon reaches Slurm within about a second.

A pass reads everything first: the Nodes, this release's worker pods, and slurmctld's nodes. If any
read fails or times out, the pass does nothing at all: an API server (or slurmctld) that does not
answer never causes a drain, an undrain, a deletion or a taint.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from slurmpod import podinfo
from slurmpod import well_known as wk
from slurmpod.entrypoints.cluster_spec import K8sSyncSpec, load
from slurmpod.entrypoints.k8s_sync import act, budget, decide, observe
from slurmpod.errors import BadInput, SlurmpodError
from slurmpod.kube.seam import Kube
from slurmpod.slurm import SlurmClient

log = logging.getLogger(__name__)

SLURM_READ_TIMEOUT_S = 15.0
MIN_GAP_S = 0.5  # between two passes, however fast Nodes change (a kubelet's status updates)


@dataclass(frozen=True, slots=True)
class Target:
    """Whose pods this daemon looks after: its own namespace and release."""

    namespace: str
    selector: str


def target(namespace: str, labels: Mapping[str, str]) -> Target:
    selector = f"{wk.LABEL_ROLE}=worker"
    instance = labels.get(wk.LABEL_INSTANCE, "")
    if instance:
        selector += f",{wk.LABEL_INSTANCE}={instance}"
    return Target(namespace or "default", selector)


def observe_once(kube: Kube, slurm: SlurmClient, tgt: Target, now: float) -> observe.Snapshot:
    """The pass's whole input; raises the first read that failed."""
    nodes = observe.nodes(kube.list_nodes())
    pods = observe.pods(kube.list_pods(tgt.namespace, tgt.selector))
    # FUTURE too: a pod whose registration a placeholder refused is "down", not unknown to Slurm.
    slurm_nodes = {n.name: n for n in slurm.nodes(future=True, timeout=SLURM_READ_TIMEOUT_S)}
    return observe.Snapshot(nodes, pods, slurm_nodes, now)


def one_pass(kube: Kube, slurm: SlurmClient, tgt: Target, spec: K8sSyncSpec, *, left: budget.Budget,
             counters: Counter[str], clock: Callable[[], float]) -> budget.Budget:
    counters["passes"] += 1
    try:
        snap = observe_once(kube, slurm, tgt, clock())
    except SlurmpodError as exc:
        counters["passes_skipped"] += 1
        log.warning("pass skipped: nothing read, nothing changed", extra={"ctx": {"err": str(exc)[:300]}})
        return left
    left = left.keep_restarts({name: node.reason for name, node in snap.slurm.items()})
    plan = decide.plan(snap, spec, left.left(snap.now), left.restarted)
    return act.Executor(kube, slurm, counters, clock).apply(plan, left)


def run(kube: Kube, slurm: SlurmClient, tgt: Target, spec: K8sSyncSpec, *, state_dir: Path,
        clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
        passes: int | None = None) -> int:
    counters: Counter[str] = Counter()
    budget_file = state_dir / "remediations.json"
    left = budget.load(budget_file, spec.max_remediations, spec.remediation_window_seconds)
    done = 0
    while passes is None or done < passes:
        started = clock()
        before = left
        left = one_pass(kube, slurm, tgt, spec, left=left, counters=counters, clock=clock)
        if not left.same(before):
            budget.save(budget_file, left)
        act.write_counters(state_dir / "counters.json", counters)
        done += 1
        if passes is not None and done >= passes:
            break
        remaining = max(MIN_GAP_S, spec.interval_seconds - (clock() - started))
        try:
            changed = kube.wait_for_node_change(remaining)
        except SlurmpodError as exc:
            log.info("node watch failed; waiting out the interval", extra={"ctx": {"err": str(exc)[:200]}})
            changed = False
            sleep(max(0.0, spec.interval_seconds - (clock() - started)))
        if changed:
            sleep(MIN_GAP_S)
    return 0


def main(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from slurmpod.kube import access, library  # noqa: PLC0415 - the client library: this daemon's alone
    from slurmpod.slurm import CliSlurmClient  # noqa: PLC0415

    spec = load(Path(env.get(wk.ENV_CLUSTER_SPEC, wk.CLUSTER_SPEC_FILE)))
    if not spec.k8s_sync.enabled:
        raise BadInput.one("k8sSync.enabled", "false", "k8s-sync runs only when the cluster spec turns it on")
    me = podinfo.identity(env)
    tgt = target(me.namespace, podinfo.labels(env))
    kube = library.LibraryKube(access.in_cluster(env))
    log.info("k8s-sync started", extra={"ctx": {"namespace": tgt.namespace, "selector": tgt.selector,
                                                "interval_s": spec.k8s_sync.interval_seconds}})
    return run(kube, CliSlurmClient(), tgt, spec.k8s_sync, state_dir=Path(args.state_dir))
