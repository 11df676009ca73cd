"""`slurmpod daemon exporter`: the controller's Prometheus exporter, under supervisord beside slurmctld.

It serves GET /metrics on ``--port`` (wk.EXPORTER_PORT) from its own registry, and polls slurmctld every
``--poll-seconds`` (the cluster spec's metrics.pollSeconds) in the main thread (poll.py). The NodeSets whose
demand it reports are the cluster spec's, each with the partitions that hold it.
Ref: https://prometheus.github.io/client_python/exporting/http/
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server

from slurmpod import well_known as wk
from slurmpod.demand import NodeSetShape
from slurmpod.entrypoints.cluster_spec import ClusterSpec, demand_shape, load
from slurmpod.entrypoints.exporter.poll import Poller, PollSettings, StateCollector
from slurmpod.errors import BadInput

log = logging.getLogger(__name__)


def shapes(spec: ClusterSpec) -> tuple[NodeSetShape, ...]:
    """Each NodeSet of the spec as the demand judges it; its registered nodes' size, where Slurm has any,
    is learnt at each poll (collect.py)."""
    return tuple(demand_shape(spec, ns) for ns in spec.nodesets)


def serve(poller: Poller, port: int, addr: str = "0.0.0.0") -> Any:  # noqa: S104 - Prometheus scrapes the pod IP
    """/metrics on ``addr:port`` from a thread of prometheus_client's; returns its server."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StateCollector(poller))
    ProcessCollector(registry=registry)  # the exporter's own CPU and memory
    server, _thread = start_http_server(port, addr=addr, registry=registry)
    return server


def settings(spec: ClusterSpec, poll_seconds: float | None) -> PollSettings:
    seconds = float(spec.metrics.poll_seconds) if poll_seconds is None else poll_seconds
    if seconds < wk.MIN_EXPORTER_POLL_S:
        raise BadInput.one("--poll-seconds", seconds, f"must be at least {wk.MIN_EXPORTER_POLL_S}")
    return PollSettings(poll_seconds=seconds, nodesets=shapes(spec))


def main(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from slurmpod.slurm import CliSlurmClient  # noqa: PLC0415

    spec = load(Path(env.get(wk.ENV_CLUSTER_SPEC, wk.CLUSTER_SPEC_FILE)))
    if not spec.metrics.enabled:
        raise BadInput.one("metrics.enabled", "false", "the exporter runs only when the cluster spec turns it on")
    s = settings(spec, args.poll_seconds)
    if not 0 < int(args.port) <= 65535:  # the TCP port range; 0 would be any free port, unknown to Prometheus
        raise BadInput.one(wk.ENV_EXPORTER_PORT, args.port, "must be a TCP port, 1 to 65535")
    poller = Poller(CliSlurmClient(), s)
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)  # supervisord's stopsignal
    signal.signal(signal.SIGINT, on_signal)
    server = serve(poller, int(args.port))
    log.info("exporter serving", extra={"ctx": {"port": args.port, "poll_s": s.poll_seconds,
                                                "nodesets": ",".join(n.name for n in s.nodesets)}})
    try:
        poller.run(stop.wait)
    finally:
        server.shutdown()
    return 0
