"""The exporter's poll loop against the recording Slurm fake and a fake clock: whole-or-nothing polls, the
last good poll kept and marked stale, a deadline per call, a bounded rate, and scrapes that never reach Slurm."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import slurmdocs
from fakes.slurm_client import FakeSlurm
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from slurmdocs import node

from slurmpod.demand import NodeSetShape
from slurmpod.entrypoints.exporter import poll
from slurmpod.entrypoints.exporter.poll import Poller, PollSettings, StateCollector
from slurmpod.errors import SlurmpodError, TransientError
from slurmpod.joblist import JobListing
from slurmpod.slurm import DEFAULT_TIMEOUT, Report

WALL = 1_767_225_600.0


class Wall:
    def __init__(self) -> None:
        self.now = WALL

    def __call__(self) -> float:
        return self.now


class FailingReport(FakeSlurm):
    """The fake Slurm, failing one read's command (slurmctld answering some RPCs and not others)."""

    failing: dict[Report | str, SlurmpodError]
    timeouts: list[float]

    def report(self, which: Report, *, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        self.timeouts = [*getattr(self, "timeouts", []), timeout]
        doc = super().report(which, timeout=timeout)
        if which in getattr(self, "failing", {}):
            raise self.failing[which]
        return doc

    def job_list(self, *, pending: bool = False, timeout: float = DEFAULT_TIMEOUT) -> JobListing:
        self.timeouts = [*getattr(self, "timeouts", []), timeout]
        listing = super().job_list(pending=pending, timeout=timeout)
        if poll.JOBS in getattr(self, "failing", {}):
            raise self.failing[poll.JOBS]
        return listing


def _slurm(n_nodes: int = 3, jobs: int = 1) -> FailingReport:
    fake = FailingReport()
    fake.reports = slurmdocs.reports([node(f"w-{i}", ["IDLE"], features=("workers",)) for i in range(n_nodes)],
                                     [slurmdocs.partition("main", nodes=n_nodes, cpus=32 * n_nodes)])
    fake.listing = slurmdocs.listing([slurmdocs.job(j + 1, reason="Resources") for j in range(jobs)])
    return fake


def _calls(fake: FakeSlurm) -> list[object]:
    """What each call read: a document, or the job listing."""
    return [args[0] if name == "report" else poll.JOBS for name, args in fake.calls]


def _poller(fake: FakeSlurm, tmp_path: Path, wall: Wall | None = None, **over: Any) -> Poller:
    settings = PollSettings(poll_seconds=15.0, nodesets=(NodeSetShape("workers", "workers", ("main",), 0, 0),),
                            policy_stats=tmp_path / "stats.json", autoscale_counters=tmp_path / "counters.json")
    return Poller(fake, PollSettings(**{**{f: getattr(settings, f) for f in settings.__slots__}, **over}),
                  clock=fake.clock, wall=wall or Wall())


def _scrape(poller: Poller) -> dict[str, float]:
    """One scrape, as Prometheus reads it: sample name (with labels) -> value."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StateCollector(poller))
    text = generate_latest(registry).decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


def test_a_poll_reads_the_four_documents_each_within_the_deadline(tmp_path: Path) -> None:
    fake = _slurm()
    state = _poller(fake, tmp_path).poll()
    assert _calls(fake) == [Report.NODES, poll.JOBS, Report.PARTITIONS, Report.DIAG]
    assert fake.called("job_list") == [(False,)]  # the whole listing, not its pending jobs only
    assert state.up and state.calls == 4 and state.failures == 0
    assert state.last_success == WALL
    assert state.poll_seconds == pytest.approx(4 * fake.call_seconds)
    metrics = _scrape(_poller(fake, tmp_path))  # a poller that never polled serves no Slurm series
    assert metrics["slurmpod_exporter_up"] == 0 and "slurm_nodes" not in metrics


@pytest.mark.parametrize("failing", poll.READS, ids=lambda r: (r.name if isinstance(r, Report) else r).lower())
def test_a_failed_poll_keeps_the_last_good_poll_and_marks_it_stale(tmp_path: Path, failing: Report | str) -> None:
    fake, wall = _slurm(3), Wall()
    poller = _poller(fake, tmp_path, wall)
    good = poller.poll()
    assert _scrape(poller)["slurm_jobs_pending"] == 1
    # slurmctld changes, then fails one read: the poll serves nothing of what it did read
    fake.reports, fake.listing = _slurm(0).reports, _slurm(0, jobs=0).listing
    fake.failing = {failing: TransientError("Socket timed out on send/recv operation")}
    wall.now += 15
    stale = poller.poll()
    assert stale.slurm is good.slurm
    assert (stale.up, stale.last_success, stale.failures) == (False, WALL, 1)
    metrics = _scrape(poller)
    assert metrics["slurm_nodes"] == 3  # never zeroed to look like an empty cluster
    assert metrics["slurm_jobs_pending"] == 1
    assert metrics["slurmpod_nodeset_nodes{nodeset=workers,state=idle}"] == 3
    assert metrics["slurmpod_exporter_up"] == 0
    assert metrics["slurmpod_exporter_last_poll_timestamp_seconds"] == WALL
    assert metrics["slurmpod_exporter_poll_failures_total"] == 1
    # back: the new state is served
    fake.failing = {}
    wall.now += 15
    assert poller.poll().up
    metrics = _scrape(poller)
    assert (metrics["slurm_nodes"], metrics["slurm_jobs_pending"], metrics["slurmpod_exporter_up"]) == (0, 0, 1)
    assert metrics["slurmpod_exporter_last_poll_timestamp_seconds"] == WALL + 30


def test_listing_lines_that_do_not_parse_are_counted_and_the_poll_stays_up(tmp_path: Path) -> None:
    fake = _slurm(jobs=2)
    fake.listing = dataclasses.replace(fake.listing, unparsed=3)
    poller = _poller(fake, tmp_path)
    assert poller.poll().up
    metrics = _scrape(poller)
    assert (metrics["slurm_jobs_pending"], metrics["slurmpod_exporter_unparsed_job_lines"]) == (2, 3)


def test_a_controller_that_is_down_from_the_start_serves_only_up_zero(tmp_path: Path) -> None:
    fake = _slurm()
    fake.down = True
    poller = _poller(fake, tmp_path)
    state = poller.poll()
    assert (state.up, state.last_success, state.slurm) == (False, None, ())
    assert state.calls == 1  # the first read failed; the poll stops there
    metrics = _scrape(poller)
    assert metrics["slurmpod_exporter_up"] == 0
    assert "slurmpod_exporter_last_poll_timestamp_seconds" not in metrics
    assert not [name for name in metrics if name.startswith(("slurm_", "slurmpod_nodeset"))]


@pytest.mark.parametrize("doc", [{"nodes": [{"name": "w-0", "cpus": "many"}]},
                                 {"nodes": [{"name": "w-0", "cpus": [1]}]}],
                         ids=["text-for-a-number", "list-for-a-number"])
def test_a_document_unlike_slurms_fails_the_poll_not_the_exporter(tmp_path: Path, doc: dict[str, Any]) -> None:
    fake = _slurm()
    poller = _poller(fake, tmp_path)
    good = poller.poll()
    fake.reports[Report.NODES] = doc
    state = poller.poll()
    assert not state.up and state.slurm is good.slurm


def test_a_hanging_controller_costs_one_call_timeout(tmp_path: Path) -> None:
    fake = _slurm()
    fake.hang.add("report")
    state = _poller(fake, tmp_path).poll()
    assert fake.timeouts == [poll.CALL_TIMEOUT_S]  # the first read timed out: nothing more is asked
    assert (state.up, state.calls) == (False, 1)
    assert state.poll_seconds == pytest.approx(poll.CALL_TIMEOUT_S)


def test_a_slow_controller_gets_what_is_left_of_the_interval(tmp_path: Path) -> None:
    fake = _slurm()
    fake.call_seconds = 6.0
    state = _poller(fake, tmp_path).poll()
    # 15 s for the whole poll: 10 (a call's cap), then 9 and 3 left; the fourth read is not started
    assert fake.timeouts == [poll.CALL_TIMEOUT_S, 9.0, 3.0]
    assert (state.up, state.calls) == (False, 3)


def test_scrapes_never_run_a_slurm_command(tmp_path: Path) -> None:
    fake = _slurm()
    poller = _poller(fake, tmp_path)
    poller.poll()
    calls = list(fake.calls)
    for _ in range(20):
        assert _scrape(poller)["slurm_nodes"] == 3
    assert fake.calls == calls
    assert _scrape(poller)["slurmpod_exporter_slurm_calls_total"] == 4


def test_polls_start_at_most_once_an_interval(tmp_path: Path) -> None:
    fake = _slurm()
    first_poll = 4 * fake.call_seconds
    waits: list[float] = []

    def wait(seconds: float) -> bool:
        waits.append(seconds)
        fake.clock.sleep(seconds)
        if len(waits) == 1:
            fake.call_seconds = 6.0  # the second poll overruns its interval
        return len(waits) == 3

    assert _poller(fake, tmp_path).run(wait) == 3
    assert waits[0] == pytest.approx(15.0 - first_poll)
    assert waits[1] == poll.MIN_GAP_S
    assert _poller(_slurm(), tmp_path).run(lambda s: False, polls=2) == 2


def test_files_are_read_each_poll_and_kept_when_unreadable(tmp_path: Path) -> None:
    fake = _slurm()
    poller = _poller(fake, tmp_path)
    poller.poll()
    assert not [k for k in _scrape(poller) if k.startswith(("slurmpod_policy", "slurmpod_autoscale"))]
    stats, counters = tmp_path / "stats.json", tmp_path / "counters.json"
    stats.write_text(json.dumps({"calls": 5, "fast": 4, "failures": 0, "sum_ns": 1000, "buckets": {"1": 5}}))
    counters.write_text(json.dumps({"decisions": {"workers": {"scale_out": 2}}}))
    poller.poll()
    metrics = _scrape(poller)
    assert metrics["slurmpod_policy_calls_total"] == 5
    assert metrics["slurmpod_autoscale_decisions_total{action=scale_out,nodeset=workers}"] == 2
    # a half-written file (the writers rename, but a hand-edit may not) keeps what was read before; the
    # Slurm series go on, and a failed Slurm poll still refreshes the files
    counters.write_text('{"decisions": {"workers": {"scale_out": 3')
    fake.down = True
    poller.poll()
    assert _scrape(poller)["slurmpod_autoscale_decisions_total{action=scale_out,nodeset=workers}"] == 2
    stats.unlink()
    poller.poll()
    assert not [k for k in _scrape(poller) if k.startswith("slurmpod_policy")]
