"""The plugin's timing histogram, as the bench reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurmpod.errors import BadInput
from slurmpod.slurm_plugins import stats


@pytest.mark.parametrize(("buckets", "q", "edge"), [
    ({}, 0.5, 0),
    ({10: 1}, 0.5, 11),
    ({10: 50, 20: 49, 900: 1}, 0.5, 11),
    ({10: 50, 20: 49, 900: 1}, 0.99, 21),
    ({10: 50, 20: 48, 900: 2}, 0.99, 901),
], ids=["empty", "one", "median", "p99-below-tail", "p99-in-tail"])
def test_percentile_is_the_upper_edge_of_its_bucket(buckets: dict[int, int], q: float, edge: int) -> None:
    assert stats.percentile(buckets, q) == edge


def test_reads_the_shims_json(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"calls": 4, "failures": 1, "sum_ns": 200_000, "max_ns": 90_000, "bucket_us": 1,
                                "buckets": {"30": 3, "90": 1}}), encoding="utf-8")
    s = stats.read(path)
    assert (s.calls, s.failures, s.mean_us, s.p50_us, s.p99_us, s.max_us) == (4, 1, 50.0, 31, 91, 90.0)


def test_a_malformed_file_names_the_field() -> None:
    with pytest.raises(BadInput, match=r"stats\.buckets\.x"):
        stats.parse({"calls": 1, "failures": 0, "sum_ns": 1, "max_ns": 1, "buckets": {"x": 1}})


def test_delta_counts_only_the_calls_between_two_snapshots() -> None:
    before = {"calls": 4, "fast": 3, "failures": 1, "sum_ns": 200_000, "max_ns": 90_000, "bucket_us": 1,
              "buckets": {"30": 3, "90": 1}}
    after = {"calls": 7, "fast": 6, "failures": 1, "sum_ns": 230_000, "max_ns": 90_000, "bucket_us": 1,
             "buckets": {"5": 2, "30": 4, "90": 1}}
    s = stats.parse(stats.delta(before, after))
    assert (s.calls, s.fast, s.failures, s.mean_us, s.p50_us, s.p99_us) == (3, 3, 0, 10.0, 6, 31)
