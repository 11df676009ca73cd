"""The Problems collector every config loader reports through: paths, values, and all at once."""

from __future__ import annotations

from typing import Any

import pytest

from slurmpod import confvalues
from slurmpod.errors import BadInput, Problem
from slurmpod.problems import Problems, join


@pytest.mark.parametrize(
    ("path", "key", "want"),
    [("", "name", "name"), ("partitions", 0, "partitions[0]"), ("partitions[0]", "name", "partitions[0].name"),
     ("", 3, "[3]"), ("hooks", "prolog", "hooks.prolog")],
    ids=["top", "index", "nested", "top-index", "dotted"],
)
def test_join(path: str, key: str | int, want: str) -> None:
    assert join(path, key) == want


def test_nothing_found_raises_nothing() -> None:
    p = Problems()
    assert p.check(True, "x", 1, "never")
    p.raise_if_any()
    assert not p and len(p) == 0


def test_every_problem_is_raised_at_once_in_order() -> None:
    p = Problems()
    p.add("a", "1", "first")
    assert not p.check(False, "b", 2, "second")
    p.extend([Problem("c", "3", "third")])
    with pytest.raises(BadInput) as exc:
        p.raise_if_any()
    assert [(q.field, q.value, q.reason) for q in exc.value.problems] == [
        ("a", "1", "first"), ("b", "2", "second"), ("c", "3", "third")]
    assert exc.value.exit_code == 2


@pytest.mark.parametrize(("value", "shown"), [("text", "text"), (5, "5"), (None, "null"), ([1], "[1]")],
                         ids=["str", "int", "none", "list"])
def test_values_are_shown_as_written(value: object, shown: str) -> None:
    p = Problems()
    p.add("f", value, "bad")
    assert next(iter(p)).value == shown


def test_field_keeps_the_value_or_records_the_validators_problems() -> None:
    p = Problems()
    assert p.field("maxNodes", "12", lambda f, v: confvalues.integer(f, v, 1, 100)) == 12
    assert p.field("maxNodes", "x", lambda f, v: confvalues.integer(f, v, 1, 100)) is None
    assert [q.field for q in p] == ["maxNodes"]
    assert "not an integer" in next(iter(p)).reason


def test_field_lets_other_errors_through() -> None:
    def boom(field: str, value: Any) -> str:
        raise KeyError(field)

    with pytest.raises(KeyError):
        Problems().field("f", 1, boom)


@pytest.mark.parametrize(
    ("path", "value", "want", "problem"),
    [
        ("", None, {}, None),
        ("", {"a": 1}, {"a": 1}, None),
        ("", [1], {}, ("(document)", "must be a mapping")),
        ("hooks", "x", {}, ("hooks", "must be a mapping")),
        ("hooks", None, {}, ("hooks", "must be a mapping")),
        ("hooks", {"a": 1, 2: "b"}, {"a": 1}, ("hooks.2", "keys must be strings")),
    ],
    ids=["empty-document", "mapping", "document-list", "nested-string", "nested-null", "int-key"],
)
def test_mapping(path: str, value: Any, want: dict[str, Any], problem: tuple[str, str] | None) -> None:
    p = Problems()
    assert p.mapping(path, value) == want
    assert [(q.field, q.reason) for q in p] == ([problem] if problem else [])


def test_unknown_keys_each_named_with_the_allowed_ones() -> None:
    p = Problems()
    p.unknown_keys("partitions[1]", {"name": "a", "zeta": 1, "alpha": 2}, {"name", "nodesets"})
    assert [(q.field, q.value) for q in p] == [("partitions[1].alpha", "2"), ("partitions[1].zeta", "1")]
    assert all(q.reason == "unknown key (allowed: name, nodesets)" for q in p)


@pytest.mark.parametrize(
    ("value", "non_empty", "paths", "problems"),
    [
        ([{"a": 1}, {"b": 2}], False, ["xs[0]", "xs[1]"], []),
        ([], False, [], []),
        ([], True, [], [("xs", "must be a non-empty list")]),
        ("nope", False, [], [("xs", "must be a list")]),
        ([{"a": 1}, "str", 3], False, ["xs[0]"], [("xs[1]", "must be a mapping"), ("xs[2]", "must be a mapping")]),
    ],
    ids=["two", "empty-ok", "empty-refused", "not-a-list", "mixed"],
)
def test_mappings(value: Any, non_empty: bool, paths: list[str], problems: list[tuple[str, str]]) -> None:
    p = Problems()
    assert [path for path, _ in p.mappings("xs", value, non_empty=non_empty)] == paths
    assert [(q.field, q.reason) for q in p] == problems


@pytest.mark.parametrize(
    ("value", "kind", "ok"),
    [(3, int, True), (True, int, False), ("3", int, False), (True, bool, True), ("a", str, True)],
    ids=["int", "bool-is-not-int", "str-is-not-int", "bool", "str"],
)
def test_typed(value: Any, kind: type, ok: bool) -> None:
    p = Problems()
    got = p.typed("f", value, kind, "a thing")
    assert (got is value) is ok
    assert bool(p) is not ok


def test_unique_reports_each_repeated_name_once_sorted() -> None:
    p = Problems()
    p.unique("partitions", ["b", "a", "b", "c", "a", "b"])
    assert [(q.field, q.value, q.reason) for q in p] == [
        ("partitions", "a", "name used more than once"), ("partitions", "b", "name used more than once")]
