"""The health agent's live Prometheus metrics: the textfile metrics' series (prolog_epilog/metrics.py),
served over HTTP from what the agent last saw, plus when each check last passed and how many hooks it
answered.

The series are built at scrape time from ``Observations`` (one lock, no I/O but the state dir's XID
totals), so a scrape never waits on a check or on NVML.
Ref: https://prometheus.github.io/client_python/collector/custom/
Ref: https://prometheus.io/docs/instrumenting/writing_exporters/#metrics
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from slurmpod.prolog_epilog.metrics import STATUS_VALUE
from slurmpod.prolog_epilog.result import CheckResult, Context, Status

log = logging.getLogger(__name__)
PREFIX = "slurmpod_health"
RETRY_S = 15.0  # between tries to bind the port while something else holds it


@dataclass(frozen=True, slots=True)
class Run:
    """The outcome of one run of a context's checks."""

    results: tuple[CheckResult, ...]
    duration_s: float
    ended_at: float  # Unix time


class Observations:
    """What the agent last saw, per context and check; written by its runs, read by scrapes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[Context, Run] = {}
        self._passed: dict[tuple[str, Context], float] = {}  # (check, context) -> Unix time it last passed
        self._hooks: dict[tuple[str, int], int] = {}  # (hook, exit code) -> answered

    def record(self, context: Context, results: Sequence[CheckResult], duration_s: float, now: float) -> None:
        with self._lock:
            self._runs[context] = Run(tuple(results), duration_s, now)
            for r in results:
                if r.status is Status.OK:
                    self._passed[(r.check, context)] = now

    def hook_answered(self, hook: str, exit_code: int) -> None:
        with self._lock:
            self._hooks[(hook, exit_code)] = self._hooks.get((hook, exit_code), 0) + 1

    def snapshot(self) -> tuple[dict[Context, Run], dict[tuple[str, Context], float], dict[tuple[str, int], int]]:
        with self._lock:
            return dict(self._runs), dict(self._passed), dict(self._hooks)


class AgentCollector(Collector):
    """The series of ``observations`` and the node's XID totals (``xid_totals``: "GPU:CODE" -> count)."""

    def __init__(self, observations: Observations, xid_totals: Callable[[], Mapping[str, int]]) -> None:
        self._obs = observations
        self._xid_totals = xid_totals

    def collect(self) -> Iterator[Metric]:
        runs, passed, hooks = self._obs.snapshot()
        status = GaugeMetricFamily(f"{PREFIX}_check_status", "Check outcome: 0 ok or skipped, 1 warn, 2 fail.",
                                   labels=["check", "context"])
        took = GaugeMetricFamily(f"{PREFIX}_check_duration_seconds", "How long each check took.",
                                 labels=["check", "context"])
        run_s = GaugeMetricFamily(f"{PREFIX}_run_duration_seconds", "How long the whole run took.", labels=["context"])
        last = GaugeMetricFamily(f"{PREFIX}_last_run_timestamp_seconds", "When the run ended (Unix time).",
                                 labels=["context"])
        for context, run in sorted(runs.items(), key=lambda kv: kv[0].value):
            for r in run.results:
                status.add_metric([r.check, context.value], STATUS_VALUE[r.status])
                took.add_metric([r.check, context.value], r.duration)
            run_s.add_metric([context.value], run.duration_s)
            last.add_metric([context.value], run.ended_at)
        ok_at = GaugeMetricFamily(f"{PREFIX}_check_last_success_timestamp_seconds",
                                  "When the check last passed in this context (Unix time).",
                                  labels=["check", "context"])
        for (check, context), at in sorted(passed.items(), key=lambda kv: (kv[0][0], kv[0][1].value)):
            ok_at.add_metric([check, context.value], at)
        xids = CounterMetricFamily(f"{PREFIX}_xid", "XID errors seen on this node, by GPU and code.",
                                   labels=["gpu", "xid"])
        for key, count in sorted(self._xid_totals().items()):
            gpu, _, code = key.partition(":")
            xids.add_metric([gpu, code], int(count))
        answered = CounterMetricFamily(f"{PREFIX}_agent_hooks", "Hooks the health agent ran, by hook and exit code.",
                                       labels=["hook", "exit_code"])
        for (hook, exit_code), n in sorted(hooks.items()):
            answered.add_metric([hook, str(exit_code)], n)
        yield from (status, took, run_s, last, ok_at, xids, answered)


def serve(observations: Observations, xid_totals: Callable[[], Mapping[str, int]], port: int,
          addr: str = "0.0.0.0") -> tuple[Any, CollectorRegistry]:  # noqa: S104 - Prometheus scrapes the pod IP
    """Serve /metrics on ``addr:port`` from a thread of prometheus_client's; returns (server, registry)."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(AgentCollector(observations, xid_totals))
    ProcessCollector(registry=registry)  # the agent's own memory and CPU
    server, _thread = start_http_server(port, addr=addr, registry=registry)
    return server, registry


class LiveMetrics:
    """``serve`` on a thread of its own: at the agent's start, before slurmd (so before any job), and
    again every ``retry_s`` while the port is taken (a job's process may hold it once the agent was
    restarted). The agent never waits for it: the hooks matter more."""

    def __init__(self, observations: Observations, xid_totals: Callable[[], Mapping[str, int]], port: int,
                 stop: threading.Event, *, retry_s: float = RETRY_S, addr: str = "0.0.0.0") -> None:  # noqa: S104
        self._args = (observations, xid_totals, port, addr)
        self._port, self._stop, self._retry_s = port, stop, retry_s
        self._server: Any = None
        self.bound = threading.Event()

    def start(self) -> None:
        if self._port != 0 and not self._bind(first=True):
            threading.Thread(target=self._retry, name="agent-metrics-bind", daemon=True).start()

    def _bind(self, *, first: bool) -> bool:
        try:
            self._server, _ = serve(*self._args)
        except OSError as exc:
            if first:
                log.error("live metrics not served yet: port=%d error=%s; trying again every %gs",
                          self._port, exc, self._retry_s)
            return False
        log.info("live metrics: port=%d path=/metrics", self._port)
        self.bound.set()
        return True

    def _retry(self) -> None:
        while not self._stop.wait(self._retry_s):
            if self._bind(first=False):
                return

    def shutdown(self) -> None:
        if self._server is not None:
            self._server.shutdown()
