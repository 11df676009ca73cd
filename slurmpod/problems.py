"""One typed collector of validation problems, used by every config loader.

A loader walks its document once, asks the collector to check each field, and raises at the end with
every problem found, each naming the field by its path (``partitions[0].name``) and the bad value:

    p = Problems()
    doc = p.mapping("", raw)                       # the document must be a mapping
    p.unknown_keys("", doc, {"name", "tiers"})     # every key must be known
    name = p.field("name", doc.get("name"), confvalues.name)   # a validator that raises BadInput
    p.raise_if_any()                               # BadInput with all of them, or nothing

Most loaders read mappings key by key through a ``Section``, which reports unknown keys when it is
opened and reads each key with its default, type, range or closed choice (an ``enum.Enum``):

    doc = p.section("", raw, {"name", "mode", "tiers"})
    name = doc.text("name", "main", confvalues.name)
    mode = doc.choice("mode", Mode, Mode.OFF)
    spec = build(Spec, name=name, mode=mode)       # None when a field failed (its problem is recorded)
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from slurmpod import confvalues
from slurmpod.errors import BadInput, Problem

T = TypeVar("T")
E = TypeVar("E", bound=enum.Enum)


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

    def section(self, path: str, value: Any, keys: Iterable[str], *, nullable: bool = True) -> Section:
        """``value`` as a mapping of the given keys: an empty one when absent (null, where ``nullable``), a
        problem when it is not a mapping, and one problem per unknown key."""
        doc = {} if value is None and nullable else self.mapping(path, value)
        self.unknown_keys(path, doc, keys)
        return Section(self, path, doc)

    def sections(self, path: str, value: Any, keys: Iterable[str], *, non_empty: bool = False) -> Iterator[Section]:
        """Each mapping of a list as a ``section``; a problem for anything else."""
        allowed = frozenset(keys)
        for where, doc in self.mappings(path, value, non_empty=non_empty):
            self.unknown_keys(where, doc, allowed)
            yield Section(self, where, doc)

    def raise_if_any(self) -> None:
        if self._items:
            raise BadInput(self._items)


class Section:
    """One mapping of a document, read key by key; each reader records a problem naming ``path.key`` and
    returns None when the value is wrong."""

    def __init__(self, problems: Problems, path: str, doc: dict[str, Any]) -> None:
        self.problems = problems
        self.path = path
        self.doc = doc

    def where(self, key: str) -> str:
        return join(self.path, key)

    def raw(self, key: str, default: Any = None) -> Any:
        return self.doc.get(key, default)

    def get(self, key: str, default: Any, validate: Callable[[str, Any], T]) -> T | None:
        """``validate(path, value)`` of the value, or of ``default`` when the key is absent."""
        return self.problems.field(self.where(key), self.doc.get(key, default), validate)

    def text(self, key: str, default: str, validate: Callable[[str, str], T]) -> T | None:
        """Like ``get``, on the value as text (a number is read as its digits)."""
        return self.problems.field(self.where(key), str(self.doc.get(key, default)), validate)

    def integer(self, key: str, default: int, low: int, high: int) -> int | None:
        """A whole number in [low, high] (also written as a decimal string)."""
        return self.get(key, default, lambda field, value: confvalues.integer(field, value, low, high))

    def typed(self, key: str, default: T, kind: type[T], what: str) -> T | None:
        """The value if it is a ``kind`` (bool is not an int); a problem saying it must be ``what``."""
        return self.problems.typed(self.where(key), self.doc.get(key, default), kind, what)

    def flag(self, key: str, default: bool = False) -> bool | None:
        return self.typed(key, default, bool, "true or false")

    def choice(self, key: str, kind: type[E], default: E | None,
               spelling: Callable[[Any], Any] | None = None) -> E | None:
        """The member of ``kind`` whose value the document gives (after ``spelling``); ``default`` when absent,
        and when null if the default is None (an optional choice)."""
        if key not in self.doc or (self.doc[key] is None and default is None):
            return default
        return self.problems.field(self.where(key), self.doc[key],
                                   lambda field, value: one_of(kind, field, value, spelling))

    def choices(self, key: str, kind: type[E], default: Iterable[E]) -> tuple[E, ...]:
        """A list of members of ``kind`` (null: none); the good ones, with a problem for each other item."""
        raw = self.doc.get(key, [m.value for m in default])
        items = self._list(key, [] if raw is None else raw, "must be a list") or []
        out = [self.problems.field(join(self.where(key), i), item, lambda f, v: one_of(kind, f, v))
               for i, item in enumerate(items)]
        return tuple(member for member in out if member is not None)

    def listed(self, key: str, default: list[Any], reason: str) -> list[Any] | None:
        """The value if it is a list (``default`` when absent); otherwise a problem with ``reason``."""
        return self._list(key, self.doc.get(key, default), reason)

    def _list(self, key: str, value: Any, reason: str) -> list[Any] | None:
        if isinstance(value, list):
            return value
        self.problems.add(self.where(key), value, reason)
        return None

    def section(self, key: str, keys: Iterable[str], *, nullable: bool = True) -> Section:
        """The mapping under ``key`` (empty when absent)."""
        value = self.doc.get(key, None if nullable else {})
        return self.problems.section(self.where(key), value, keys, nullable=nullable)

    def sections(self, key: str, default: list[Any], keys: Iterable[str], *, non_empty: bool = False) -> Iterator[
            Section]:
        return self.problems.sections(self.where(key), self.doc.get(key, default), keys, non_empty=non_empty)


def one_of(kind: type[E], field: str, value: Any, spelling: Callable[[Any], Any] | None = None) -> E:
    """The member of the closed choice ``kind`` with this value; BadInput listing the values otherwise."""
    wanted = spelling(value) if spelling is not None else value
    for member in kind:
        if member.value == wanted and type(wanted) is type(member.value):
            return member
    choices = ", ".join(str(m.value) for m in kind)
    raise BadInput.one(field, _show(wanted), f"must be one of {choices}")


def build(kind: Callable[..., T], optional: Collection[str] = (), **values: Any) -> T | None:
    """``kind(**values)``; None when a value not named ``optional`` is None: it failed, its problem recorded."""
    if any(v is None for k, v in values.items() if k not in optional):
        return None
    return kind(**values)


def _show(value: object) -> str:
    return value if isinstance(value, str) else repr(value) if value is not None else "null"
