"""Read the plugin's own timing of job_submit/job_modify calls (the JSON the C shim writes).

The shim adds every call's duration, measured with clock_gettime(CLOCK_MONOTONIC) around the whole
call (copying job_desc, the C fast path or Python, writing back), to 1 us buckets, and counts the calls
the C fast path decided; the bench reads p50/p99 from them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurmpod.problems import Problems


@dataclass(frozen=True, slots=True)
class PluginStats:
    calls: int
    fast: int  # calls decided by the C fast path, without Python
    failures: int  # calls where Python did not answer (the job was rejected)
    mean_us: float
    p50_us: int  # upper edge of the bucket holding the median call
    p99_us: int
    max_us: float


def percentile(buckets: dict[int, int], q: float) -> int:
    """The smallest bucket edge (us) at or below which a fraction ``q`` of the calls fall."""
    total = sum(buckets.values())
    if total == 0:
        return 0
    seen = 0
    for us in sorted(buckets):
        seen += buckets[us]
        if seen >= q * total:
            return us + 1
    return max(buckets) + 1


def parse(raw: Any, where: str = "stats") -> PluginStats:
    p = Problems()
    doc = p.mapping(where, raw)
    calls = p.typed(f"{where}.calls", doc.get("calls"), int, "an integer") or 0
    fast = p.typed(f"{where}.fast", doc.get("fast", 0), int, "an integer") or 0
    failures = p.typed(f"{where}.failures", doc.get("failures"), int, "an integer") or 0
    sum_ns = p.typed(f"{where}.sum_ns", doc.get("sum_ns"), int, "an integer") or 0
    max_ns = p.typed(f"{where}.max_ns", doc.get("max_ns"), int, "an integer") or 0
    buckets: dict[int, int] = {}
    for key, count in p.mapping(f"{where}.buckets", doc.get("buckets")).items():
        if key.isdigit() and isinstance(count, int):
            buckets[int(key)] = count
        else:
            p.add(f"{where}.buckets.{key}", count, "must map a bucket (us) to a count")
    p.raise_if_any()
    return PluginStats(calls, fast, failures, sum_ns / calls / 1000 if calls else 0.0, percentile(buckets, 0.50),
                       percentile(buckets, 0.99), max_ns / 1000)


def delta(before: Any, after: Any) -> dict[str, Any]:
    """The shim's JSON for the calls between two snapshots of it (the later max_ns kept: it cannot be split)."""
    out: dict[str, Any] = {key: int(after.get(key, 0)) - int(before.get(key, 0))
                           for key in ("calls", "fast", "failures", "sum_ns")}
    out["max_ns"] = int(after.get("max_ns", 0))
    out["bucket_us"] = after.get("bucket_us", 1)
    old = before.get("buckets", {})
    out["buckets"] = {k: n - int(old.get(k, 0)) for k, n in after.get("buckets", {}).items() if n - int(old.get(k, 0))}
    return out


def read(path: Path) -> PluginStats:
    return parse(json.loads(path.read_text(encoding="utf-8")), str(path))
