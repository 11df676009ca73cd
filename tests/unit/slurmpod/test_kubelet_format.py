"""kubelet's downwardAPI file format: key="value", one per line, values quoted with Go's strconv.Quote.

Vectors are what Go's strconv.Unquote / strconv.Quote return for the same input.
Ref: https://pkg.go.dev/strconv#Unquote
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmpod import kubelet_format
from slurmpod.errors import BadInput

UNQUOTE = [
    ('""', "", "empty"),
    ('"workers"', "workers", "plain"),
    ('"\\x41"', "A", "hex-byte"),
    ('"\\u00e9"', "é", "u4"),
    ('"\\U0001F600"', "\U0001f600", "U8"),
    ('"\\101"', "A", "octal"),
    ('"\\000"', "\x00", "octal-nul"),
    ('"\\xc3\\xa9"', "é", "hex-bytes-utf8"),
    ('"\\303\\251"', "é", "octal-bytes-utf8"),
    ('"\\a\\b\\f\\n\\r\\t\\v"', "\a\b\f\n\r\t\v", "simple-escapes"),
    ('"\\\\"', "\\", "backslash"),
    ('"\\""', '"', "quote"),
    ('"héllo wörld"', "héllo wörld", "raw-utf8"),
    ('"a=b,c d"', "a=b,c d", "separators-kept"),
    ('"\\u2028"', "\u2028", "line-separator"),
]

BAD_UNQUOTE = [
    ('"\\q"', "unknown-escape"),
    ('"\\\'"', "single-quote-escape-in-double-quotes"),
    ('"\\x4"', "short-hex"),
    ('"\\xzz"', "non-hex"),
    ('"\\u12"', "short-u"),
    ('"\\ud800"', "surrogate-u"),
    ('"\\U00110000"', "beyond-unicode"),
    ('"\\400"', "octal-over-255"),
    ('"\\18"', "short-octal"),
    ('"\\8"', "digit-8"),
    ('"abc\\"', "dangling-backslash"),
    ('"a"b"', "inner-quote"),
    ('"a\nb"', "raw-newline"),
    ("abc", "unquoted"),
    ("'abc'", "single-quoted"),
    ('"abc', "unterminated"),
    ('"', "lone-quote"),
    ("", "empty-string"),
]

QUOTE = [
    ("", '""', "empty"),
    ("workers", '"workers"', "plain"),
    ("é", '"é"', "printable-unicode"),
    ("a\nb", '"a\\nb"', "newline"),
    ('say "hi"', '"say \\"hi\\""', "quote"),
    ("\\", '"\\\\"', "backslash"),
    ("\x00", '"\\x00"', "nul"),
    ("\x7f", '"\\x7f"', "del"),
    ("\x1b[0m", '"\\x1b[0m"', "escape-char"),
    ("\u00a0", '"\\u00a0"', "nbsp"),
    ("\u2028", '"\\u2028"', "line-separator"),
    ("\ufeff", '"\\ufeff"', "bom"),
    ("\U0001f600", '"\U0001f600"', "emoji-printable"),
    ("\U000e0001", '"\\U000e0001"', "tag-char"),
]


@pytest.mark.parametrize(("quoted", "expected"), [v[:2] for v in UNQUOTE], ids=[v[2] for v in UNQUOTE])
def test_go_unquote_matches_go(quoted: str, expected: str) -> None:
    assert kubelet_format.go_unquote(quoted) == expected


@pytest.mark.parametrize("quoted", [v[0] for v in BAD_UNQUOTE], ids=[v[1] for v in BAD_UNQUOTE])
def test_go_unquote_rejects_what_go_rejects(quoted: str) -> None:
    with pytest.raises(ValueError):
        kubelet_format.go_unquote(quoted)


@pytest.mark.parametrize(("value", "expected"), [v[:2] for v in QUOTE], ids=[v[2] for v in QUOTE])
def test_go_quote_matches_go(value: str, expected: str) -> None:
    assert kubelet_format.go_quote(value) == expected


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_quote_unquote_round_trip(value: str) -> None:
    quoted = kubelet_format.go_quote(value)
    assert len(quoted.splitlines()) == 1  # never breaks the one-line-per-key file
    assert kubelet_format.go_unquote(quoted) == value


LABEL_KEY = st.from_regex(r"\A([a-z0-9.-]{1,20}/)?[A-Za-z0-9]([A-Za-z0-9._-]{0,20}[A-Za-z0-9])?\Z")


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(LABEL_KEY, st.text(), max_size=8))
def test_render_parse_round_trip(mapping: dict[str, str]) -> None:
    text = kubelet_format.render(mapping)
    assert len(text.splitlines()) == len(mapping)  # one line per key, whatever the values hold
    assert kubelet_format.parse(text, "labels") == mapping


def test_parse_kubelet_file() -> None:
    text = (
        'app.kubernetes.io/instance="slurmpod"\n'
        'slurmpod.io/nodeset="workers"\n'
        'slurmpod.io/role="worker"\n'
        "\n"
        'topology.kubernetes.io/zone="eu-west-1a"\n'
    )
    assert kubelet_format.parse(text, "labels") == {
        "app.kubernetes.io/instance": "slurmpod",
        "slurmpod.io/nodeset": "workers",
        "slurmpod.io/role": "worker",
        "topology.kubernetes.io/zone": "eu-west-1a",
    }


def test_parse_value_may_contain_equals_and_escaped_newline() -> None:
    text = 'kubectl.kubernetes.io/last-applied-configuration="{\\"a\\":\\"b=c\\"}\\n"\n'
    assert kubelet_format.parse(text, "annotations") == {
        "kubectl.kubernetes.io/last-applied-configuration": '{"a":"b=c"}\n'
    }


def test_parse_reports_every_bad_line_with_its_number() -> None:
    text = 'a="ok"\nb=unquoted\nc="\\q"\na="again"\nnoequals\n'
    with pytest.raises(BadInput) as err:
        kubelet_format.parse(text, "/etc/podinfo/labels")
    fields = [p.field for p in err.value.problems]
    assert fields == [
        "/etc/podinfo/labels:2",
        "/etc/podinfo/labels:3",
        "/etc/podinfo/labels:4",
        "/etc/podinfo/labels:5",
    ]
    assert [p.value for p in err.value.problems] == ["b=unquoted", 'c="\\q"', 'a="again"', "noequals"]
    assert "duplicate key 'a'" in str(err.value)


def test_render_is_sorted_and_go_quoted() -> None:
    assert kubelet_format.render({"b": "x\ty", "a": "1"}) == 'a="1"\nb="x\\ty"\n'
