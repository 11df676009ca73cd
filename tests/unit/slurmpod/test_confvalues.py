"""Values bound for Slurm and supervisord config: every validator accepts the real thing, refuses the rest."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmpod import confvalues
from slurmpod.errors import BadInput

Check = Callable[[str, str], str]

GOOD: list[tuple[Check, str, str]] = [
    (confvalues.node_name, "slurmpod-worker-0", "node-pod-name"),
    (confvalues.node_name, "a", "node-one-char"),
    (confvalues.node_name, "w" * 63, "node-63-chars"),
    (confvalues.host, "slurmpod-controller-0", "host-name"),
    (confvalues.host, "ctl.slurm.svc.cluster.local:6817", "host-fqdn-port"),
    (confvalues.host, "10.0.0.1", "host-ip"),
    (confvalues.feature, "h100", "feature-plain"),
    (confvalues.feature, "nvlink_4.0-x", "feature-punct"),
    (confvalues.name, "main", "name-plain"),
    (confvalues.name, "Gpu_Farm.2", "name-mixed"),
    (confvalues.db_name, "inference", "db-name-plain"),
    (confvalues.db_name, "ml_team-2.a", "db-name-punct"),
    (confvalues.token, "/var/spool/slurmctld", "token-path"),
    (confvalues.token, "gpu:h100:8,mps:100", "token-gres"),
    (confvalues.path, "/run/slurmpod", "path-run"),
]

BAD: list[tuple[Check, str, str]] = [
    (confvalues.node_name, "", "node-empty"),
    (confvalues.node_name, "Worker-0", "node-upper"),
    (confvalues.node_name, "worker_0", "node-underscore"),
    (confvalues.node_name, "-worker", "node-leading-dash"),
    (confvalues.node_name, "worker-", "node-trailing-dash"),
    (confvalues.node_name, "w" * 64, "node-64-chars"),
    (confvalues.node_name, "worker-0\n", "node-trailing-newline"),
    (confvalues.node_name, "a.b", "node-dot"),
    (confvalues.host, "", "host-empty"),
    (confvalues.host, "ctl host", "host-space"),
    (confvalues.host, "ctl:port", "host-bad-port"),
    (confvalues.host, "ctl;reboot", "host-semicolon"),
    (confvalues.feature, "", "feature-empty"),
    (confvalues.feature, "a,b", "feature-comma"),
    (confvalues.feature, "a&b", "feature-and"),
    (confvalues.feature, "a|b", "feature-or"),
    (confvalues.feature, "!a", "feature-not"),
    (confvalues.feature, "a*2", "feature-count"),
    (confvalues.feature, "[a]", "feature-bracket"),
    (confvalues.feature, "a:b", "feature-colon"),
    (confvalues.feature, "a b", "feature-space"),
    (confvalues.feature, "f" * 65, "feature-too-long"),
    (confvalues.name, "a b", "name-space"),
    (confvalues.name, "a=b", "name-assign"),
    (confvalues.name, "a#b", "name-comment"),
    (confvalues.name, '"a"', "name-quotes"),
    (confvalues.name, ".hidden", "name-leading-dot"),
    (confvalues.db_name, "Inference", "db-name-upper"),
    (confvalues.db_name, "a,b", "db-name-comma"),
    (confvalues.db_name, "a=b", "db-name-assign"),
    (confvalues.db_name, "-i", "db-name-option"),
    (confvalues.db_name, "a\x00b", "db-name-nul"),
    (confvalues.db_name, "'a'", "db-name-quote"),
    (confvalues.db_name, "a\nb", "db-name-newline"),
    (confvalues.token, "", "token-empty"),
    (confvalues.token, "a b", "token-space"),
    (confvalues.token, "a=b", "token-assign"),
    (confvalues.token, "a#b", "token-comment"),
    (confvalues.token, "a\tb", "token-tab"),
    (confvalues.path, "run/slurmpod", "path-relative"),
    (confvalues.path, "/run/slurm pod", "path-space"),
    (confvalues.path, "/run/%(here)s", "path-percent"),
    (confvalues.path, "/run\n[program:x]", "path-newline"),
]


@pytest.mark.parametrize(("check", "value"), [g[:2] for g in GOOD], ids=[g[2] for g in GOOD])
def test_accepts(check: Check, value: str) -> None:
    assert check("field", value) == value


@pytest.mark.parametrize(("check", "value"), [b[:2] for b in BAD], ids=[b[2] for b in BAD])
def test_refuses_naming_field_and_value(check: Check, value: str) -> None:
    with pytest.raises(BadInput) as err:
        check("THE_FIELD", value)
    (problem,) = err.value.problems
    assert problem.field == "THE_FIELD"
    assert problem.value == value
    assert str(err.value).startswith("THE_FIELD=")


@pytest.mark.parametrize(
    ("value", "expected"),
    [(5, 5), ("5", 5), (" 7 ", 7), ("+3", 3), ("-2", -2), ("0", 0)],
    ids=["int", "str", "padded", "plus", "negative", "zero"],
)
def test_integer_accepts(value: object, expected: int) -> None:
    assert confvalues.integer("n", value, -10, 10) == expected


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (True, "not an integer"),
        ("1.5", "not an integer"),
        ("1e3", "not an integer"),
        ("0x10", "not an integer"),
        ("", "not an integer"),
        ("5 6", "not an integer"),
        ("٣", "not an integer"),  # Arabic-Indic three: int() would take it, Slurm would not
        (1.0, "not an integer"),
        (None, "not an integer"),
        ("11", "out of range"),
        (-11, "out of range"),
        ("9" * 21, "not an integer"),
    ],
    ids=[
        "bool",
        "decimal",
        "exponent",
        "hex",
        "empty",
        "two-numbers",
        "non-ascii-digit",
        "float",
        "none",
        "above",
        "below",
        "too-many-digits",
    ],
)
def test_integer_refuses(value: object, reason: str) -> None:
    with pytest.raises(BadInput, match=reason):
        confvalues.integer("n", value, -10, 10)


def test_quoted_text() -> None:
    assert confvalues.quoted_text("reason", "slurmpod: gpu 3 lost") == '"slurmpod: gpu 3 lost"'
    for bad in ('say "hi"', "two\nlines", "bell\a", "x" * 256):
        with pytest.raises(BadInput):
            confvalues.quoted_text("reason", bad)


def test_kv_line_joins_pairs() -> None:
    line = confvalues.kv_line([("NodeName", "w-0"), ("Reason", '"a b"'), ("Features", "x,y")])
    assert line == 'NodeName=w-0 Reason="a b" Features=x,y'


@pytest.mark.parametrize(
    "pairs",
    [
        [("Bad Key", "1")],
        [("", "1")],
        [("Key=", "1")],
        [("Features", "a b")],
        [("Features", '"a\nb"')],
        [("Features", "a#b")],
        [("Features", "a\rb")],
        [("Reason", '"open')],
        [("Reason", '"a" "b"')],
    ],
    ids=["key-space", "key-empty", "key-assign", "value-space", "value-newline-quoted", "value-hash", "value-cr",
         "value-open-quote", "value-two-quoted"],
)
def test_kv_line_tripwire(pairs: list[tuple[str, str]]) -> None:
    with pytest.raises(ValueError):
        confvalues.kv_line(pairs)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_validated_values_are_one_token(value: str) -> None:
    """Whatever passes a validator is a single whitespace-free token without '=', '#' or quotes."""
    for check in (
        confvalues.node_name,
        confvalues.host,
        confvalues.feature,
        confvalues.name,
        confvalues.db_name,
        confvalues.token,
        confvalues.path,
    ):
        try:
            ok = check("f", value)
        except BadInput:
            continue
        assert ok.split() == [ok]
        assert not set(ok) & set("=#\"'\n\r\\")


_KEYS = st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,63}", fullmatch=True)
# What kv_line takes: a bare value (no whitespace, no opening quote), or one quoted string.
_BARE = st.text(max_size=20).filter(lambda v: not v.startswith('"') and not any(c.isspace() or c in "#\n\r" for c in v))
_QUOTED = st.text(max_size=20).filter(lambda v: not set(v) & set('"#\n\r')).map(lambda v: f'"{v}"')
_PAIRS = st.lists(st.tuples(_KEYS, st.one_of(_BARE, _QUOTED)), max_size=8)


@settings(max_examples=300, deadline=None)
@given(_PAIRS)
def test_parse_kv_line_inverts_kv_line(pairs: list[tuple[str, str]]) -> None:
    assert confvalues.parse_kv_line("f", confvalues.kv_line(pairs)) == pairs


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_KEYS, st.text(max_size=12)), max_size=4))
def test_parse_kv_line_inverts_whatever_kv_line_takes(pairs: list[tuple[str, str]]) -> None:
    try:
        line = confvalues.kv_line(pairs)
    except ValueError:
        return
    assert confvalues.parse_kv_line("f", line) == pairs


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='AB= "#\t\nx', max_size=24))
def test_parse_kv_line_takes_only_what_kv_line_writes(line: str) -> None:
    """A line it parses is one kv_line accepts the pairs of, and writes again as the same pairs."""
    try:
        pairs = confvalues.parse_kv_line("f", line)
    except BadInput:
        return
    assert confvalues.parse_kv_line("f", confvalues.kv_line(pairs)) == pairs


@pytest.mark.parametrize(
    ("line", "pairs"),
    [
        ("", []),
        ("NodeName=w-0 Features=x,y", [("NodeName", "w-0"), ("Features", "x,y")]),
        ('Reason="gpu 3 lost" State=DRAIN', [("Reason", '"gpu 3 lost"'), ("State", "DRAIN")]),
        ("  A=1   B=  ", [("A", "1"), ("B", "")]),
        ("Extra=a=b A=1 A=2", [("Extra", "a=b"), ("A", "1"), ("A", "2")]),
        ("Topology='\"$SLINKY_TOPOLOGY\"'", [("Topology", "'\"$SLINKY_TOPOLOGY\"'")]),
    ],
    ids=["empty", "bare", "quoted-space", "extra-spaces", "equals-and-repeats", "inner-quotes"],
)
def test_parse_kv_line(line: str, pairs: list[tuple[str, str]]) -> None:
    assert confvalues.parse_kv_line("f", line) == pairs


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("novalue", "f"),
        ("=1", "f"),
        ("9Key=1", "f"),
        ("A=1#2", "f A"),
        ('Reason="open', "f Reason"),
        ('Reason="a"b', "f Reason"),
        ("A=1\tB=2", "f A"),
        ("A=1\nB=2", "f A"),
    ],
    ids=["no-equals", "no-key", "bad-key", "hash", "open-quote", "after-quote", "tab", "newline"],
)
def test_parse_kv_line_refuses_what_kv_line_would(line: str, field: str) -> None:
    with pytest.raises(BadInput) as exc:
        confvalues.parse_kv_line("f", line)
    assert exc.value.problems[0].field == field
