"""The Problems collector every config loader reports through: paths, values, and all at once."""

from __future__ import annotations

import enum
from typing import Any

import pytest

from slurmpod import confvalues
from slurmpod.errors import BadInput, Problem
from slurmpod.problems import Problems, build, join, one_of


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


class _Mode(enum.Enum):
    OFF = "off"
    ON = "on"


def test_a_section_reads_each_key_with_its_default_type_and_choice() -> None:
    p = Problems()
    doc = p.section("", {"name": "a", "mode": "on", "n": "7", "flag": True, "items": [1]},
                    {"name", "mode", "n", "flag", "items", "absent"})
    assert doc.text("name", "x", confvalues.name) == "a"
    assert doc.choice("mode", _Mode, _Mode.OFF) is _Mode.ON
    assert doc.choice("absent", _Mode, _Mode.OFF) is _Mode.OFF
    assert doc.integer("n", 0, 0, 10) == 7
    assert doc.flag("flag") is True
    assert doc.listed("items", [], "must be a list") == [1]
    assert doc.section("absent", {"k"}).doc == {}
    assert not p


def test_a_section_reports_unknown_keys_first_then_each_bad_value() -> None:
    p = Problems()
    doc = p.section("hooks", {"mode": "maybe", "n": 11, "flag": "yes", "bogus": 1, "modes": ["on", "up"]},
                    {"mode", "n", "flag", "modes"})
    assert doc.choice("mode", _Mode, _Mode.OFF) is None
    assert doc.integer("n", 0, 0, 10) is None
    assert doc.flag("flag") is None
    assert doc.choices("modes", _Mode, ()) == (_Mode.ON,)
    assert [(q.field, q.value, q.reason) for q in p] == [
        ("hooks.bogus", "1", "unknown key (allowed: flag, mode, modes, n)"),
        ("hooks.mode", "maybe", "must be one of off, on"),
        ("hooks.n", "11", "out of range [0, 10]"),
        ("hooks.flag", "yes", "must be true or false"),
        ("hooks.modes[1]", "up", "must be one of off, on"),
    ]


def test_a_null_section_is_empty_unless_it_must_be_given() -> None:
    p = Problems()
    assert p.section("a", None, ()).doc == {}
    assert not p
    p.section("a", None, (), nullable=False)
    assert [q.field for q in p] == ["a"]


def test_an_optional_choice_reads_null_as_absent() -> None:
    p = Problems()
    doc = p.section("", {"mode": None}, {"mode"})
    assert doc.choice("mode", _Mode, None) is None
    assert not p
    assert doc.choice("mode", _Mode, _Mode.OFF) is None
    assert [q.field for q in p] == ["mode"]


def test_sections_of_a_list_name_each_item() -> None:
    p = Problems()
    names = [s.text("name", "", confvalues.name) for s in p.sections("parts", [{"name": "a"}, {"x": 1}], {"name"})]
    assert names == ["a", None]
    assert [q.field for q in p] == ["parts[1].x", "parts[1].name"]


def test_build_by_keyword_unless_a_required_value_failed() -> None:
    assert build(dict, a=1, b=None, optional={"b"}) == {"a": 1, "b": None}
    assert build(dict, a=None, b=2) is None


def test_one_of_refuses_a_value_of_another_type() -> None:
    class _Count(enum.Enum):
        ONE = 1

    with pytest.raises(BadInput):
        one_of(_Count, "n", True)
    assert one_of(_Count, "n", 1) is _Count.ONE
