"""Inside slurmctld: the Python functions job_submit_slurmpod.so calls through cffi's embedding API.

`build_plugin`'s init code imports this module and calls `register`, which binds `start`, `decide` and
`compile_fast` to the C functions declared in python_api.h. They take the cffi ``ffi`` and raw pointers
to the structs of slurmpod_job.h and fastpath.h, so tests drive them with an ABI-mode FFI over the same
declarations (`build_plugin.declarations`). They return `OK` only when they filled in their answer:
anything else (an exception, or cffi's default when Python could not start) makes the C shim reject the job.
Ref: https://cffi.readthedocs.io/en/stable/embedding.html, https://slurm.schedmd.com/job_submit_plugins.html
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from slurmpod import well_known as wk
from slurmpod.policy.decide import failed
from slurmpod.policy.decision import Decision
from slurmpod.policy.model import FailMode
from slurmpod.slurm_plugins import bridge, fastpath

log = logging.getLogger(__name__)

OK = 0x51504F4B  # "QPOK": the answer in *out is valid
STR_IN = ("account", "partition", "qos", "tres_per_node", "tres_per_job", "features", "comment", "name",
          "tres_per_task", "tres_per_socket")
NUM_IN = ("user_id", "group_id", "job_id", "is_modify", "moves_tier", "min_nodes", "max_nodes", "num_tasks",
          "time_limit", "req_switch", "wait4switch", "segment_size", "shared", "requeue", "warn_signal", "warn_time",
          "warn_flags")
# Which job_desc field the shim writes back: one bit each in out->set (SP_SET_* in slurmpod_job.h).
SET_BITS = {"partition": 1 << 0, "qos": 1 << 1, "time_limit": 1 << 2, "requeue": 1 << 3, "warn_signal": 1 << 4,
            "warn_time": 1 << 5, "warn_flags": 1 << 6, "req_switch": 1 << 7, "wait4switch": 1 << 8,
            "segment_size": 1 << 9, "tres_per_node": 1 << 10, "shared": 1 << 11}
STR_OUT = ("partition", "qos", "tres_per_node")


# Answers remembered per distinct submission (job_desc fields and the user's identity), for the policy
# file as loaded: sweeps and arrays submit the same job_desc over and over. Only without site rules,
# which may be impure (a quota service); cleared when the policy changes or the memo is full. Keys are
# digests, so an entry's size never depends on what the user sent (the shim refuses strings past 1 KiB).
MEMO_MAX = 512


@dataclass(frozen=True, slots=True)
class Memo:
    """The answers decided under one loaded policy: swapped whole, never emptied in place, so an answer
    is stored only in the memo of the policy it was decided under (check and store are one read)."""

    loaded: object  # the bridge.Loaded the answers came from
    answers: dict[bytes, bytes]


class _State:
    runtime: bridge.PluginRuntime | None = None
    memo: ClassVar[Memo] = Memo(None, {})


def register(ffi: Any, env: Mapping[str, str] | None = None) -> None:
    """Bind the plugin's extern "Python" functions (python_api.h) to this module; error=-1 on a raise.
    ``env``: slurmctld's environment (SLURM_CONF), read by the embedding init code."""
    conf = Path((env or {}).get("SLURM_CONF") or wk.SLURM_CONF)
    ffi.def_extern(name="slurmpod_py_start", error=-1)(lambda path, err, errlen: start(ffi, path, err, errlen, conf))
    ffi.def_extern(name="slurmpod_py_decide", error=-1)(lambda req, out: decide(ffi, req, out))
    ffi.def_extern(name="slurmpod_py_compile", error=-1)(lambda fast: compile_fast(ffi, fast))


def start(ffi: Any, path: Any, err: Any, errlen: int, conf: Path | None = None) -> int:
    """Plugin init(): load and validate the policy now, so a bad one shows in slurmctld's log at once.
    ``conf``: slurm.conf as slurmctld reads it (SLURM_CONF overrides its path, as for slurmctld): whether
    Slurm enforces accounts decides if the policy may grant access by account (None: as if it does).
    Ref: https://slurm.schedmd.com/slurm.conf.html"""
    _State.runtime = bridge.PluginRuntime(Path(ffi.string(path).decode()), slurm_conf=conf)
    loaded = _State.runtime.current()
    if loaded.policy is None:
        _put(ffi, err, errlen, f"policy {_State.runtime.path} unusable, jobs will be "
                               f"{'accepted unchanged' if loaded.fail_mode is FailMode.OPEN else 'rejected'} "
                               f"until it is fixed: {loaded.error}")
    return OK


def compile_fast(ffi: Any, fast: Any) -> int:
    """Fill the C fast path's table (a zeroed ``slurmpod_fast_t``) from the policy as loaded now."""
    runtime = _State.runtime
    if runtime is None:
        raise RuntimeError("slurmpod_py_start was not called")
    loaded = runtime.current()
    plan = fastpath.plan(loaded.policy) if loaded.policy is not None else "no usable policy"
    fastpath.fill(ffi, fast, plan, loaded.key)
    return OK


def decide(ffi: Any, req: Any, out: Any) -> int:
    """job_submit() / job_modify(): read *req, decide, fill in *out (what the C fast path left to Python)."""
    runtime = _State.runtime
    if runtime is None:
        raise RuntimeError("slurmpod_py_start was not called")
    loaded = runtime.current()
    memo = _State.memo  # one read: the memo checked is the memo stored into
    key = _memo_key(ffi, runtime, req) if loaded.policy is not None and not loaded.policy.custom else None
    if key is not None:
        if memo.loaded is not loaded:
            memo = _State.memo = Memo(loaded, {})
        hit = memo.answers.get(key)
        if hit is not None:
            ffi.memmove(out, hit, len(hit))
            return OK
    _decide(ffi, runtime, req, out, loaded)
    if key is not None and memo.loaded is loaded:
        if len(memo.answers) >= MEMO_MAX:
            memo = _State.memo = Memo(loaded, {})
        memo.answers[key] = bytes(ffi.buffer(out))
    return OK


def _memo_key(ffi: Any, runtime: bridge.PluginRuntime, req: Any) -> bytes | None:
    """A digest of everything a decision without site rules depends on: the numbers (the struct's leading
    uint32s), the strings (length-prefixed) and the user's name and groups; None when the identity
    lookup fails (that answer is never remembered)."""
    h = hashlib.blake2b(bytes(ffi.buffer(req)[0:ffi.offsetof("slurmpod_req_t", STR_IN[0])]), digest_size=32)
    for k in STR_IN:
        ptr = getattr(req, k)
        data = b"" if ptr == ffi.NULL else ffi.string(ptr)
        h.update(b"\0" if ptr == ffi.NULL else len(data).to_bytes(8, "little") + data)
    try:
        user, groups = runtime.identity(int(req.user_id))
    except bridge.IdentityUnavailable:
        return None
    h.update(repr((user, groups)).encode("utf-8", "backslashreplace"))
    return h.digest()


def _decide(ffi: Any, runtime: bridge.PluginRuntime, req: Any, out: Any, loaded: bridge.Loaded | None = None) -> None:
    desc: dict[str, int | str | None] = {k: int(getattr(req, k)) for k in NUM_IN}
    for key in STR_IN:
        ptr = getattr(req, key)
        desc[key] = ffi.string(ptr).decode("utf-8", "replace") if ptr != ffi.NULL else None
    loaded = loaded or runtime.current()
    decision, job = runtime.decide(desc, loaded)
    values = bridge.encode(decision)
    too_long = [k for k in STR_OUT if k in values and len(str(values[k]).encode()) >= len(getattr(out, k))]
    if too_long:
        decision = failed(loaded.fail_mode, f"value for {too_long[0]} too long for the plugin")
        values = bridge.encode(decision)
    _fill(ffi, out, decision, values)
    if job is not None and len(job.user.encode()) < len(out.user):
        _put(ffi, out.user, len(out.user), job.user)
    line = bridge.log_line(job, decision) if job is not None else f"verdict={decision.verdict.value} " \
                                                                   f"message={decision.message!r}"
    _put(ffi, out.log, len(out.log), line)


def _fill(ffi: Any, out: Any, decision: Decision, values: dict[str, int | str]) -> None:
    out.verdict = bridge.VERDICT_CODES[decision.verdict]
    out.refusal = int(decision.refusal) if not decision.allowed else 0
    out.set = 0
    for key, value in values.items():
        out.set |= SET_BITS[key]
        if key in STR_OUT:
            _put(ffi, getattr(out, key), len(getattr(out, key)), str(value))
        else:
            setattr(out, key, int(value))
    _put(ffi, out.message, len(out.message), decision.message)


def _put(ffi: Any, buf: Any, size: int, text: str) -> None:
    """Copy ``text`` into a char[size], NUL-terminated, cut to fit (with "..." when cut)."""
    data = text.encode("utf-8", "replace")
    if len(data) >= size:
        data = data[: size - 4] + b"..."
    ffi.memmove(buf, data + b"\0", len(data) + 1)
