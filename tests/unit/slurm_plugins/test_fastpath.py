"""The plugin's C fast path against the Python policy: every answer C gives is Python's, byte for byte.

The C evaluator (slurm_plugins/fastpath.c) is compiled on its own here with cffi's API mode, over the same
struct declarations the plugin uses; the Python side is `embedded._decide`, what the plugin calls when C declines.
Hypothesis draws policies (tiers, access, caps, grace signals, cpu-only partitions, topology) and requests
(sentinels, odd partition lists, GPU TRES strings, quotes and non-ASCII) and compares the whole out struct.
"""

from __future__ import annotations

import importlib
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cffi
import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from policykit import default_policy_text

from slurmpod.slurm_plugins import bridge, build_plugin, embedded, fastpath

NO_VAL, NO_VAL16, INFINITE = 0xFFFFFFFE, 0xFFFE, 0xFFFFFFFF
USERS = {1000: ("alice", ("users",)), 1001: ("bob", ("admins", "users")), 1002: ("o'hara", ())}


@pytest.fixture(scope="module")
def fast(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if shutil.which("gcc") is None and shutil.which("cc") is None:
        pytest.fail("a C compiler is needed to build the fast path (bootstrap-host.sh installs gcc)")
    out = tmp_path_factory.mktemp("fastpath")
    ffi = cffi.FFI()
    ffi.cdef(build_plugin.declarations(*build_plugin.CDEF_HEADERS))
    ffi.set_source("_slurmpod_fast_test", '#include "fastpath.h"\n', sources=[str(build_plugin.C_DIR / "fastpath.c")],
                   include_dirs=[str(build_plugin.C_DIR)],
                   extra_compile_args=["-O2", "-Wall", "-Werror", "-Wno-unused-function"])
    ffi.compile(tmpdir=str(out))
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module("_slurmpod_fast_test")
    finally:
        sys.path.remove(str(out))


class Both:
    """One policy, decided by C (when it answers) and by Python, on the same request."""

    def __init__(self, mod: Any, policy_path: Path) -> None:
        self.ffi, self.lib = mod.ffi, mod.lib
        self.runtime = bridge.PluginRuntime(policy_path, identity=lambda uid: USERS.get(uid, (str(uid), ())))
        loaded = self.runtime.current()
        self.table = self.ffi.new("slurmpod_fast_t *")
        assert loaded.policy is not None, loaded.error
        self.plan = fastpath.plan(loaded.policy)
        fastpath.fill(self.ffi, self.table, self.plan, loaded.key)

    def request(self, **fields: Any) -> tuple[Any, list[Any]]:
        ffi, keep = self.ffi, []
        req = ffi.new("slurmpod_req_t *")
        for key in embedded.NUM_IN:
            setattr(req, key, NO_VAL16 if key in {"segment_size", "shared", "requeue", "warn_signal", "warn_time",
                                                  "warn_flags"} else NO_VAL)
        req.user_id, req.group_id, req.is_modify = 1000, 1000, 0
        for key, value in fields.items():
            if isinstance(value, bytes):
                keep.append(ffi.new("char[]", value))
                setattr(req, key, keep[-1])
            elif value is not None:
                setattr(req, key, value)
        return req, keep

    def decide(self, **fields: Any) -> tuple[bytes | None, bytes]:
        """(C's answer or None when it declined, Python's answer), each the raw out struct."""
        req, _keep = self.request(**fields)
        user = USERS.get(int(req.user_id), (str(req.user_id), ()))[0]
        out_c, out_py = self.ffi.new("slurmpod_out_t *"), self.ffi.new("slurmpod_out_t *")
        decided = self.lib.slurmpod_fast_decide(self.table, req, user.encode(), out_c)
        embedded._decide(self.ffi, self.runtime, req, out_py)
        return (bytes(self.ffi.buffer(out_c)) if decided else None), bytes(self.ffi.buffer(out_py))

    def text(self, raw: bytes, field: str) -> str:
        out = self.ffi.new("slurmpod_out_t *")
        self.ffi.memmove(out, raw, len(raw))
        return str(self.ffi.string(getattr(out, field)).decode())


def _both(fast: Any, tmp_path: Path, text: str) -> Both:
    path = tmp_path / "policy.yaml"
    path.write_text(text, encoding="utf-8")
    return Both(fast, path)


@pytest.mark.parametrize(("fields", "verdict", "message"), [
    ({}, 0, ""),
    ({"partition": b"main", "time_limit": 30, "name": b"sweep-17"}, 0, ""),
    ({"partition": b"preempt", "time_limit": 30}, 1, "preemptible jobs may be preempted: requeue enabled; "
                                                     "SIGUSR1 sent 120s before the end or preemption, to checkpoint"),
    ({"partition": b"preempt"}, 1, "time limit set to the preemptible cap of 1440 min; preemptible jobs may be "
                                   "preempted: requeue enabled; SIGUSR1 sent 120s before the end or preemption, "
                                   "to checkpoint"),
    ({"partition": b"preempt", "time_limit": INFINITE}, 2, "time limit UNLIMITED exceeds the preemptible tier's "
                                                            "cap of 1440 min"),
    ({"partition": b"cpu,main", "tres_per_node": b"gres/gpu:1"}, 2, "partition cpu has no GPUs; submit GPU jobs "
                                                                     "to a GPU partition"),
], ids=["default-tier", "unique-name", "preempt-modify", "preempt-cap-set", "preempt-unlimited", "cpu-only"])
def test_the_default_policy_is_decided_in_c(fast: Any, tmp_path: Path, fields: dict[str, Any], verdict: int,
                                            message: str) -> None:
    both = _both(fast, tmp_path, default_policy_text())
    c, py = both.decide(**fields)
    assert c is not None, "the fast path declined a job of the default policy"
    assert c == py
    assert both.text(c, "message") == message
    assert f"verdict={('accept', 'modify', 'reject')[verdict]}" in both.text(c, "log")


@pytest.mark.parametrize(("text", "fields", "why"), [
    (default_policy_text(), {"partition": b"high"}, "access by group"),
    (default_policy_text(), {"partition": b"main", "is_modify": 1, "job_id": 42, "time_limit": 5},
     "a modification, judged on the merged job"),
    ("rules: [{file: r.py}]\n", {}, "site rules"),
    ("topology: {plugin: block, groupSize: 4}\n", {"min_nodes": 2, "tres_per_node": b"gres/gpu:8"}, "placement"),
    (default_policy_text(), {"partition": "gpu-é".encode()}, "not ASCII"),
    ("tiers: [{name: high, partitions: [high], access: {users: [alice]}}]\n", {"partition": b"high", "user_id": 1002,
                                                                  "account": b'x"y'}, "both quotes in the message"),
    (default_policy_text(), {"tres_per_job": b"gres/gpu:12345678901"}, "a count C cannot sum"),
], ids=["groups", "modify", "site-rules", "topology", "non-ascii", "quote", "huge-count"])
def test_what_c_leaves_to_python(fast: Any, tmp_path: Path, text: str, fields: dict[str, Any], why: str) -> None:
    (tmp_path / "r.py").write_text("def rule(job, decision):\n    return None\n", encoding="utf-8")
    both = _both(fast, tmp_path, text)
    c, _ = both.decide(**fields)
    assert c is None, why


def test_site_rules_compile_to_no_table(fast: Any, tmp_path: Path) -> None:
    (tmp_path / "r.py").write_text("def rule(job, decision):\n    return None\n", encoding="utf-8")
    both = _both(fast, tmp_path, "rules: [{file: r.py}]\n")
    assert isinstance(both.plan, str) and both.table.ok == 0


# --- the property: generated policies and requests ---------------------------------------------------------

PARTS = ("main", "preempt", "high", "cpu", "gpu")
QOS = ("normal", "low", "urgent")
TRES = (None, b"", b"gres/gpu:2", b"gres/gpu", b"gres:gpu:h100:8", b"gres/gpu:x2", b"gres/gpu:a1:", b"gres/gpu=3",
        b"cpu=4,gres/gpu:1", b"gres/gpu:0", b"gres/gpux", b" gres/gpu:1 ; gres/gpu:2", b"gres/gpu:h100=2",
        b"gres/gpu:-1", b"gres/gpu:_:07", b"gres/gpu:a.b-c", b"gres/gpu:9999999999", b"gres/gpu:\t1")


@st.composite
def policies(draw: st.DrawFn) -> dict[str, Any]:
    ntiers = draw(st.integers(0, 4))
    tiers: list[dict[str, Any]] = [{"name": f"t{i}"} for i in range(ntiers)]
    for names, key in ((PARTS, "partitions"), (QOS, "qos")):
        for name in names:
            owner = draw(st.integers(-1, ntiers - 1)) if ntiers else -1
            if owner >= 0:
                tiers[owner].setdefault(key, []).append(name)
    for i, tier in enumerate(tiers):
        if "partitions" not in tier and "qos" not in tier:
            tier["qos"] = [f"only-t{i}"]
        if draw(st.booleans()):
            tier["requeue"] = True
        if draw(st.booleans()):
            tier["graceSignal"] = {"signal": draw(st.sampled_from(["USR1", "TERM", 12])),
                                   "seconds": draw(st.sampled_from([1, 120, 65535])),
                                   "target": draw(st.sampled_from(["steps", "batch"]))}
        if draw(st.booleans()):
            tier["maxTimeMinutes"] = draw(st.sampled_from([1, 30, 60, 1440]))
            tier["overTime"] = draw(st.sampled_from(["reject", "clamp"]))
        access = draw(st.sampled_from(["everyone", "users", "accounts", "groups", "users+groups"]))
        if access != "everyone":
            tier["access"] = {k: v for k, v in (("users", ["alice"]), ("accounts", ["inference"]),
                                                 ("groups", ["admins"])) if k in access}
    doc: dict[str, Any] = {"tiers": tiers} if tiers else {}
    if tiers and draw(st.booleans()):
        doc["defaultTier"] = draw(st.sampled_from([t["name"] for t in tiers]))
    doc["cpuOnlyPartitions"] = draw(st.lists(st.sampled_from(PARTS), unique=True, max_size=3))
    doc["topology"] = draw(st.sampled_from([{"plugin": "none"},
                                            {"plugin": "tree", "groupSize": 4, "oversize": "reject"},
                                            {"plugin": "block", "groupSize": 2, "gpuJobsOnly": False},
                                            {"wholeNodeGpus": 8}]))
    return doc


def _ascii_or_odd(values: tuple[bytes | None, ...]) -> st.SearchStrategy[bytes | None]:
    odd = st.text(alphabet="abcgpumainres/:=,; '|\\é\t0123456789", max_size=24).map(lambda s: s.encode())
    return st.one_of(st.sampled_from(values), odd)


REQUESTS = st.fixed_dictionaries({
    "user_id": st.sampled_from([1000, 1001, 1002, 4242]),
    "partition": _ascii_or_odd((None, b"", b"main", b"preempt", b"high", b"cpu", b"gpu,cpu", b" cpu , main ",
                                b"main,,high", b"nope", b"a|b")),
    "qos": _ascii_or_odd((None, b"", b"normal", b"low", b"urgent", b"only-t0", b"only-t1")),
    "account": st.sampled_from([None, b"", b"inference", b"other", b"x'y", b'x"y', b"a\\b"]),
    "tres_per_node": _ascii_or_odd(TRES),
    "tres_per_job": st.sampled_from(TRES),
    "tres_per_task": st.sampled_from(TRES),
    "tres_per_socket": st.sampled_from(TRES),
    "min_nodes": st.sampled_from([NO_VAL, 0, 1, 2, 5]),
    "max_nodes": st.sampled_from([NO_VAL, 2, 8]),
    "time_limit": st.sampled_from([NO_VAL, 0, 5, 30, 60, 61, 1440, 1441, INFINITE]),
    "requeue": st.sampled_from([NO_VAL16, 0, 1]),
    "warn_signal": st.sampled_from([NO_VAL16, 0, 10]),
    "warn_flags": st.sampled_from([NO_VAL16, 0, 1, 4]),
    "job_id": st.sampled_from([NO_VAL, 0, 42]),
    "is_modify": st.sampled_from([0, 1]),
    "name": st.sampled_from([None, b"sweep", b"x'y"]),
    "comment": st.sampled_from([None, b"slurmpod:no-topology"]),
})


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=policies(), fields=st.lists(REQUESTS, min_size=1, max_size=6))
def test_c_answers_exactly_as_python(fast: Any, tmp_path: Path, doc: dict[str, Any],
                                     fields: list[dict[str, Any]]) -> None:
    both = _both(fast, tmp_path, yaml.safe_dump(doc))
    assert not isinstance(both.plan, str), both.plan
    for one in fields:
        c, py = both.decide(**one)
        event("decided in C" if c is not None else "left to Python")
        if c is not None:
            assert c == py, (one, both.text(c, "log"), both.text(py, "log"))
