"""The downwardAPI labels/annotations file as kubelet writes it (fieldpath.FormatMap, Go %q)."""

from __future__ import annotations

import pytest

from slurmpod import kubelet_format
from slurmpod_host.cluster import downward

# Expected strings from Go's strconv quote tests (src/strconv/quote_test.go, quotetests).
GO_QUOTE = [
    ("\a\b\f\r\n\t\v", r'"\a\b\f\r\n\t\v"'),
    ("\\", r'"\\"'),
    ("\u263a", '"\u263a"'),
    ("\U0010ffff", r'"\U0010ffff"'),
    ("\x04", r'"\x04"'),
    ("!\u00a0!\u2000!\u3000!", r'"!\u00a0!\u2000!\u3000!"'),
    ("\x7f", r'"\x7f"'),
    ('say "hi"', r'"say \"hi\""'),
    ("plain value", '"plain value"'),
    ('{"json": [1, 2]}', r'"{\"json\": [1, 2]}"'),
]


@pytest.mark.parametrize(("value", "quoted"), GO_QUOTE, ids=[repr(v) for v, _ in GO_QUOTE])
def test_values_quoted_like_go(value: str, quoted: str) -> None:
    assert downward.format_map({"k": value}) == f"k={quoted}"


def test_format_map_sorted_without_trailing_newline() -> None:
    text = downward.format_map({"zeta": "1", "app.kubernetes.io/name": "slurmpod", "b": "x\ny"})
    assert text == 'app.kubernetes.io/name="slurmpod"\nb="x\\ny"\nzeta="1"'


def test_format_map_empty() -> None:
    assert downward.format_map({}) == ""


@pytest.mark.parametrize(("value", "quoted"), GO_QUOTE, ids=[repr(v) for v, _ in GO_QUOTE])
def test_round_trip_through_pod_side_parser(value: str, quoted: str) -> None:
    text = downward.format_map({"a": value, "b/c": "d"})
    assert kubelet_format.parse(text, "labels") == {"a": value, "b/c": "d"}


META = downward.PodMeta(name="c-worker-0", namespace="ns", uid="u-1", node_name="kind-node-0",
                        pod_ip="10.0.0.2", host_ip="10.0.0.1", labels={"app": "x", "a/b": "y"},
                        annotations={"note": "n"})


@pytest.mark.parametrize(
    ("path", "for_volume", "expected"),
    [
        ("metadata.name", False, "c-worker-0"),
        ("metadata.namespace", True, "ns"),
        ("metadata.uid", False, "u-1"),
        ("spec.nodeName", False, "kind-node-0"),
        ("status.podIP", False, "10.0.0.2"),
        ("status.hostIP", False, "10.0.0.1"),
        ("metadata.labels['a/b']", False, "y"),
        ("metadata.labels['missing']", False, ""),
        ("metadata.annotations['note']", True, "n"),
        ("metadata.labels", True, 'a/b="y"\napp="x"'),
        ("metadata.annotations", True, 'note="n"'),
        ("metadata.labels", False, None),  # a whole map only in a volume
        ("status.podIP", True, None),  # only in env
        ("spec.serviceAccountName", False, None),
    ],
    ids=str,
)
def test_field_value(path: str, for_volume: bool, expected: str | None) -> None:
    assert downward.field_value(META, path, for_volume=for_volume) == expected
