"""CliSlurmClient over a fake Runner: how scontrol/squeue answers become results or errors.

The texts are what Slurm's commands print (slurm_strerror messages); an unreachable controller is never
read as "no such node" or "no jobs".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import pytest
import slurmdocs
from fakes.slurm_client import ADMIN_REASON_300

from slurmpod import joblist
from slurmpod.commands import Result
from slurmpod.errors import BadInput, PermanentError, TransientError
from slurmpod.nodestate import NodeState
from slurmpod.slurm import CliSlurmClient, Placeholder, Report, SlurmRefused, reason_arg

NODE_DOC = json.dumps({"nodes": [{"name": "w-0", "state": ["IDLE", "DRAIN", "DYNAMIC_NORM"],
                                  "reason": ADMIN_REASON_300, "cpus": 2}], "errors": [], "warnings": []})
JOBS_DOC = json.dumps({"jobs": [{"job_id": 7, "batch_flag": True, "job_state": ["RUNNING"], "requeue": False,
                                 "user_name": "researcher"}]})


class FakeRunner:
    """Answers every command with one Result; records argv and timeout."""

    def __init__(self, rc: int = 0, stdout: str = "", stderr: str = "",
                 raises: Exception | None = None) -> None:
        self.rc, self.stdout, self.stderr, self.raises = rc, stdout, stderr, raises
        self.calls: list[tuple[tuple[str, ...], float]] = []

    def __call__(self, argv: Sequence[str], timeout: float) -> Result:
        self.calls.append((tuple(argv), timeout))
        if self.raises is not None:
            raise self.raises
        return Result(tuple(argv), self.rc, self.stdout, self.stderr)


CALLS: dict[str, Callable[[CliSlurmClient], object]] = {
    "nodes": lambda c: c.nodes(),
    "node": lambda c: c.node("w-0"),
    "jobs_on_node": lambda c: c.jobs_on_node("w-0"),
    "drain": lambda c: c.drain("w-0", "admin: x"),
    "resume": lambda c: c.resume("w-0"),
    "requeue": lambda c: c.requeue(7),
    "start_now": lambda c: c.start_now([7, 8]),
    "delete_node": lambda c: c.delete_node("w-0"),
    "reconfigure": lambda c: c.reconfigure(),
    "set_topology": lambda c: c.set_topology("w-0", "default:b1"),
    "sinfo_summary": lambda c: c.sinfo_summary(),
    "report": lambda c: c.report(Report.NODES),
    "job_list": lambda c: c.job_list(),
    "pending_jobs": lambda c: c.pending_jobs(),
    "job_states": lambda c: c.job_states([7]),
}
READERS = ["nodes", "node", "jobs_on_node", "report", "job_states"]  # of JSON

UNREACHABLE = [
    "slurm_load_node error: Unable to contact slurm controller (connect failure)",
    "squeue: error: Socket timed out on send/recv operation",
    "scontrol: error: Zero Bytes were transmitted or received",
    "slurm_update error: Communication connection failure",
    "",
]


@pytest.mark.parametrize("method", sorted(CALLS))
@pytest.mark.parametrize("stderr", UNREACHABLE, ids=["connect-failure", "socket-timeout", "zero-bytes",
                                                     "comm-failure", "no-output"])
def test_unreachable_controller_is_transient(method: str, stderr: str) -> None:
    client = CliSlurmClient(FakeRunner(rc=1, stderr=stderr))
    with pytest.raises(TransientError) as exc:
        CALLS[method](client)
    assert not isinstance(exc.value, SlurmRefused)


@pytest.mark.parametrize("method", READERS)
@pytest.mark.parametrize("stdout", ["", "Segmentation fault", '{"nodes": [', "[]", "null"],
                         ids=["empty", "text", "half-written", "json-list", "json-null"])
def test_non_json_answer_is_transient(method: str, stdout: str) -> None:
    with pytest.raises(TransientError, match="JSON"):
        CALLS[method](CliSlurmClient(FakeRunner(stdout=stdout)))


@pytest.mark.parametrize("method", sorted(set(CALLS) - {"sinfo_summary"}))
def test_refusal_is_slurm_refused(method: str) -> None:
    client = CliSlurmClient(FakeRunner(rc=1, stderr="slurm_update error: Access/permission denied"))
    with pytest.raises(SlurmRefused, match="permission denied"):
        CALLS[method](client)


@pytest.mark.parametrize(
    "stderr",
    ["slurm_load_node error: Invalid node name specified", "Node w-0 not found"],
    ids=["invalid-node-name", "not-found"],
)
def test_node_without_record_is_none(stderr: str) -> None:
    assert CliSlurmClient(FakeRunner(rc=1, stderr=stderr)).node("w-0") is None


def test_unreachable_is_never_no_record_even_when_it_says_not_found() -> None:
    # A connection failure whose text also carries "not found" (e.g. a controller address not found)
    # is still "no answer".
    stderr = "slurm_load_node error: Unable to contact slurm controller (connect failure): host not found"
    with pytest.raises(TransientError):
        CliSlurmClient(FakeRunner(rc=1, stderr=stderr)).node("w-0")


def test_node_reads_the_record_and_keeps_the_reason() -> None:
    runner = FakeRunner(stdout=NODE_DOC)
    state = CliSlurmClient(runner).node("w-0")
    assert state is not None and state.drained and state.reason == ADMIN_REASON_300
    assert runner.calls[0][0] == ("scontrol", "show", "node", "w-0", "--json")


def test_node_absent_from_an_answer_is_none() -> None:
    assert CliSlurmClient(FakeRunner(stdout=NODE_DOC)).node("w-1") is None


def test_jobs_on_node() -> None:
    runner = FakeRunner(stdout=JOBS_DOC)
    (job,) = CliSlurmClient(runner).jobs_on_node("w-0")
    assert (job.job_id, job.batch, job.state, job.requeue, job.user) == (7, True, "RUNNING", False, "researcher")
    argv = runner.calls[0][0]
    assert argv[:3] == ("squeue", "--nodelist", "w-0") and "--json" in argv


def test_job_states_asks_slurmctld_for_the_listed_jobs_only() -> None:
    """squeue's job-state RPC, as 24.11 and 26.05 print it; a job slurmctld no longer holds is absent."""
    doc = json.dumps({"jobs": [{"job_id": "7", "state": ["PENDING", "COMPLETING"]},
                               {"job_id": "9", "state": ["PENDING"]}], "errors": []})
    runner = FakeRunner(stdout=doc)
    states = CliSlurmClient(runner).job_states([7, 9, 12], timeout=3.0)
    assert states == {7: frozenset({"PENDING", "COMPLETING"}), 9: frozenset({"PENDING"})}
    assert runner.calls == [(("squeue", "--only-job-state", "--jobs=7,9,12", "--json"), 3.0)]
    assert CliSlurmClient(FakeRunner()).job_states([]) == {}  # nothing to ask: no call


@pytest.mark.parametrize("job", [{"state": ["PENDING"]}, {"job_id": "7"}, {"job_id": "x7", "state": []}],
                         ids=["no-id", "no-state", "bad-id"])
def test_job_states_with_a_job_it_cannot_read_is_no_answer(job: dict[str, object]) -> None:
    with pytest.raises(TransientError):
        CliSlurmClient(FakeRunner(stdout=json.dumps({"jobs": [job]}))).job_states([7])


@pytest.mark.parametrize(
    ("stdout", "rc", "up"),
    [
        ("Slurmctld(primary) at ctl-0 is UP\n", 0, True),
        ("Slurmctld(primary) at ctl-0 is DOWN\n", 1, False),
        ("Slurmctld(primary) at ctl-0 is UP\nSlurmctld(backup) at ctl-1 is DOWN\n", 1, False),
        ("", 1, False),
    ],
    ids=["up", "down", "backup-down", "nothing"],
)
def test_ping(stdout: str, rc: int, up: bool) -> None:
    assert CliSlurmClient(FakeRunner(rc=rc, stdout=stdout)).ping() is up


def test_timeout_is_passed_to_every_command() -> None:
    runner = FakeRunner(stdout=NODE_DOC)
    CliSlurmClient(runner).nodes(timeout=3.5)
    assert runner.calls == [(("scontrol", "show", "nodes", "--json"), 3.5)]


@pytest.mark.parametrize("exc", [TransientError("scontrol timed out after 10 s"),
                                 PermanentError("scontrol is not installed")], ids=["timeout", "missing"])
def test_runner_errors_pass_through(exc: Exception) -> None:
    with pytest.raises(type(exc)):
        CliSlurmClient(FakeRunner(raises=exc)).node("w-0")


@pytest.mark.parametrize(
    ("call", "argv"),
    [
        (lambda c: c.drain("w-0", ADMIN_REASON_300),
         ("scontrol", "update", "NodeName=w-0", "State=DRAIN", f'Reason="{ADMIN_REASON_300}"')),
        (lambda c: c.resume("w-0"), ("scontrol", "update", "NodeName=w-0", "State=RESUME")),
        (lambda c: c.ask_to_schedule(NodeState("w-0", "IDLE", features=("a", "b", "c"), active_features=("a", "b"))),
         ("scontrol", "update", "NodeName=w-0", "ActiveFeatures=a,b")),
        (lambda c: c.ask_to_schedule(NodeState("w-0", "IDLE")),
         ("scontrol", "update", "NodeName=w-0", "ActiveFeatures=")),
        (lambda c: c.requeue(7), ("scontrol", "requeue", "7")),
        (lambda c: c.start_now([7, 8]), ("scontrol", "update", "JobId=7,8", "StartTime=now")),
        (lambda c: c.delete_node("w-0"), ("scontrol", "delete", "NodeName=w-0")),
        (lambda c: c.create_future_node(Placeholder("w-3", ("burst", "ib"), 8, 65536, 4)),
         ("scontrol", "create", "NodeName=w-3", "State=FUTURE", "CPUs=8", "RealMemory=65536", "Features=burst,ib",
          "Gres=gpu:4")),
        (lambda c: c.create_future_node(Placeholder("w-3", (), 1, 900)),
         ("scontrol", "create", "NodeName=w-3", "State=FUTURE", "CPUs=1", "RealMemory=900")),
        (lambda c: c.nodes(future=True), ("scontrol", "--future", "show", "nodes", "--json")),
        (lambda c: c.node("w-0", future=True), ("scontrol", "--future", "show", "node", "w-0", "--json")),
        (lambda c: c.report(Report.NODES), ("scontrol", "--future", "show", "nodes", "--json")),
        (lambda c: c.report(Report.PARTITIONS), ("scontrol", "show", "partitions", "--json")),
        (lambda c: c.report(Report.DIAG), ("sdiag", "--json")),
        (lambda c: c.job_list(), joblist.ARGV),
        (lambda c: c.job_list(pending=True), ("squeue", "--states=PENDING", *joblist.ARGV[1:])),
        (lambda c: c.pending_jobs(), ("squeue", "--states=PENDING", *joblist.ARGV[1:])),
    ],
    ids=["drain", "resume", "ask-to-schedule", "ask-to-schedule-no-features",
         "requeue", "start-now", "delete", "placeholder", "placeholder-bare", "nodes-future",
         "node-future", "report-nodes", "report-partitions", "report-diag", "job-list", "job-list-pending",
         "pending-jobs"],
)
def test_argv(call: Callable[[CliSlurmClient], object], argv: tuple[str, ...]) -> None:
    runner = FakeRunner(stdout=NODE_DOC)
    call(CliSlurmClient(runner))
    assert runner.calls[0][0] == argv


LISTING = "".join(f"{slurmdocs.line(job)}\n" for job in (
    slurmdocs.job(8, reason="Resources", nodes=2), slurmdocs.job(9, reason="Dependency"), slurmdocs.job(10, "RUNNING")))


def test_job_list_and_pending_jobs_parse_the_answer_with_the_timeout_given() -> None:
    runner = FakeRunner(stdout=LISTING)
    client = CliSlurmClient(runner)
    listing = client.job_list(timeout=4.0)
    assert ([r.job_id for r in listing.records], listing.unparsed) == ([8, 9, 10], 0)
    (job,) = client.pending_jobs(timeout=6.0)
    assert (job.job_id, job.nodes, job.partitions) == (8, 2, ("main",))
    assert [t for _, t in runner.calls] == [4.0, 6.0]


@pytest.mark.parametrize("stdout", ["", "Segmentation fault\n", '{"jobs": []}'], ids=["empty", "text", "json"])
def test_a_listing_of_lines_that_do_not_parse_counts_them(stdout: str) -> None:
    """squeue answered (exit 0): what it printed is its listing; a line that is not one of its lines is
    counted, never read as a job, and never fails the read."""
    listing = CliSlurmClient(FakeRunner(stdout=LISTING + stdout)).job_list()
    assert (len(listing.records), listing.unparsed) == (3, stdout.count("\n") or int(bool(stdout)))


def test_a_field_name_squeue_does_not_know_is_transient() -> None:
    """A Slurm that renamed a --Format field prints an error and lines of other fields: not a listing."""
    runner = FakeRunner(stdout="8\n", stderr="squeue: error: Invalid job format specification: tres-per-task\n")
    with pytest.raises(TransientError, match="Invalid job format"):
        CliSlurmClient(runner).job_list()
    with pytest.raises(TransientError):
        CliSlurmClient(runner).pending_jobs()


def test_start_now_of_nothing_runs_nothing() -> None:
    runner = FakeRunner()
    CliSlurmClient(runner).start_now([])
    assert runner.calls == []


@pytest.mark.parametrize("name", ["W-0", "w 0", "w-0;rm", "", "a" * 64], ids=["upper", "space", "semicolon",
                                                                            "empty", "too-long"])
def test_bad_node_name_never_reaches_scontrol(name: str) -> None:
    runner = FakeRunner()
    with pytest.raises(BadInput):
        CliSlurmClient(runner).drain(name, "admin: x")
    assert runner.calls == []


@pytest.mark.parametrize("feature", ["a b", "a,b", "x State=DOWN", ""], ids=["space", "comma", "key", "empty"])
def test_an_active_feature_scontrol_would_read_as_more_never_reaches_it(feature: str) -> None:
    runner = FakeRunner()
    with pytest.raises(BadInput):
        CliSlurmClient(runner).ask_to_schedule(NodeState("w-0", "IDLE", active_features=("ok", feature)))
    assert runner.calls == []


@pytest.mark.parametrize(
    "reason",
    [ADMIN_REASON_300, '"', '""', "it's \"quoted\" inside", "slurmpod: pod terminating", " leading and trailing "],
    ids=["admin-300-quoted", "one-quote", "two-quotes", "inner-quotes", "ours", "spaces"],
)
def test_reason_arg_keeps_the_reason_exactly(reason: str) -> None:
    arg = reason_arg(reason)
    assert arg.startswith('Reason="') and arg.endswith('"')
    # scontrol strips exactly one pair of surrounding quotes (update_node.c): what remains is the reason.
    assert arg[len('Reason="'):-1] == reason
    assert len(arg) == len(reason) + len('Reason=""')


@pytest.mark.parametrize("reason", ["", "two\nlines", "carriage\rreturn", "nul\0byte"],
                         ids=["empty", "newline", "cr", "nul"])
def test_reason_arg_refuses_what_is_not_one_line(reason: str) -> None:
    with pytest.raises(ValueError, match="one non-empty line"):
        reason_arg(reason)


def test_set_topology_argv() -> None:
    runner = FakeRunner()
    CliSlurmClient(runner).set_topology("w-0", "default:b1", timeout=7)
    assert runner.calls == [(("scontrol", "update", "NodeName=w-0", "Topology=default:b1"), 7)]


@pytest.mark.parametrize(
    "placeholder",
    [Placeholder("w-3 State=IDLE", (), 1, 900), Placeholder("w-3", ("burst Weight=0",), 1, 900),
     Placeholder("w-3", ("a,b",), 1, 900), Placeholder("w-3", (), 0, 900), Placeholder("w-3", (), 1, -1),
     Placeholder("w-3", (), 1, 900, -2)],
    ids=["name-adds-key", "feature-adds-key", "feature-comma", "no-cpus", "negative-memory", "negative-gpus"],
)
def test_a_placeholder_that_would_add_a_key_never_reaches_scontrol(placeholder: Placeholder) -> None:
    runner = FakeRunner()
    with pytest.raises(BadInput):
        CliSlurmClient(runner).create_future_node(placeholder)
    assert runner.calls == []


def test_a_jobs_comment_and_extra_come_from_scontrols_json() -> None:
    """What the hooks look up when slurmd's PrEp plugin could not give them (prolog_epilog/main.py)."""
    doc = json.dumps({"jobs": [{"job_id": 9, "comment": "sweep 4 slurmpod:skip=nvlink", "extra": None}]})
    runner = FakeRunner(stdout=doc)
    assert CliSlurmClient(runner).job_comment_extra(9) == ("sweep 4 slurmpod:skip=nvlink", "")
    assert runner.calls[0][0] == ("scontrol", "show", "job", "9", "--json")
    with pytest.raises(PermanentError, match="no such job"):
        CliSlurmClient(FakeRunner(stdout=doc)).job_comment_extra(10)
    with pytest.raises(TransientError):
        CliSlurmClient(FakeRunner(rc=1, stderr="slurm_load_jobs error: Unable to contact slurm controller "
                                               "(connect failure)")).job_comment_extra(9)
