"""JobRequest: GPUs parsed from TRES strings, and the JSON form `policy check` reads."""

from __future__ import annotations

import pytest

from slurmpod.errors import BadInput
from slurmpod.policy import request
from slurmpod.policy.request import JobRequest, Sharing


@pytest.mark.parametrize(("tres", "count", "kind"), [
    (None, 0, None),
    ("", 0, None),
    ("gres/gpu:8", 8, None),
    ("gres/gpu:h100:2", 2, "h100"),
    ("gres/gpu", 1, None),
    ("gres/gpu:a100", 1, "a100"),
    ("cpu=4,gres/gpu:4", 4, None),
    ("gres/gpu:h100:2;gres/gpu:a100:1", 3, "h100"),
    ("gres/shard:8", 0, None),
    ("gres/gpu:h100:x", 0, None),
], ids=["none", "empty", "count", "typed", "bare", "type-only", "with-cpu", "two-types", "not-gpu", "garbage"])
def test_gpus_are_parsed_from_tres_strings(tres: str | None, count: int, kind: str | None) -> None:
    assert request.gpu_count(tres) == count
    assert request.gpu_type(tres) == kind


@pytest.mark.parametrize(("tres", "expected"), [
    (None, "gres/gpu:8"),
    ("gres/gpu:2", "gres/gpu:8"),
    ("gres/gpu:h100:2", "gres/gpu:h100:8"),
    ("gres/mps:100,gres/gpu:1", "gres/mps:100,gres/gpu:8"),
], ids=["unset", "count", "keeps-type", "keeps-other-tres"])
def test_whole_node_rewrites_only_the_gpu_entry(tres: str | None, expected: str) -> None:
    assert request.with_gpus_per_node(tres, 8) == expected


def test_total_gpus_per_job_or_per_node_times_nodes() -> None:
    assert JobRequest(uid=1, user="u", min_nodes=4, tres_per_node="gres/gpu:8").gpus == 32
    assert JobRequest(uid=1, user="u", min_nodes=4, tres_per_job="gres/gpu:6").gpus == 6
    assert JobRequest(uid=1, user="u").nodes == 1


def test_json_round_trip() -> None:
    req = JobRequest(uid=5, user="ann", groups=("ml",), partition="gpu", min_nodes=2, tres_per_node="gres/gpu:8",
                     sharing=Sharing.EXCLUSIVE, requeue=False, time_limit=60)
    assert request.from_mapping(request.to_mapping(req)) == req


@pytest.mark.parametrize(("doc", "field", "reason"), [
    ({"user": "a"}, "uid", "required"),
    ({"uid": 1, "user": "a", "min_node": 2}, "min_node", "unknown key"),
    ({"uid": 1, "user": "a", "min_nodes": "2"}, "min_nodes", "an integer"),
    ({"uid": 1, "user": "a", "min_nodes": -2}, "min_nodes", ">= 0"),
    ({"uid": 1, "user": "a", "requeue": 1}, "requeue", "true or false"),
    ({"uid": 1, "user": "a", "sharing": "yes"}, "sharing", "expected one of"),
    ({"uid": 1, "user": "a", "groups": "ml"}, "groups", "list of group names"),
    ([], "(document)", "mapping"),
], ids=["no-uid", "typo", "string-int", "negative", "int-bool", "bad-enum", "groups-string", "not-a-mapping"])
def test_bad_job_json_names_the_field(doc: object, field: str, reason: str) -> None:
    with pytest.raises(BadInput) as exc:
        request.from_mapping(doc)
    assert any(p.field == field and reason in p.reason for p in exc.value.problems), exc.value
