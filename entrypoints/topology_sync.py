"""The controller's topology: rendered at pod start, then kept in sync as worker pods come and go.

`controller_files` renders topology.conf (Slurm 24.11) or topology.yaml (25.05+) for the start plan,
before slurmctld starts. `daemon topology-sync`, supervised beside slurmctld, then compares every
``syncIntervalSeconds``: it re-renders from the same source and, only when the text changed, writes the
file and runs `scontrol reconfigure` (slurmctld reads topology files only at start and reconfigure).
Sources (cluster.yaml `topology.source`): `slurm` reads the placements workers registered
(topology/extra_placements.py); `api` reads node labels and worker pods from the Kubernetes API (slurmpod.kube).
Ref: https://slurm.schedmd.com/topology.html ; https://slurm.schedmd.com/scontrol.html#OPT_reconfigure
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from slurmpod import podinfo, reasons, slurm_version
from slurmpod import well_known as wk
from slurmpod.entrypoints.cluster_spec import ClusterSpec, TopologyPlugin, TopologySource, load
from slurmpod.errors import BadInput, SlurmpodError, TransientError
from slurmpod.kube import access
from slurmpod.kube.seam import Kube
from slurmpod.nodestate import NodeState
from slurmpod.slurm import CliSlurmClient, SlurmClient
from slurmpod.slurm_version import SlurmVersion
from slurmpod.timing import Clock, SystemClock
from slurmpod.topology import annotation, extra_placements, kube, sync
from slurmpod.topology.model import Format, Provider

log = logging.getLogger(__name__)

STEP_TIMEOUT = 30.0
WORKER_SELECTOR = f"{wk.LABEL_ROLE}=worker"  # one scontrol call; a reconfigure of a busy controller takes a few seconds


class Source(Protocol):
    def read(self) -> tuple[tuple[kube.KubeNode, ...], tuple[kube.WorkerPod, ...] | None]: ...


class SlurmSource:
    """Placements the workers registered (`slurmd --extra`); Slurm nodes are slurmctld's nodes."""

    def __init__(self, client: SlurmClient) -> None:
        self._client = client

    def read(self) -> tuple[tuple[kube.KubeNode, ...], tuple[kube.WorkerPod, ...] | None]:
        return extra_placements.kube_nodes(self._client.nodes(timeout=STEP_TIMEOUT)), None


class ApiSource:
    """Kubernetes node labels and the worker pods of ``namespace``, from the API."""

    def __init__(self, api: Kube, namespace: str) -> None:
        self._api, self._namespace = api, namespace

    def read(self) -> tuple[tuple[kube.KubeNode, ...], tuple[kube.WorkerPod, ...] | None]:
        nodes = kube.parse_nodes(self._api.list_nodes(), source="API nodes")
        pods = kube.parse_worker_pods(self._api.list_pods(self._namespace, WORKER_SELECTOR), source="API pods")
        return nodes, pods


@dataclass(frozen=True, slots=True)
class Target:
    """What to render and where: the file this Slurm version reads, with the cluster spec's settings."""

    path: Path
    settings: sync.Settings
    version: SlurmVersion


def target(spec: ClusterSpec, version: SlurmVersion) -> Target | None:
    """None when the cluster spec asks for no topology plugin."""
    if spec.topology_plugin is TopologyPlugin.NONE:
        return None
    if spec.topology_plugin is TopologyPlugin.BLOCK and not version.node_topology:
        # Seen with Debian's 24.11.5: a configless dynamic slurmd reads topology.conf knowing no other
        # node, counts every other block short and exits: "fatal: Block configuration (b1) children
        # count lower than bblock_node_cnt". topology/tree only warns about the names it cannot resolve.
        raise BadInput.one("topologyPlugin", "block", f"Slurm {version.major}.{version.minor}'s slurmd on "
                           "dynamic nodes exits on topology/block; use tree, or Slurm 25.05 or later")
    t = spec.topology
    # The slurm source carries each worker's own value (path or topo:unit): the generic form.
    provider = Provider.GENERIC if t.source is TopologySource.SLURM else t.provider
    # Workers with a placement register Topology= themselves from 25.05 (the slurm source reads what
    # they registered), so topology.yaml then lists only units and unplaced nodes (see sync.render).
    settings = sync.Settings(Format(spec.topology_plugin), provider, t.unplaced, t.block_sizes, t.slinky_topology,
                             list_placed=t.source is not TopologySource.SLURM)
    path = wk.TOPOLOGY_YAML if version.node_topology else wk.TOPOLOGY_CONF
    return Target(Path(path), settings, version)


def render_now(tgt: Target, source: Source | None) -> str:
    """The text for the nodes ``source`` reports now; no source (slurmctld not up yet): no nodes."""
    nodes, pods = source.read() if source is not None else ((), None)
    text, _ = sync.render(nodes, pods, tgt.settings, tgt.version)
    return text


def api_settings(spec: ClusterSpec, env: Mapping[str, str]) -> access.Settings | None:
    """The API server and service account, read when the spec's topology source is the API."""
    return access.in_cluster(env) if spec.topology.source is TopologySource.API else None


def source_for(client: SlurmClient, namespace: str, api: access.Settings | None) -> Source:
    """The API's nodes and worker pods of ``namespace`` when ``api`` is given, else what slurmctld holds."""
    if api is not None:
        from slurmpod.kube import library  # noqa: PLC0415 - the client library: only with the api source

        return ApiSource(library.LibraryKube(api), namespace or "default")
    return SlurmSource(client)


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(0o644)
    os.replace(tmp, path)  # slurmctld never reads a half-written file


def sync_once(client: SlurmClient, tgt: Target, source: Source) -> sync.Plan:
    """One pass: re-render; only when the text changed, write it and reconfigure slurmctld."""
    try:
        previous: str | None = tgt.path.read_text(encoding="utf-8")
    except FileNotFoundError:
        previous = None
    nodes, pods = source.read()
    plan = sync.plan(previous, nodes, pods, tgt.settings, tgt.version)
    if not plan.changed:
        return plan
    _write(tgt.path, plan.text)
    # A moved node's Topology= value is not re-sent by a running slurmd, so every change (REGISTER
    # included) is applied by reconfiguring with the rewritten file, which names every node.
    try:
        client.reconfigure(timeout=STEP_TIMEOUT)
    except SlurmpodError:
        # Not applied (slurmctld restarting, say): put the old file back, so the next pass sees the
        # change again and reconfigures then, rather than finding the file current and doing nothing.
        if previous is None:
            tgt.path.unlink(missing_ok=True)
        else:
            _write(tgt.path, previous)
        raise
    log.info("topology changed; reconfigured", extra={"ctx": {
        "file": str(tgt.path), "nodes": len(nodes), "action": plan.action.value}})
    return plan


def repair_registrations(client: SlurmClient, nodes: Sequence[NodeState]) -> list[str]:
    """25.05+, slurm source: give each placed node the `Topology=` it registered when slurmctld could
    not (its unit was not in topology.yaml yet), and lift the drain slurmctld set for exactly that.
    Only a node whose value differs is updated: re-applying the same block is what drops a node from
    topology/block's aggregate bitmap (see topology/sync.py). Returns the nodes updated."""
    fixed = []
    for node in nodes:
        placement = extra_placements.placement_of(node)
        if placement is None:
            continue
        try:
            value = annotation.parse(f"node {node.name} extra", placement).registration
        except BadInput:
            continue  # an unusable value is reported by the render step
        differs, refused = node.topology != value, reasons.topology_may_lift(node, value)
        if differs:
            client.set_topology(node.name, value, timeout=STEP_TIMEOUT)
            fixed.append(node.name)
        if refused:
            client.resume(node.name, timeout=STEP_TIMEOUT)
        if differs or refused:
            log.info("node topology set", extra={"ctx": {"node": node.name, "topology": value,
                                                         "drain_lifted": refused}})
    return fixed


def run(client: SlurmClient, tgt: Target, source: Source, interval_s: float, clock: Clock, *,
        passes: int | None = None) -> int:
    done = 0
    while passes is None or done < passes:
        try:
            sync_once(client, tgt, source)
            if tgt.version.node_topology and isinstance(source, SlurmSource):
                repair_registrations(client, client.nodes(timeout=STEP_TIMEOUT))
        except TransientError as exc:  # slurmctld restarting, the API briefly away: next pass
            log.info("topology pass skipped", extra={"ctx": {"err": str(exc)[:200]}})
        except BadInput as exc:  # a placement slurmctld or the API holds is not usable: keep the file
            log.warning("topology not rendered; file kept", extra={"ctx": {"err": str(exc)[:500]}})
        done += 1
        clock.sleep(interval_s)
    return 0


def main(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    spec = load(Path(env.get(wk.ENV_CLUSTER_SPEC, wk.CLUSTER_SPEC_FILE)))
    tgt = target(spec, slurm_version.detect(env))
    if tgt is None:
        raise BadInput.one("topologyPlugin", "none", "topology-sync needs topologyPlugin tree or block")
    interval = args.interval if args.interval is not None else float(spec.topology.sync_interval_seconds)
    if interval <= 0:
        raise BadInput.one("--interval", str(interval), "must be > 0")
    api = api_settings(spec, env)
    client = CliSlurmClient()
    return run(client, tgt, source_for(client, podinfo.identity(env).namespace, api), interval, SystemClock())
