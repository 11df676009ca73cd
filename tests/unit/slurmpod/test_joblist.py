"""squeue's compact listing: the command, what a line says, and lines that must not parse or must not shift.

Real lines, as Slurm 24.11.5 printed them, are in tests/unit/data/slurm-24.11/squeue.txt
(tests/unit/entrypoints/exporter/test_slurm_2411_documents.py); the lines here are built the same way.
Ref: https://slurm.schedmd.com/squeue.html#OPT_Format
"""

from __future__ import annotations

import pytest
import slurmdocs

from slurmpod import joblist
from slurmpod.joblist import SEPARATOR, JobRecord

# What squeue 24.11.5 printed for a pending job array (tests/unit/data/slurm-24.11/squeue.txt, job 4).
ARRAY = SEPARATOR.join(["4", "PENDING", "1", "1", "1", "1", "1", "1", "0", "0-9%2", "main", "",
                        "cpu=1,mem=1G,node=1,billing=1", "N/A", "N/A", "N/A", "Resources", "(null)"])


def _line(**over: object) -> str:
    return slurmdocs.line(slurmdocs.job(7, **{"reason": "Priority", **over}))  # type: ignore[arg-type]


def test_the_command_asks_for_each_field_whole_with_the_separator_after_it() -> None:
    argv = joblist.ARGV
    assert argv[:4] == ("squeue", "--noheader", "--noconvert", "--Format")
    fields = argv[4].split(",")
    assert [f.split(":")[0] for f in fields] == list(joblist.FIELDS)
    assert all(f.endswith(f":0{SEPARATOR}") for f in fields[:-1]) and fields[-1] == "Feature:0"
    # no field a user writes freely but the last; the name and comment are never read
    assert not {"Name", "Comment", "admin_comment", "system_comment", "Command", "WorkDir"} & set(joblist.FIELDS)


def test_a_line_squeue_printed() -> None:
    listing = joblist.parse_listing(ARRAY + "\n")
    assert listing == joblist.JobListing((JobRecord(
        job_id=4, state="PENDING", priority=1, nodes=1, max_nodes=1, cpus=1, cpus_per_node=1, tasks=1,
        tasks_per_node=0, array_tasks="0-9%2", partitions=("main",), required_nodes="",
        tres_alloc="cpu=1,mem=1G,node=1,billing=1", tres_per_node="", tres_per_job="", tres_per_task="",
        reason="Resources", features=""),), 0)


@pytest.mark.parametrize(
    ("over", "field", "value"),
    [
        ({"tasks_per_node": 4}, "tasks_per_node", 4),
        ({"max_nodes": 6, "nodes": 4}, "max_nodes", 6),
        ({"partitions": ("gpu", "main")}, "partitions", ("gpu", "main")),
        ({"required_nodes": "w-[0-3]"}, "required_nodes", "w-[0-3]"),
        ({"tres_per_node": "gres/gpu:h100:8"}, "tres_per_node", "gres/gpu:h100:8"),
        ({"tres_per_task": "gres/gpu:1"}, "tres_per_task", "gres/gpu:1"),
        ({"features": "[rack1*2&rack2*4]|gpu"}, "features", "[rack1*2&rack2*4]|gpu"),
        ({"reason": "ReqNodeNotAvail, UnavailableNodes:w-1"}, "reason", "ReqNodeNotAvail, UnavailableNodes:w-1"),
    ],
    ids=["tasks-per-node", "node-range", "two-partitions", "named-nodes", "gres", "gpus-per-task", "constraint",
         "described-reason"],
)
def test_each_field_is_read_back(over: dict[str, object], field: str, value: object) -> None:
    (record,) = joblist.parse_listing(_line(**over)).records
    assert getattr(record, field) == value


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("N/A", 0), ("0", 0), ("4294967294", 0), ("4294967295", 0), ("-2", 0), ("12", 12),
    ],
    ids=["none", "zero", "no-val", "infinite", "no-val-as-int", "set"],
)
def test_slurms_unset_numbers_read_as_zero(text: str, values: int) -> None:
    parts = ARRAY.split(SEPARATOR)
    parts[8] = text  # NTPerNode
    parts[7] = "4294967294" if text == "N/A" else text  # NumTasks
    (record,) = joblist.parse_listing(SEPARATOR.join(parts)).records
    assert (record.tasks_per_node, record.tasks) == (values, values)


@pytest.mark.parametrize(
    ("state", "base", "flags"),
    [("PENDING", "PENDING", ()), ("RUNNING", "RUNNING", ()), ("SUSPENDED", "SUSPENDED", ()),
     ("CONFIGURING", "RUNNING", ("CONFIGURING",)), ("RESIZING", "RUNNING", ("RESIZING",)),
     ("SIGNALING", "RUNNING", ("SIGNALING",)), ("REQUEUED", "PENDING", ("REQUEUED",)),
     ("REQUEUE_HOLD", "PENDING", ("REQUEUE_HOLD",)), ("EXPEDITING", "PENDING", ("EXPEDITING",)),
     ("COMPLETING", "", ("COMPLETING",)), ("STAGE_OUT", "", ("STAGE_OUT",)),
     ("NEW_FROM_A_NEWER_SLURM", "", ("NEW_FROM_A_NEWER_SLURM",))],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_squeues_one_state_name_and_the_base_it_goes_with(state: str, base: str, flags: tuple[str, ...]) -> None:
    (record,) = joblist.parse_listing(_line(state=state)).records
    assert (record.base, record.flags) == (base, frozenset(flags))


@pytest.mark.parametrize(
    ("reason", "codes"),
    [("Priority", ("Priority",)), ("None", ("None",)), ("ReqNodeNotAvail, May be reserved for other job",
                                                         ("ReqNodeNotAvail",)),
     ("Resources,JobHeldUser", ("Resources", "JobHeldUser")),
     ("Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions", ()),
     ("", ())],
    ids=["code", "none", "code-and-description", "an-arrays-reasons", "description", "empty"],
)
def test_reason_codes(reason: str, codes: tuple[str, ...]) -> None:
    assert slurmdocs.job(1, reason=reason).reason_codes == codes


def test_a_separator_in_the_constraint_stays_in_the_constraint() -> None:
    """The last field is split off at most once more: a separator in it (sbatch refuses one, but a newer
    Slurm or a plugin might not) cannot shift a field or add one."""
    hostile = f"gpu{SEPARATOR}RUNNING{SEPARATOR}99"
    listing = joblist.parse_listing(_line(features=hostile) + "\n")
    assert listing.unparsed == 0
    (record,) = listing.records
    assert (record.features, record.state, record.job_id, record.reason) == (hostile, "PENDING", 7, "Priority")


@pytest.mark.parametrize("char", ["\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\r", "\x0b", "\x0c"],
                         ids=["fs", "gs", "rs", "nel", "line-separator", "cr", "vt", "ff"])
def test_a_line_ends_only_at_a_newline(char: str) -> None:
    """str.splitlines() would end a line at each of these: a constraint holding one stays one record."""
    listing = joblist.parse_listing(_line(features=f"gpu{char}{SEPARATOR}x") + "\n" + _line() + "\n")
    assert listing.unparsed == 0 and [r.features for r in listing.records] == [f"gpu{char}{SEPARATOR}x", ""]


@pytest.mark.parametrize(
    "line",
    [
        "squeue: error: Invalid job format specification: Nmae",
        ARRAY.rsplit(SEPARATOR, 1)[0],  # one field short
        ARRAY.replace("4", "x", 1),  # a job ID that is not a number
        ARRAY.replace("4", "0", 1),  # job 0
        ARRAY.replace("PENDING", "pending"),
        ARRAY.replace("PENDING", ""),
        ARRAY.replace(f"{SEPARATOR}1{SEPARATOR}1{SEPARATOR}1", f"{SEPARATOR}1K{SEPARATOR}1{SEPARATOR}1", 1),
        ARRAY.replace("0-9%2", "0-9%2 and more"),
        ARRAY.replace("0-9%2", "x"),
        "x\"} 1\nslurm_nodes 99",
    ],
    ids=["an-error", "too-few-fields", "job-id-not-a-number", "job-zero", "state-in-lowercase", "no-state",
         "unit-suffix", "task-list-with-words", "task-list-not-one", "hostile-text"],
)
def test_a_line_that_does_not_parse_is_counted_and_the_rest_read(line: str) -> None:
    listing = joblist.parse_listing(f"{ARRAY}\n{line}\n{ARRAY}\n")
    assert (len(listing.records), listing.unparsed) == (2, line.count("\n") + 1)


def test_an_empty_listing_is_no_jobs() -> None:
    assert joblist.parse_listing("") == joblist.parse_listing("\n") == joblist.JobListing((), 0)


def test_a_large_listing_reads_every_line() -> None:
    """10,000 jobs (slurmdocs.synthetic) as squeue prints them, read back the same."""
    _, listing = slurmdocs.synthetic(1000, 10_000)
    text = "".join(f"{slurmdocs.line(r)}\n" for r in listing.records)
    assert joblist.parse_listing(text) == listing
