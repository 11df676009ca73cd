"""Slurm hostlist expressions: compress and expand, pinned by examples and round-trip properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmpod.errors import BadInput
from slurmpod.topology import hostlist

SETTINGS = settings(max_examples=300, deadline=None)


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["n1", "n2", "n3", "n5"], "n[1-3,5]"),
        (["n08", "n09", "n10"], "n10,n[08-09]"),  # padded and unpadded widths never share a range
        (["n9", "n10", "n11"], "n[9-11]"),  # Slurm pads to the first bound's width: n[9-11] is n9 n10 n11
        (["login", "n1"], "login,n1"),
        (["1", "2"], "1,2"),  # an all-digit name stays plain: no expression starts with '['
        (["w-2", "w-0", "w-1", "w-1"], "w-[0-2]"),  # any order, duplicates once
        (["x12345678901"], "x12345678901"),
        (["x00000000001", "x00000000002"], "x0000[0000001-0000002]"),  # at most 7 digits in a range
    ],
    ids=["range-and-single", "widths-apart", "unpadded-grows", "plain", "digits-only", "unordered-dups",
         "long-single", "long-suffix"],
)
def test_compress(names: list[str], expected: str) -> None:
    assert hostlist.compress(names) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("tux[0-3,12,18-20]", ["tux0", "tux1", "tux2", "tux3", "tux12", "tux18", "tux19", "tux20"]),
        ("n[08-10]", ["n08", "n09", "n10"]),
        ("a,b[1-2]c", ["a", "b1c", "b2c"]),
    ],
    ids=["man-page-example", "padded", "suffix"],
)
def test_expand(expression: str, expected: list[str]) -> None:
    assert hostlist.expand(expression) == expected


@pytest.mark.parametrize("expression", ["n[1-", "n]1[", "n[3-1]", "n[1-2", "n[a-b]", "n[-2]", "n[1-]", ""],
                         ids=["open", "reversed-brackets", "reversed-range", "unclosed", "letters", "no-low",
                              "no-high", "empty"])
def test_expand_refuses_malformed(expression: str) -> None:
    with pytest.raises(BadInput, match="hostlist"):
        hostlist.expand(expression)


NAMES = st.builds(
    lambda prefix, number, pad: prefix + (f"{number:0{pad}d}" if number is not None else ""),
    st.sampled_from(["n", "node-", "gpu-a", "x1y", "", "rack2-"]),
    st.one_of(st.none(), st.integers(0, 2000)),
    st.integers(1, 5),
).filter(bool)


@SETTINGS
@given(st.lists(NAMES, max_size=60))
def test_expand_of_compress_gives_every_name_once(names: list[str]) -> None:
    expanded = hostlist.expand(hostlist.compress(names)) if names else []
    assert sorted(expanded) == sorted(set(names))
    assert len(expanded) == len(set(expanded))


@SETTINGS
@given(st.lists(NAMES, min_size=1, max_size=40), st.randoms())
def test_compress_does_not_depend_on_order(names: list[str], rnd: object) -> None:
    shuffled = list(names)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert hostlist.compress(shuffled) == hostlist.compress(names)
