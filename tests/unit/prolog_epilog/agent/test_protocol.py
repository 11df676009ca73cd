"""The agent's wire format: requests and answers round-trip, and every malformed line is refused naming its field."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from slurmpod.prolog_epilog.agent import protocol
from slurmpod.prolog_epilog.agent.protocol import Aged, Answer, HookRequest, ProtocolError, Refusal, Request
from slurmpod.prolog_epilog.job import JobInfo
from slurmpod.prolog_epilog.result import CheckResult, Context, Gpu, Remediation, Status, Unknown

GOOD = {"v": 1, "context": "prolog", "job": {"id": 12, "gpus": [0, 3], "skip": ["nvlink"]},
        "recheck": None, "deadline_s": 9.5}


def _line(doc: Any) -> bytes:
    return json.dumps(doc).encode() + b"\n"


def _with(path: str, value: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(json.dumps(GOOD))
    *parents, last = path.split(".")
    target = doc
    for p in parents:
        target = target[p]
    if value is _DROP:
        del target[last]
    else:
        target[last] = value
    return doc


_DROP = object()


@pytest.mark.parametrize("request_", [
    Request(Context.PROLOG, JobInfo(12, (0, 3), frozenset({"nvlink", "xid"})), None, 9.5),
    Request(Context.PERIODIC, JobInfo(), "gpu-memory", 25.0),
    Request(Context.EPILOG, JobInfo(2**32 - 1), None, 0.05),
], ids=["prolog-job", "periodic-recheck", "epilog-max-job-id"])
def test_a_request_round_trips(request_: Request) -> None:
    line = protocol.encode_request(request_)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert protocol.decode_request(line) == request_


def test_an_answer_round_trips_results_and_unknowns() -> None:
    answer = Answer(Context.PERIODIC, None, (
        Aged(CheckResult("xid", Status.FAIL, "XID 79 on GPU 3", Remediation.REPLACE_NODE, 0.25,
                         (Gpu(3, "GPU-0003"),), (("xid_79", 1.0), ("free_gib:/scratch dir", 2.5))), 12.5),
        Aged(Unknown("temperature", 5.0, 5.0)),
        Aged(CheckResult("disk", Status.OK)),
    ))
    assert protocol.decode_answer(protocol.encode_answer(answer)) == answer


def test_a_refusal_round_trips() -> None:
    assert protocol.decode_answer(protocol.encode_answer(Refusal("busy"))) == Refusal("busy")


BAD_REQUESTS = [
    (_line(GOOD)[:-1], "request", "ending in a newline"),
    (_line(GOOD) + b"{}\n", "request", "exactly one line"),
    (b"\xff\xfe\n", "request", "not UTF-8"),
    (b"{nope\n", "request", "not JSON"),
    (b"[1, 2]\n", "request", "must be a JSON object"),
    (b"[" * 40000 + b"]" * 40000 + b"\n", "request", "longer than 65536 bytes"),
    (b'{"v": 1, "v": 1}\n', "request", "duplicate key"),
    (_line(GOOD).replace(b"9.5", b"NaN"), "request", "not JSON"),
    (b" " * 70000 + b"\n", "request", "longer than 65536 bytes"),
    (_line({**GOOD, "extra": 1}), "extra", "unknown field"),
    (_line(_with("context", _DROP)), "context", "missing"),
    (_line(_with("v", 2)), "v", "between 1 and 1"),
    (_line(_with("v", True)), "v", "whole number"),
    (_line(_with("context", "startup-ish")), "context", "expected one of"),
    (_line(_with("context", 1)), "context", "expected one of"),
    (_line(_with("job", [])), "job", "must be an object"),
    (_line(_with("job.user", "root")), "job.user", "unknown field"),
    (_line(_with("job.id", -1)), "job.id", "between 0 and"),
    (_line(_with("job.id", 2**32)), "job.id", "between 0 and"),
    (_line(_with("job.id", "12")), "job.id", "whole number"),
    (_line(_with("job.gpus", "0,1")), "job.gpus", "must be a list"),
    (_line(_with("job.gpus", list(range(65)))), "job.gpus", "more than 64 entries"),
    (_line(_with("job.gpus", [0, 1.5])), "job.gpus[1]", "whole number"),
    (_line(_with("job.gpus", [4096])), "job.gpus[0]", "between 0 and 1023"),
    (_line(_with("job.skip", ["nv link"])), "job.skip[0]", "must match"),
    (_line(_with("job.skip", ["x" * 65])), "job.skip[0]", "longer than 64"),
    (_line(_with("recheck", "../../etc")), "recheck", "must match"),
    (_line(_with("deadline_s", 0)), "deadline_s", "over 0"),
    (_line(_with("deadline_s", 301)), "deadline_s", "at most 300"),
    (_line(_with("deadline_s", "5")), "deadline_s", "must be a number"),
    (_line(_with("deadline_s", 1e400)), "request", "not JSON"),
]


def _refused(decode: Callable[[bytes], object], line: bytes, field: str, why: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        decode(line)
    problem = caught.value.problems[0]
    assert problem.field == field, caught.value
    assert why in problem.reason, caught.value


@pytest.mark.parametrize(("line", "field", "why"), BAD_REQUESTS, ids=[f"{f}: {w}" for _, f, w in BAD_REQUESTS])
def test_a_malformed_request_is_refused_naming_the_field(line: bytes, field: str, why: str) -> None:
    _refused(protocol.decode_request, line, field, why)


def _answer(**verdict: Any) -> bytes:
    base = {"check": "disk", "status": "ok", "reason": "", "remediation": "none", "duration_s": 0.1,
            "gpus": [], "values": {}, "age_s": 0.0}
    base.update(verdict)
    base = {k: v for k, v in base.items() if v is not _DROP}
    return _line({"v": 1, "ok": True, "context": "prolog", "job_id": 3, "verdicts": [base]})


BAD_ANSWERS = [
    (b'{"v": 1}\n', "ok", "missing"),
    (b'{"v": 1, "ok": "yes"}\n', "ok", "true or false"),
    (b'{"v": 1, "ok": false, "error": "x", "more": 1}\n', "more", "unknown field"),
    (_answer(status="broken"), "verdicts[0].status", "expected one of"),
    (_answer(status="unknown"), "verdicts[0].gpus", "unknown field"),
    (_answer(remediation="reboot"), "verdicts[0].remediation", "expected one of"),
    (_answer(check="a b"), "verdicts[0].check", "must match"),
    (_answer(reason="x" * 5000), "verdicts[0].reason", "longer than 4096"),
    (_answer(duration_s=-1), "verdicts[0].duration_s", "at least 0"),
    (_answer(gpus=[{"index": 0}]), "verdicts[0].gpus[0].uuid", "missing"),
    (_answer(values={"xid_79": "1"}), "verdicts[0].values.xid_79", "must be a number"),
    (_answer(values=[1]), "verdicts[0].values", "must be an object"),
    (_answer(values={"a\nb": 1}), "verdicts[0].values", "must match"),
    (_answer(age_s=_DROP), "verdicts[0].age_s", "missing"),
    (b'{"v": 1, "ok": true, "context": "prolog", "job_id": 3, "verdicts": {}}\n', "verdicts", "must be a list"),
    (b" " * (protocol.MAX_ANSWER_BYTES + 1) + b"\n", "answer", "longer than"),
]


@pytest.mark.parametrize(("line", "field", "why"), BAD_ANSWERS, ids=[f"{f}: {w}" for _, f, w in BAD_ANSWERS])
def test_a_garbled_answer_is_refused_naming_the_field(line: bytes, field: str, why: str) -> None:
    _refused(protocol.decode_answer, line, field, why)


def test_an_oversized_request_is_refused_when_encoded() -> None:
    with pytest.raises(ProtocolError, match="longer than 65536"):
        protocol.encode_hook_request(HookRequest(Context.PROLOG, {f"SLURM_X{i}": "v" * 16000 for i in range(5)}))
