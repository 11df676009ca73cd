"""The slurmpod error tree. Only ``main()`` turns these into exit codes.

SlurmpodError
├── BadInput        exit 2: a field of the pod's input (env, file, secret, flag) is wrong;
│                   carries every problem found, each naming the field and the value
├── TransientError  exit 1: worth retrying (a daemon not up yet, a timeout)
└── PermanentError  exit 1: retrying will not help (a tool missing, a daemon refused)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the input: which field, what value, why."""

    field: str
    value: str
    reason: str

    def __str__(self) -> str:
        shown = self.value if len(self.value) <= 80 else self.value[:77] + "..."
        return f"{self.field}={shown!r}: {self.reason}"


class SlurmpodError(Exception):
    """Base of every error slurmpod raises on purpose."""

    exit_code = 1


class BadInput(SlurmpodError):
    """Input that can never work as given; reports every problem at once."""

    exit_code = 2

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = tuple(problems)
        if not self.problems:
            raise ValueError("BadInput needs at least one problem")
        super().__init__("; ".join(str(p) for p in self.problems))

    @classmethod
    def one(cls, field: str, value: object, reason: str) -> BadInput:
        return cls([Problem(field, str(value), reason)])


class TransientError(SlurmpodError):
    """A failure that may go away on retry."""


class PermanentError(SlurmpodError):
    """A failure that retrying will not fix."""
