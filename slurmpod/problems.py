"""One typed collector of validation problems, used by every config loader.

A loader walks its document once, asks the collector to check each field, and raises at the end with
every problem found, each naming the field by its path (``partitions[0].name``) and the bad value:

    p = Problems()
    doc = p.mapping("", raw)                       # the document must be a mapping
    p.unknown_keys("", doc, {"name", "tiers"})     # every key must be known
    name = p.field("name", doc.get("name"), confvalues.name)   # a validator that raises BadInput
    p.raise_if_any()                               # BadInput with all of them, or nothing
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from slurmpod.errors import BadInput, Problem

T = TypeVar("T")


def join(path: str, key: str | int) -> str:
    """``partitions`` + 0 -> ``partitions[0]``; ``partitions[0]`` + ``name`` -> ``partitions[0].name``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


class Problems:
    """Collects problems; ``raise_if_any`` reports them all at once."""

    def __init__(self) -> None:
        self._items: list[Problem] = []

    def __bool__(self) -> bool:
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Problem]:
        return iter(self._items)

    def add(self, field: str, value: object, reason: str) -> None:
        self._items.append(Problem(field, _show(value), reason))

    def extend(self, problems: Iterable[Problem]) -> None:
        self._items.extend(problems)

    def check(self, ok: bool, field: str, value: object, reason: str) -> bool:
        """Record a problem unless ``ok``; returns ``ok``."""
        if not ok:
            self.add(field, value, reason)
        return ok

    def field(self, field: str, value: Any, validate: Callable[[str, Any], T]) -> T | None:
        """``validate(field, value)``, or None with its problems recorded when it raises BadInput."""
        try:
            return validate(field, value)
        except BadInput as exc:
            self._items.extend(exc.problems)
            return None

    def mapping(self, path: str, value: Any) -> dict[str, Any]:
        """The value as a mapping with string keys; {} (and a problem) otherwise."""
        if value is None and not path:
            return {}
        if not isinstance(value, Mapping):
            self.add(path or "(document)", value, "must be a mapping")
            return {}
        bad = [k for k in value if not isinstance(k, str)]
        for key in bad:
            self.add(join(path, str(key)), key, "keys must be strings")
        return {k: v for k, v in value.items() if isinstance(k, str)}

    def unknown_keys(self, path: str, doc: Mapping[str, Any], allowed: Iterable[str]) -> None:
        known = set(allowed)
        for key in sorted(set(doc) - known):
            self.add(join(path, key), doc[key], f"unknown key (allowed: {', '.join(sorted(known))})")

    def mappings(self, path: str, value: Any, *, non_empty: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
        """Each mapping of a list, with its path (``partitions[0]``); a problem for anything else."""
        if not isinstance(value, list) or (non_empty and not value):
            self.add(path, value, "must be a non-empty list" if non_empty else "must be a list")
            return
        for i, item in enumerate(value):
            where = join(path, i)
            if isinstance(item, Mapping):
                yield where, self.mapping(where, item)
            else:
                self.add(where, item, "must be a mapping")

    def typed(self, path: str, value: Any, kind: type[T], what: str) -> T | None:
        """``value`` if it is a ``kind`` (bool is not an int), else a problem saying it must be ``what``."""
        if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
            return value
        self.add(path, value, f"must be {what}")
        return None

    def unique(self, path: str, names: Iterable[str]) -> None:
        """One problem per name used more than once, in sorted order."""
        seen: set[str] = set()
        repeated: set[str] = set()
        for name in names:
            (repeated if name in seen else seen).add(name)
        for name in sorted(repeated):
            self.add(path, name, "name used more than once")

    def raise_if_any(self) -> None:
        if self._items:
            raise BadInput(self._items)


def _show(value: object) -> str:
    return value if isinstance(value, str) else repr(value) if value is not None else "null"
