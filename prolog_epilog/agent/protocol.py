"""The health agent's wire format: one JSON request line, one JSON answer line, UTF-8, each ending in "\\n".

    request  {"v": 1, "context": "prolog", "job": {"id": 12, "gpus": [0, 1], "skip": ["nvlink"]},
              "recheck": null, "deadline_s": 10.0}
    answer   {"v": 1, "ok": true, "context": "prolog", "job_id": 12, "verdicts": [VERDICT, ...]}
             {"v": 1, "ok": false, "error": "busy: ..."}
    VERDICT  {"check", "status": ok|skipped|warn|fail, "reason", "remediation", "duration_s", "gpus",
              "values", "age_s"}  (a result as `check run --json` prints it, and its age)
             {"check", "status": "unknown", "timeout_s", "duration_s", "age_s"}  (no verdict in time)

A hook (the thin client that Prolog=, Epilog= and HealthCheckProgram= name) asks the agent to run
the whole hook, actions included, with the SLURM* environment slurmd gave it:

    request  {"v": 1, "hook": "prolog"|"epilog"|"healthcheck", "deadline_s": 10.0,
              ["job_fields": false,] "env": {"SLURM_JOB_ID": "12", ...}}
    answer   {"v":1,"ok":true,"exit":0,"stderr_len":N}  then N bytes: what the hook writes to stderr
             {"v": 1, "ok": false, "error": "..."}  (the client then runs the Python hook itself)

The hook answer's first line is written with its keys in exactly that order and no spaces, so a client
in C reads it with one sscanf. ``env`` names only SLURM_*, SLURMD_* and CUDA_VISIBLE_DEVICES: the rest of
a hook's environment is the pod's (SLURMPOD_* settings too), which the agent has, so a client cannot
point it elsewhere. ``"job_fields": false`` (slurmd's PrEp plugin, prep_slurmpod.c) says the job
credential's fields (SLURM_JOB_COMMENT, SLURM_JOB_EXTRA) are not in ``env``: the hook looks them up when
it needs them.

Both ends parse strictly: a line over its limit, bytes that are not UTF-8, JSON that is not one object,
NaN or Infinity, a duplicate or unknown key, a missing key, a wrong type or a value out of range is
refused with a ``ProtocolError`` naming the field. A peer that sends anything else is not understood.
``job`` carries what the checks read from the hook's environment (``job.JobInfo``): the agent plans the
same checks the hook would; ``recheck`` is the check the periodic run re-runs while its drain stands.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from slurmpod.errors import BadInput, Problem
from slurmpod.prolog_epilog.job import JobInfo
from slurmpod.prolog_epilog.result import CheckResult, Context, Gpu, Remediation, Status, Unknown, Verdict

VERSION = 1
MAX_REQUEST_BYTES = 65536  # a check request is a few hundred bytes; a hook's environment a few KiB
MAX_ENV = 512  # variables in a hook request (slurmd sets about 40)
MAX_ENV_VALUE = 16384
MAX_STDERR = 65536  # bytes of a hook's findings
# The variables a hook request may carry. Ref: https://slurm.schedmd.com/prolog_epilog.html
_ENV_NAME = re.compile(r"(SLURM_|SLURMD_)[A-Z0-9_]+|CUDA_VISIBLE_DEVICES")
HOOKS = {"prolog": Context.PROLOG, "epilog": Context.EPILOG, "healthcheck": Context.PERIODIC}
MAX_ANSWER_BYTES = 1 << 20  # ~20 verdicts of a few hundred bytes each; room for long reasons
MAX_DEADLINE_S = 300.0  # no hook runs that long (PrologEpilogTimeout defaults to 60 s)
# Slurm's job ids are uint32_t. Ref: https://slurm.schedmd.com/job_array.html (and slurm.h job_id)
MAX_JOB_ID = 2**32 - 1
MAX_GPUS = 64  # entries in a job's GPU list, and GPUs one verdict names
MAX_GPU_INDEX = 1023
MAX_SKIP = 64
MAX_VERDICTS = 64
MAX_VALUES = 256
MAX_REASON = 4096
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_UUID = re.compile(r"[A-Za-z0-9-]{0,96}")
# A value's name: a metric label, which may carry a path ("free_gib:/scratch"); printable ASCII only.
_VALUE_NAME = re.compile(r"[\x21-\x7e][\x20-\x7e]{0,255}")
UNKNOWN = "unknown"


class ProtocolError(BadInput):
    """A line that is not a request (or an answer) of this protocol; names the field."""


def _refuse(field: str, value: object, reason: str) -> ProtocolError:
    shown = value if isinstance(value, str) else json.dumps(value, default=str)[:200]
    return ProtocolError([Problem(field, shown, reason)])


@dataclass(frozen=True, slots=True)
class Request:
    context: Context
    job: JobInfo = field(default_factory=JobInfo)
    recheck: str | None = None
    deadline_s: float = 10.0  # the agent answers within this (from its arrival), or the hook stops waiting


@dataclass(frozen=True, slots=True)
class Aged:
    """A verdict, and how old it is (0: run for this request)."""

    verdict: Verdict
    age_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Answer:
    context: Context
    job_id: int | None
    verdicts: tuple[Aged, ...]


@dataclass(frozen=True, slots=True)
class HookRequest:
    """Run this hook, actions included, with this environment (over the agent's own)."""

    context: Context
    env: Mapping[str, str]
    deadline_s: float = 10.0
    job_fields: bool = True  # False: env lacks the job credential's fields (comment, extra)


@dataclass(frozen=True, slots=True)
class HookAnswer:
    """What the hook exits with, and what it writes to stderr (slurmd logs it)."""

    exit_code: int
    stderr: str = ""


@dataclass(frozen=True, slots=True)
class Refusal:
    """The agent could not answer (busy, bad request); the hook runs the checks itself."""

    error: str


# --- encoding -------------------------------------------------------------------------------------------

def _line(doc: Mapping[str, object], limit: int, what: str) -> bytes:
    data = json.dumps(doc, separators=(",", ":"), allow_nan=False).encode() + b"\n"
    if len(data) > limit:
        raise _refuse(what, f"{len(data)} bytes", f"longer than {limit} bytes")
    return data


def encode_request(r: Request) -> bytes:
    return _line({
        "v": VERSION, "context": r.context.value, "recheck": r.recheck, "deadline_s": r.deadline_s,
        "job": {"id": r.job.job_id, "gpus": list(r.job.gpus), "skip": sorted(r.job.skip)},
    }, MAX_REQUEST_BYTES, "request")


def is_hook_variable(name: str) -> bool:
    """Whether a hook request carries this variable (the rest of a hook's environment is the pod's)."""
    return _ENV_NAME.fullmatch(name) is not None


def encode_hook_request(r: HookRequest) -> bytes:
    hook = next(name for name, c in HOOKS.items() if c is r.context)
    doc: dict[str, Any] = {"v": VERSION, "hook": hook, "deadline_s": r.deadline_s}
    if not r.job_fields:
        doc["job_fields"] = False
    return _line({**doc, "env": dict(r.env)}, MAX_REQUEST_BYTES, "request")


def encode_hook_answer(a: HookAnswer) -> bytes:
    body = a.stderr.encode("utf-8", "replace")[:MAX_STDERR]
    return f'{{"v":{VERSION},"ok":true,"exit":{a.exit_code:d},"stderr_len":{len(body)}}}\n'.encode() + body


def _verdict_doc(a: Aged) -> dict[str, object]:
    v = a.verdict
    if isinstance(v, Unknown):
        return {"check": v.check, "status": UNKNOWN, "timeout_s": v.timeout, "duration_s": round(v.duration, 6),
                "age_s": round(a.age_s, 3)}
    return {**v.to_json(), "age_s": round(a.age_s, 3)}


def encode_answer(a: Answer | Refusal) -> bytes:
    if isinstance(a, Refusal):
        return _line({"v": VERSION, "ok": False, "error": a.error[:MAX_REASON]}, MAX_ANSWER_BYTES, "answer")
    return _line({"v": VERSION, "ok": True, "context": a.context.value, "job_id": a.job_id,
                  "verdicts": [_verdict_doc(x) for x in a.verdicts]}, MAX_ANSWER_BYTES, "answer")


# --- strict decoding ------------------------------------------------------------------------------------

def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number this protocol carries")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def _document(line: bytes, limit: int, what: str) -> dict[str, Any]:
    if len(line) > limit:
        raise _refuse(what, f"{len(line)} bytes", f"longer than {limit} bytes")
    if not line.endswith(b"\n") or b"\n" in line[:-1]:
        raise _refuse(what, line[:80].decode("utf-8", "replace"), "must be exactly one line ending in a newline")
    try:
        text = line[:-1].decode("utf-8")
        doc = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_no_duplicates)
    except UnicodeDecodeError:
        raise _refuse(what, line[:80].decode("utf-8", "replace"), "not UTF-8") from None
    except RecursionError:
        raise _refuse(what, line[:80].decode("utf-8", "replace"), "nested too deeply") from None
    except ValueError as exc:
        raise _refuse(what, line[:80].decode("utf-8", "replace"), f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise _refuse(what, doc, "must be a JSON object")
    return doc


def _keys(doc: Mapping[str, Any], field: str, required: set[str], optional: frozenset[str] = frozenset()) -> None:
    for k in sorted(doc):
        if k not in required and k not in optional:
            raise _refuse(f"{field}.{k}" if field else k, doc[k], "unknown field")
    for k in sorted(required):
        if k not in doc:
            raise _refuse(f"{field}.{k}" if field else k, "", "missing")


def _int(value: Any, field: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _refuse(field, value, "must be a whole number")
    if not lo <= value <= hi:
        raise _refuse(field, value, f"must be between {lo} and {hi}")
    return value


def _number(value: Any, field: str, lo: float, hi: float, *, lo_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _refuse(field, value, "must be a number")
    if value > hi or value < lo or (lo_open and value == lo):
        raise _refuse(field, value, f"must be {'over' if lo_open else 'at least'} {lo:g} and at most {hi:g}")
    return float(value)


def _str(value: Any, field: str, limit: int, pattern: re.Pattern[str] | None = None) -> str:
    if not isinstance(value, str):
        raise _refuse(field, value, "must be a string")
    if len(value) > limit:
        raise _refuse(field, value, f"longer than {limit} characters")
    if pattern is not None and not pattern.fullmatch(value):
        raise _refuse(field, value, f"must match {pattern.pattern}")
    return value


def _list(value: Any, field: str, limit: int) -> list[Any]:
    if not isinstance(value, list):
        raise _refuse(field, value, "must be a list")
    if len(value) > limit:
        raise _refuse(field, f"{len(value)} entries", f"more than {limit} entries")
    return value


def _enum(value: Any, field: str, parse: Callable[[str], Any], allowed: list[str]) -> Any:
    if not isinstance(value, str) or value not in allowed:
        raise _refuse(field, value, f"expected one of {', '.join(allowed)}")
    return parse(value)


def _version(doc: Mapping[str, Any]) -> None:
    _int(doc["v"], "v", VERSION, VERSION)


def decode_hook_answer(data: bytes) -> HookAnswer | Refusal:
    """What a client reads: the first line, then its stderr_len bytes."""
    head, sep, body = data.partition(b"\n")
    doc = _document(head + sep, 256 if b'"ok":true' in head else MAX_ANSWER_BYTES, "answer")
    if doc.get("ok") is False:
        _keys(doc, "", {"v", "ok", "error"})
        _version(doc)
        return Refusal(_str(doc["error"], "error", MAX_REASON))
    _keys(doc, "", {"v", "ok", "exit", "stderr_len"})
    _version(doc)
    if doc["ok"] is not True:
        raise _refuse("ok", doc["ok"], "must be true or false")
    code = _int(doc["exit"], "exit", 0, 255)
    size = _int(doc["stderr_len"], "stderr_len", 0, MAX_STDERR)
    if len(body) != size:
        raise _refuse("stderr_len", size, f"{len(body)} bytes follow")
    return HookAnswer(code, body.decode("utf-8", "replace"))


def _decode_hook_request(doc: Mapping[str, Any]) -> HookRequest:
    _keys(doc, "", {"v", "hook", "deadline_s", "env"}, frozenset({"job_fields"}))
    _version(doc)
    job_fields = doc.get("job_fields", True)
    if not isinstance(job_fields, bool):
        raise _refuse("job_fields", job_fields, "must be true or false")
    context = _enum(doc["hook"], "hook", HOOKS.__getitem__, sorted(HOOKS))
    deadline = _number(doc["deadline_s"], "deadline_s", 0.0, MAX_DEADLINE_S, lo_open=True)
    env = doc["env"]
    if not isinstance(env, dict):
        raise _refuse("env", env, "must be an object")
    if len(env) > MAX_ENV:
        raise _refuse("env", f"{len(env)} entries", f"more than {MAX_ENV} entries")
    for name, value in env.items():
        _str(name, "env", 64, _ENV_NAME)
        _str(value, f"env.{name}", MAX_ENV_VALUE)
        if "\x00" in value:
            raise _refuse(f"env.{name}", value, "holds a NUL, which no environment can")
    return HookRequest(context, dict(env), deadline, job_fields)


def decode_request(line: bytes) -> Request | HookRequest:
    doc = _document(line, MAX_REQUEST_BYTES, "request")
    if "hook" in doc:
        return _decode_hook_request(doc)
    _keys(doc, "", {"v", "context", "job", "recheck", "deadline_s"})
    _version(doc)
    context = _enum(doc["context"], "context", Context, [c.value for c in Context])
    job = doc["job"]
    if not isinstance(job, dict):
        raise _refuse("job", job, "must be an object")
    _keys(job, "job", {"id", "gpus", "skip"})
    job_id = None if job["id"] is None else _int(job["id"], "job.id", 0, MAX_JOB_ID)
    gpu_list, skip_list = _list(job["gpus"], "job.gpus", MAX_GPUS), _list(job["skip"], "job.skip", MAX_SKIP)
    gpus = tuple(_int(g, f"job.gpus[{i}]", 0, MAX_GPU_INDEX) for i, g in enumerate(gpu_list))
    skip = frozenset(_str(n, f"job.skip[{i}]", 64, _NAME) for i, n in enumerate(skip_list))
    recheck = None if doc["recheck"] is None else _str(doc["recheck"], "recheck", 64, _NAME)
    deadline = _number(doc["deadline_s"], "deadline_s", 0.0, MAX_DEADLINE_S, lo_open=True)
    return Request(context, JobInfo(job_id, tuple(sorted(set(gpus))), skip), recheck, deadline)


_RESULT_KEYS = {"check", "status", "reason", "remediation", "duration_s", "gpus", "values", "age_s"}
_UNKNOWN_KEYS = {"check", "status", "timeout_s", "duration_s", "age_s"}


def _decode_verdict(doc: Any, field: str) -> Aged:
    if not isinstance(doc, dict):
        raise _refuse(field, doc, "must be an object")
    status = doc.get("status")
    if status == UNKNOWN:
        _keys(doc, field, _UNKNOWN_KEYS)
        verdict: Verdict = Unknown(_str(doc["check"], f"{field}.check", 64, _NAME),
                                   _number(doc["timeout_s"], f"{field}.timeout_s", 0.0, MAX_DEADLINE_S),
                                   _number(doc["duration_s"], f"{field}.duration_s", 0.0, MAX_DEADLINE_S))
        return Aged(verdict, _number(doc["age_s"], f"{field}.age_s", 0.0, 1e9))
    _keys(doc, field, _RESULT_KEYS)
    gpus = []
    for i, g in enumerate(_list(doc["gpus"], f"{field}.gpus", MAX_GPUS)):
        if not isinstance(g, dict):
            raise _refuse(f"{field}.gpus[{i}]", g, "must be an object")
        _keys(g, f"{field}.gpus[{i}]", {"index", "uuid"})
        gpus.append(Gpu(_int(g["index"], f"{field}.gpus[{i}].index", -1, MAX_GPU_INDEX),
                        _str(g["uuid"], f"{field}.gpus[{i}].uuid", 96, _UUID)))
    values = doc["values"]
    if not isinstance(values, dict):
        raise _refuse(f"{field}.values", values, "must be an object")
    if len(values) > MAX_VALUES:
        raise _refuse(f"{field}.values", f"{len(values)} entries", f"more than {MAX_VALUES} entries")
    pairs = tuple((_str(k, f"{field}.values", 256, _VALUE_NAME),
                   _number(v, f"{field}.values.{k}", -1e18, 1e18)) for k, v in values.items())
    result = CheckResult(
        check=_str(doc["check"], f"{field}.check", 64, _NAME),
        status=_enum(status, f"{field}.status", Status, [s.value for s in Status]),
        reason=_str(doc["reason"], f"{field}.reason", MAX_REASON),
        remediation=_enum(doc["remediation"], f"{field}.remediation", Remediation, [r.value for r in Remediation]),
        duration=_number(doc["duration_s"], f"{field}.duration_s", 0.0, MAX_DEADLINE_S),
        gpus=tuple(gpus),
        values=pairs,
    )
    return Aged(result, _number(doc["age_s"], f"{field}.age_s", 0.0, 1e9))


def decode_answer(line: bytes) -> Answer | Refusal:
    doc = _document(line, MAX_ANSWER_BYTES, "answer")
    if "ok" not in doc:
        raise _refuse("ok", "", "missing")
    if doc["ok"] is False:
        _keys(doc, "", {"v", "ok", "error"})
        _version(doc)
        return Refusal(_str(doc["error"], "error", MAX_REASON))
    if doc["ok"] is not True:
        raise _refuse("ok", doc["ok"], "must be true or false")
    _keys(doc, "", {"v", "ok", "context", "job_id", "verdicts"})
    _version(doc)
    context = _enum(doc["context"], "context", Context, [c.value for c in Context])
    job_id = None if doc["job_id"] is None else _int(doc["job_id"], "job_id", 0, MAX_JOB_ID)
    verdicts = tuple(_decode_verdict(v, f"verdicts[{i}]")
                     for i, v in enumerate(_list(doc["verdicts"], "verdicts", MAX_VERDICTS)))
    return Answer(context, job_id, verdicts)
