"""The cluster spec's `metrics` section: the controller's exporter on by default, its poll interval bounded."""

from __future__ import annotations

from typing import Any

import pytest

from slurmpod import well_known as wk
from slurmpod.entrypoints import cluster_spec
from slurmpod.entrypoints.cluster_spec import MetricsSpec
from slurmpod.errors import BadInput


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({}, MetricsSpec(enabled=True, poll_seconds=wk.DEFAULT_EXPORTER_POLL_S)),
        ({"metrics": None}, MetricsSpec(enabled=True, poll_seconds=15)),
        ({"metrics": {"enabled": False}}, MetricsSpec(enabled=False, poll_seconds=15)),
        ({"metrics": {"pollSeconds": 60}}, MetricsSpec(enabled=True, poll_seconds=60)),
        ({"metrics": {"pollSeconds": "30"}}, MetricsSpec(enabled=True, poll_seconds=30)),
        ({"metrics": {"enabled": True, "pollSeconds": wk.MIN_EXPORTER_POLL_S}}, MetricsSpec(True, 5)),
    ],
    ids=["absent", "null", "off", "slower", "number-as-text", "fastest"],
)
def test_metrics_section(doc: dict[str, Any], expected: MetricsSpec) -> None:
    assert cluster_spec.parse(doc).metrics == expected


@pytest.mark.parametrize(
    ("metrics", "field", "value"),
    [
        ({"enabled": "yes"}, "metrics.enabled", "yes"),
        ({"pollSeconds": 1}, "metrics.pollSeconds", "1"),
        ({"pollSeconds": 3601}, "metrics.pollSeconds", "3601"),
        ({"pollSeconds": "soon"}, "metrics.pollSeconds", "soon"),
        ({"pollSeconds": True}, "metrics.pollSeconds", "True"),
        ({"port": 9401}, "metrics.port", "9401"),
        ("on", "metrics", "on"),
    ],
    ids=["enabled-not-bool", "poll-too-fast", "poll-too-slow", "poll-not-number", "poll-bool", "unknown-key",
         "not-a-mapping"],
)
def test_bad_metrics_name_the_key(metrics: object, field: str, value: str) -> None:
    with pytest.raises(BadInput) as err:
        cluster_spec.parse({"metrics": metrics})
    assert (field, value) in [(p.field, p.value) for p in err.value.problems]


def test_every_metrics_problem_at_once() -> None:
    with pytest.raises(BadInput) as err:
        cluster_spec.parse({"metrics": {"enabled": 1, "pollSeconds": 0}})
    assert sorted(p.field for p in err.value.problems) == ["metrics.enabled", "metrics.pollSeconds"]
