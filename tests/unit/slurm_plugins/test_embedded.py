"""The plugin's Python side, driven through the same C structs the shim passes (cffi, ABI mode).

These run `embedded.start` / `embedded.decide` exactly as the compiled plugin calls them, with the
struct declarations of slurmpod_job.h and fastpath.h, so a field the shim and Python disagree on fails here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cffi
import pytest
from policykit import default_policy_text

from slurmpod.policy import decide
from slurmpod.slurm_plugins import bridge, build_plugin, embedded

NO_VAL, NO_VAL16 = 0xFFFFFFFE, 0xFFFE


@pytest.fixture
def ffi() -> cffi.FFI:
    f = cffi.FFI()
    f.cdef(build_plugin.declarations(*build_plugin.CDEF_HEADERS))
    return f


@pytest.fixture
def policy_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "policy.yaml"
    path.write_text(default_policy_text(), encoding="utf-8")
    yield path
    embedded._State.runtime = None
    embedded._State.memo = embedded.Memo(None, {})


def _start(ffi: cffi.FFI, path: Path) -> str:
    err = ffi.new("char[1024]")
    assert embedded.start(ffi, ffi.new("char[]", str(path).encode()), err, 1024) == embedded.OK
    return str(ffi.string(err).decode())


def _decide(ffi: cffi.FFI, **fields: Any) -> Any:
    keep = []
    req = ffi.new("slurmpod_req_t *")
    for key in embedded.NUM_IN:
        setattr(req, key, NO_VAL16 if key in {"segment_size", "shared", "requeue", "warn_signal", "warn_time",
                                              "warn_flags"} else NO_VAL)
    req.user_id, req.group_id, req.is_modify = os.getuid(), os.getgid(), 0
    for key, value in fields.items():
        if isinstance(value, str):
            keep.append(ffi.new("char[]", value.encode()))
            setattr(req, key, keep[-1])
        else:
            setattr(req, key, value)
    out = ffi.new("slurmpod_out_t *")
    assert embedded.decide(ffi, req, out) == embedded.OK
    return out


def test_modify_sets_only_the_decided_fields(ffi: cffi.FFI, policy_file: Path) -> None:
    assert _start(ffi, policy_file) == ""
    out = _decide(ffi, partition="preempt", time_limit=30, min_nodes=2, tres_per_node="gres/gpu:8")
    assert out.verdict == bridge.VERDICT_CODES[bridge.Verdict.MODIFY]
    bits = embedded.SET_BITS
    assert out.set == bits["requeue"] | bits["warn_signal"] | bits["warn_time"] | bits["warn_flags"]
    assert (out.requeue, out.warn_signal, out.warn_time, out.warn_flags) == (1, 10, 120, 0)
    assert b"requeue enabled" in ffi.string(out.message)
    line = ffi.string(out.log).decode()
    assert line.startswith("submit job=new user=") and "verdict=modify" in line and "partition=preempt" in line


def test_reject_carries_the_message(ffi: cffi.FFI, policy_file: Path) -> None:
    _start(ffi, policy_file)
    out = _decide(ffi, partition="cpu", tres_per_job="gres/gpu:2")
    assert out.verdict == 2 and out.set == 0
    assert ffi.string(out.message) == b"partition cpu has no GPUs; submit GPU jobs to a GPU partition"


def test_the_policy_file_is_reread_when_it_changes(ffi: cffi.FFI, policy_file: Path) -> None:
    _start(ffi, policy_file)
    assert _decide(ffi, partition="main", time_limit=5).verdict == 0
    policy_file.write_text("cpuOnlyPartitions: [main]\n", encoding="utf-8")
    os.utime(policy_file, ns=(1, 1))  # a different mtime even within the filesystem's timestamp granularity
    assert _decide(ffi, partition="main", tres_per_node="gres/gpu:1").verdict == 2
    policy_file.write_text("tiers: [{name: x}]\n", encoding="utf-8")  # invalid: fail-closed until fixed
    out = _decide(ffi, partition="main", time_limit=5)
    assert out.verdict == 2
    assert ffi.string(out.message).decode().startswith("rejected by cluster policy: invalid policy: tiers[0]=")
    policy_file.write_text("failMode: open\ntiers: [{name: x}]\n", encoding="utf-8")
    assert _decide(ffi, partition="main").verdict == 0


def test_an_unusable_policy_at_start_is_reported_not_fatal(ffi: cffi.FFI, tmp_path: Path) -> None:
    err = _start(ffi, tmp_path / "missing.yaml")
    assert "unusable, jobs will be rejected" in err and "cannot read" in err
    out = _decide(ffi, partition="main")
    assert out.verdict == 2 and ffi.string(out.message).startswith(b"rejected by cluster policy: ")
    embedded._State.runtime = None


def test_sentinels_become_unset(ffi: cffi.FFI, policy_file: Path) -> None:
    desc: dict[str, int | str | None] = {k: NO_VAL for k in ("min_nodes", "max_nodes", "time_limit")}
    desc.update({"user_id": 7, "group_id": 7, "shared": 0, "requeue": NO_VAL16, "segment_size": NO_VAL16,
                 "partition": "", "tres_per_node": "gres/gpu:1"})
    req = bridge.request_from_desc(desc, "u", ())
    assert (req.min_nodes, req.time_limit, req.requeue, req.segment_size, req.partition) == (None,) * 5
    assert req.sharing is bridge.Sharing.EXCLUSIVE and req.gpus == 1


def test_a_value_too_long_for_the_shim_is_refused(ffi: cffi.FFI, tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("topology: {plugin: block, groupSize: 4, wholeNodeGpus: 8}\n", encoding="utf-8")
    _start(ffi, path)
    out = _decide(ffi, min_nodes=2, tres_per_node="x" * 1100 + ",gres/gpu:1")
    assert out.verdict == 2 and b"too long" in ffi.string(out.message)
    embedded._State.runtime = None


@pytest.fixture
def decide_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = decide.decide

    def counting(policy: Any, req: Any) -> Any:
        calls.append(1)
        return real(policy, req)

    monkeypatch.setattr(decide, "decide", counting)
    return calls


def _raw(ffi: cffi.FFI, out: Any) -> bytes:
    return bytes(ffi.buffer(out))


def test_an_identical_submission_reuses_the_answer(ffi: cffi.FFI, policy_file: Path, decide_calls: list[int]) -> None:
    _start(ffi, policy_file)
    first = _raw(ffi, _decide(ffi, partition="preempt", time_limit=30, name="sweep"))
    again = _raw(ffi, _decide(ffi, partition="preempt", time_limit=30, name="sweep"))
    assert first == again and len(decide_calls) == 1
    _decide(ffi, partition="preempt", time_limit=31, name="sweep")  # any field differs: decided afresh
    _decide(ffi, partition="preempt", time_limit=30, name="sweep", comment="x")
    assert len(decide_calls) == 3


def test_a_changed_policy_is_not_answered_from_memory(ffi: cffi.FFI, policy_file: Path,
                                                      decide_calls: list[int]) -> None:
    _start(ffi, policy_file)
    assert _decide(ffi, partition="main", tres_per_node="gres/gpu:1").verdict == 0
    policy_file.write_text("cpuOnlyPartitions: [main]\n", encoding="utf-8")
    os.utime(policy_file, ns=(1, 1))
    assert _decide(ffi, partition="main", tres_per_node="gres/gpu:1").verdict == 2
    assert len(decide_calls) == 2


def test_site_rules_are_asked_every_time(ffi: cffi.FFI, tmp_path: Path, decide_calls: list[int]) -> None:
    (tmp_path / "rules.py").write_text("def rule(job, decision):\n    return None\n", encoding="utf-8")
    path = tmp_path / "policy.yaml"
    path.write_text("rules: [{file: rules.py, function: rule}]\n", encoding="utf-8")
    _start(ffi, path)
    for _ in range(3):
        assert _decide(ffi, partition="main").verdict == 0
    assert len(decide_calls) == 3  # a site rule may be impure (a quota service): never remembered
    embedded._State.runtime = None


def test_the_answer_follows_the_users_groups(ffi: cffi.FFI, tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("tiers: [{name: high, partitions: [high], access: {groups: [admins]}}]\n", encoding="utf-8")
    _start(ffi, path)
    runtime = embedded._State.runtime
    assert runtime is not None
    now, groups = [0.0], [("users",)]
    runtime._clock, runtime._identity = (lambda: now[0]), (lambda uid: ("alice", groups[0]))
    assert _decide(ffi, partition="high").verdict == 2
    groups[0] = ("admins", "users")
    now[0] += bridge.IDENTITY_TTL_S + 1  # the identity cache expires; the remembered answer must not outlive it
    assert _decide(ffi, partition="high").verdict == 0
    embedded._State.runtime = None


def test_a_group_lookup_past_its_deadline_is_a_clear_refusal(tmp_path: Path) -> None:
    """NSS that hangs (LDAP down) must not hold slurmctld's job write lock: the call is refused in time."""
    import threading

    release = threading.Event()
    path = tmp_path / "policy.yaml"
    path.write_text(default_policy_text(), encoding="utf-8")
    runtime = bridge.PluginRuntime(path, identity=lambda uid: (release.wait(5), ("alice", ()))[1],
                                   deadline_s=0.05)
    decision, _ = runtime.decide({"user_id": 1000, "partition": "main"})
    release.set()
    assert decision.verdict.value == "reject" and "could not be looked up within 0.05 s" in decision.message
    assert decision.rules == ("identity",)


def test_identity_comes_from_the_callers_uid_not_the_jobs_gid(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(default_policy_text(), encoding="utf-8")
    seen: list[int] = []
    runtime = bridge.PluginRuntime(path, identity=lambda uid: (seen.append(uid), ("alice", ()))[1])
    runtime.decide({"user_id": 1000, "group_id": 0, "partition": "main"})
    assert seen == [1000]


def test_an_answer_decided_under_the_old_policy_is_not_stored_under_the_new(ffi: cffi.FFI, policy_file: Path) -> None:
    """Check and store are one read of the memo: a reload between them leaves the new memo clean."""
    _start(ffi, policy_file)
    runtime = embedded._State.runtime
    assert runtime is not None
    real = runtime.decide

    def reload_midway(desc: Any, loaded: Any = None) -> Any:
        answer = real(desc, loaded)
        embedded._State.memo = embedded.Memo(object(), {})  # another thread saw a new policy meanwhile
        return answer

    runtime.decide = reload_midway  # type: ignore[method-assign]
    _decide(ffi, partition="main", account="caf\u00e9")
    assert embedded._State.memo.answers == {}
