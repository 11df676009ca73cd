"""The exporter's poll loop: ask slurmctld at a bounded rate, keep the last good answer, serve that.

- A poll reads the nodes, the job listing, the partitions and sdiag (READS: slurm.Report and
  SlurmClient.job_list) one after the other, each with a timeout of at most CALL_TIMEOUT_S and all within
  the poll's deadline (its interval): a controller that does not answer costs at most one interval, and
  never more than one command at a time.
- A poll is whole or nothing: when a read fails or times out, the Slurm series stay those of the last
  good poll and slurmpod_exporter_up says 0. A failed read never looks like an empty cluster.
- Polls start at most once per interval; one that overran is followed by MIN_GAP_S before the next.
- The local files (the job_submit plugin's stats, the autoscaler's counters) are read at every poll:
  one that is not there serves nothing, one that cannot be read keeps what was read before.
- A scrape takes the State the last poll left (``StateCollector``): families built when that poll ended.
  Nothing a scrape does runs a command or reads a file.

Ref: https://prometheus.io/docs/instrumenting/writing_exporters/#scheduling
Ref: https://slurm.schedmd.com/metrics.html#performance (slurmctld's cost of every query)
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from slurmpod import joblist
from slurmpod import well_known as wk
from slurmpod.demand import NodeSetShape
from slurmpod.entrypoints.exporter import collect
from slurmpod.errors import SlurmpodError, TransientError
from slurmpod.joblist import JobListing
from slurmpod.slurm import Report, SlurmClient
from slurmpod.timing import Clock, Deadline, SystemClock

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 10.0  # one Slurm command; scontrol show nodes of 1,000 nodes takes about a second
MIN_GAP_S = 1.0  # between the end of a poll that overran and the next
JOBS = "JOBS"  # the job listing, SlurmClient.job_list
READS: tuple[Report | str, ...] = (Report.NODES, JOBS, Report.PARTITIONS, Report.DIAG)  # a poll's, in turn


def commands() -> list[tuple[str, ...]]:
    """The commands a poll runs, in turn (what the exporter bench runs bare beside a poll)."""
    return [which.argv if isinstance(which, Report) else joblist.ARGV for which in READS]


@dataclass(frozen=True, slots=True)
class PollSettings:
    poll_seconds: float = float(wk.DEFAULT_EXPORTER_POLL_S)  # one poll at most this often, within this time
    nodesets: tuple[NodeSetShape, ...] = ()  # from the cluster spec; CPUs and GPUs from their nodes
    policy_stats: Path = Path(wk.PLUGIN_STATS_FILE)
    autoscale_counters: Path = Path(wk.AUTOSCALE_COUNTERS_FILE)


@dataclass(frozen=True, slots=True)
class State:
    """What a scrape serves: the last good poll's Slurm series, the files' series, and the poller's own."""

    slurm: tuple[Metric, ...] = ()
    files: tuple[Metric, ...] = ()
    up: bool = False  # the last poll read every document
    last_success: float | None = None  # Unix time the Slurm series were read; None: never
    poll_seconds: float = 0.0  # how long the last poll took
    calls: int = 0  # Slurm commands run, all polls together
    failures: int = 0  # polls that failed


class Poller:
    def __init__(self, slurm: SlurmClient, settings: PollSettings, *, clock: Clock | None = None,
                 wall: Callable[[], float] = time.time) -> None:
        self._slurm = slurm
        self._s = settings
        self._clock = clock or SystemClock()
        self._wall = wall
        self._lock = threading.Lock()
        self._state = State()
        self._files: dict[Path, Mapping[str, Any] | None] = {}

    def state(self) -> State:
        with self._lock:
            return self._state

    def poll(self) -> State:
        """One poll; returns (and keeps) the State it leaves."""
        started = self._clock.monotonic()
        deadline = Deadline(self._clock, self._s.poll_seconds)
        calls = 0
        fams: tuple[Metric, ...] | None = None
        error = ""
        try:
            docs: dict[Report, dict[str, Any]] = {}
            jobs = JobListing()
            for which in READS:
                name = which.name if isinstance(which, Report) else which
                if deadline.expired:
                    raise TransientError(f"poll deadline ({self._s.poll_seconds:g} s) passed before {name}")
                calls += 1
                if isinstance(which, Report):
                    docs[which] = self._slurm.report(which, timeout=deadline.budget(CALL_TIMEOUT_S))
                else:
                    jobs = self._slurm.job_list(timeout=deadline.budget(CALL_TIMEOUT_S))
            snap = collect.Snapshot(docs[Report.NODES], jobs, docs[Report.PARTITIONS], docs[Report.DIAG])
            fams = tuple(collect.slurm_families(snap, self._s.nodesets))
        except SlurmpodError as exc:
            error = str(exc)
        except (ValueError, TypeError, AttributeError) as exc:  # a document shaped unlike any Slurm's
            error = f"unexpected document: {exc!r}"
        files = self._read_files()
        took = self._clock.monotonic() - started
        with self._lock:
            before = self._state
            if fams is None:
                state = replace(before, files=files, up=False, poll_seconds=took, calls=before.calls + calls,
                                failures=before.failures + 1)
            else:
                state = State(fams, files, True, self._wall(), took, before.calls + calls, before.failures)
            self._state = state
        self._log(before, state, error)
        return state

    def _log(self, before: State, after: State, error: str) -> None:
        if not after.up and (before.up or before.failures == 0):
            log.warning("poll failed; serving the last good poll", extra={"ctx": {
                "err": error[:300], "last_success": after.last_success}})
        elif after.up and not before.up:
            log.info("poll ok", extra={"ctx": {"took_s": round(after.poll_seconds, 3), "calls": after.calls}})

    def _read_files(self) -> tuple[Metric, ...]:
        policy = self._read(self._s.policy_stats)
        counters = self._read(self._s.autoscale_counters)
        return (*collect.policy_families(policy), *collect.autoscale_families(counters))

    def _read(self, path: Path) -> Mapping[str, Any] | None:
        """The file's JSON object; None when it is not there; what was read before when it cannot be read."""
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            doc = None
        except (OSError, ValueError) as exc:
            if path not in self._files:
                log.warning("file not read", extra={"ctx": {"path": str(path), "err": str(exc)[:200]}})
            return self._files.get(path)
        self._files[path] = doc if isinstance(doc, dict) else None
        return self._files[path]

    def run(self, wait: Callable[[float], bool], *, polls: int | None = None) -> int:
        """Poll until ``wait(seconds)`` says stop (True) or ``polls`` polls are done; returns the count."""
        done = 0
        while True:
            started = self._clock.monotonic()
            self.poll()
            done += 1
            if polls is not None and done >= polls:
                return done
            if wait(max(MIN_GAP_S, self._s.poll_seconds - (self._clock.monotonic() - started))):
                return done


class StateCollector(Collector):
    """What a scrape of the exporter yields: the poller's current State and its own series."""

    def __init__(self, poller: Poller) -> None:
        self._poller = poller

    def collect(self) -> Iterator[Metric]:
        state = self._poller.state()
        yield from state.slurm
        yield from state.files
        yield GaugeMetricFamily("slurmpod_exporter_up", "1: the last poll read every Slurm document; 0: it "
                                "failed and the Slurm series are the last good poll's.", value=int(state.up))
        yield GaugeMetricFamily("slurmpod_exporter_poll_seconds", "How long the last poll took.",
                                value=state.poll_seconds)
        if state.last_success is not None:
            yield GaugeMetricFamily("slurmpod_exporter_last_poll_timestamp_seconds",
                                    "When the Slurm series served were read (Unix time).", value=state.last_success)
        calls = CounterMetricFamily("slurmpod_exporter_slurm_calls", "Slurm commands the exporter ran.")
        calls.add_metric([], state.calls)
        failures = CounterMetricFamily("slurmpod_exporter_poll_failures", "Polls that failed.")
        failures.add_metric([], state.failures)
        yield calls
        yield failures
