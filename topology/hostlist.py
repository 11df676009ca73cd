"""Slurm hostlist expressions: ``node[01-03,7],login`` <-> the names it stands for.

Slurm pads each number of a range to the width of the range's first bound (``n[08-10]`` is n08 n09 n10,
``n[8-10]`` is n8 n9 n10). ``compress`` therefore keeps zero-padded numbers of one width apart from
unpadded ones, so ``expand(compress(names))`` gives the same names back, each once.
Ref: https://slurm.schedmd.com/topology.conf.html (Nodes=tux[0-3,12,18-20])
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from slurmpod.errors import BadInput

# At most 7 digits go in a range (longer suffixes keep their leading digits in the prefix): below the
# largest host suffix the LLNL hostlist code Slurm's derives from accepts (MAX_HOST_SUFFIX 1<<25).
_SPLIT = re.compile(r"^(.*?)([0-9]{1,7})$")
_PIECE = re.compile(r"([^,\[\]]*)(?:\[([0-9,-]+)\])?([^,\[\]]*)")
_UNPADDED = 0  # width key for numbers written without leading zeros
MAX_EXPANDED = 1_000_000


def _key(name: str) -> tuple[str, int, int] | None:
    """``node07`` -> ('node', 2, 7); ``node7`` -> ('node', 0, 7); None without a trailing number."""
    match = _SPLIT.match(name)
    if not match:
        return None
    digits = match[2]
    padded = len(digits) > 1 and digits.startswith("0")
    return match[1], (len(digits) if padded else _UNPADDED), int(digits)


def _ranges(numbers: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for n in numbers:
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def compress(names: Iterable[str]) -> str:
    """The shortest-form expression for ``names`` (duplicates dropped), deterministic for any order."""
    plain: set[str] = set()
    groups: dict[tuple[str, int], set[int]] = {}
    for name in names:
        key = _key(name)
        if key is None or not key[0]:  # all digits: a bracket would open the expression, keep it plain
            plain.add(name)
        else:
            groups.setdefault((key[0], key[1]), set()).add(key[2])
    pieces: list[tuple[str, str]] = [(name, name) for name in plain]
    for (prefix, width), numbers in groups.items():
        spans = _ranges(sorted(numbers))
        text = ",".join(
            f"{lo:0{width}d}" if lo == hi else f"{lo:0{width}d}-{hi:0{width}d}" for lo, hi in spans
        )
        single = len(spans) == 1 and spans[0][0] == spans[0][1]
        pieces.append((f"{prefix}{width:03d}", f"{prefix}{text}" if single else f"{prefix}[{text}]"))
    return ",".join(text for _, text in sorted(pieces))


def expand(expression: str, field: str = "hostlist") -> list[str]:
    """The names of ``expression``, in its order; BadInput for anything malformed."""
    out: list[str] = []
    for piece in _split_top(expression, field):
        match = _PIECE.fullmatch(piece)
        if not match or not piece:
            raise BadInput.one(field, expression, f"not a hostlist expression (at {piece!r})")
        prefix, body, suffix = match[1], match[2], match[3]
        if body is None:
            out.append(prefix + suffix)
            continue
        for part in body.split(","):
            lo_text, dash, hi_text = part.partition("-")
            if not lo_text or (dash and not hi_text):
                raise BadInput.one(field, expression, f"bad range {part!r}")
            lo, hi = int(lo_text), int(hi_text or lo_text)
            if hi < lo or len(out) + hi - lo >= MAX_EXPANDED:
                raise BadInput.one(field, expression, f"bad range {part!r}")
            width = len(lo_text)
            out.extend(f"{prefix}{n:0{width}d}{suffix}" for n in range(lo, hi + 1))
    return out


def _split_top(expression: str, field: str) -> list[str]:
    """Split on commas outside brackets."""
    pieces, depth, start = [], 0, 0
    for i, char in enumerate(expression):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if depth not in (0, 1):
            raise BadInput.one(field, expression, "unbalanced brackets")
        if char == "," and depth == 0:
            pieces.append(expression[start:i])
            start = i + 1
    if depth:
        raise BadInput.one(field, expression, "unbalanced brackets")
    pieces.append(expression[start:])
    return pieces
