"""Build progress: classify the legacy builder's output lines, print steps, keep the full log.

The classic builder streams JSON objects whose ``stream`` text carries ``Step N/M : INSTR``,
`` ---> Using cache`` and the commands' own output. Ref: https://docs.docker.com/engine/api/v1.41/#tag/Image/operation/ImageBuild
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TextIO

_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
_CACHE = re.compile(r"^\s*---> Using cache\s*$")
SHOWN_CHARS = 100  # an instruction is cut to this many characters on the terminal (the log has it all)


class Kind(Enum):
    STEP = "step"
    CACHED = "cached"
    OUTPUT = "output"


@dataclass(frozen=True, slots=True)
class Line:
    kind: Kind
    text: str
    step: int = 0
    total: int = 0


def classify(text: str) -> Line:
    """One line of builder output -> a step start, a cache hit, or plain output."""
    stripped = text.rstrip("\n")
    m = _STEP.match(stripped)
    if m:
        return Line(Kind.STEP, m.group(3), int(m.group(1)), int(m.group(2)))
    if _CACHE.match(stripped):
        return Line(Kind.CACHED, stripped)
    return Line(Kind.OUTPUT, stripped)


def one_line(instruction: str, limit: int = SHOWN_CHARS) -> str:
    """Collapse a multi-line instruction to one line of at most ``limit`` characters."""
    flat = " ".join(instruction.replace("\\\n", " ").split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


@dataclass(frozen=True, slots=True)
class StepRecord:
    number: int
    instruction: str
    cached: bool
    seconds: float


class StepPrinter:
    """Prints ``[worker 24.11] step 3/9: RUN ...`` once per step (``cache hit`` appended when the
    builder reused a layer) and ``done in N s`` after steps that ran for a second or more; writes
    every line, unshortened, to the log."""

    def __init__(self, label: str, out: TextIO, log: TextIO) -> None:
        self.label = label
        self.out = out
        self.log = log
        self.steps: list[StepRecord] = []
        self._current: Line | None = None
        self._announced = False
        self._cached = False
        self._started = 0.0
        self._buffer = ""

    def say(self, message: str) -> None:
        self.out.write(f"[{self.label}] {message}\n")
        self.out.flush()
        self.log.write(f"[{self.label}] {message}\n")

    def feed(self, chunk: str) -> None:
        """Accept raw stream text (may hold several lines or a partial one)."""
        self.log.write(chunk)
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split("\n")
        for text in lines:
            self._line(classify(text))

    def _line(self, line: Line) -> None:
        if line.kind is Kind.STEP:
            self._finish()
            self._current, self._cached, self._announced = line, False, False
            self._started = time.monotonic()
            return
        if self._current is not None and not self._announced:
            # The line right after "Step N/M" says whether the cache was used.
            self._cached = line.kind is Kind.CACHED
            self._announce()

    def _announce(self) -> None:
        cur = self._current
        if cur is None:
            return
        suffix = "  [cache hit]" if self._cached else ""
        self.out.write(f"[{self.label}] step {cur.step}/{cur.total}: {one_line(cur.text)}{suffix}\n")
        self.out.flush()
        self._announced = True

    def _finish(self) -> None:
        cur = self._current
        if cur is None:
            return
        if not self._announced:
            self._announce()
        seconds = time.monotonic() - self._started
        self.steps.append(StepRecord(cur.step, cur.text, self._cached, seconds))
        if not self._cached and seconds >= 1.0:
            self.out.write(f"[{self.label}] step {cur.step}/{cur.total}: done in {seconds:.1f} s\n")
            self.out.flush()
        self._current = None

    def close(self) -> list[StepRecord]:
        if self._buffer:
            self._line(classify(self._buffer))
            self._buffer = ""
        self._finish()
        return self.steps


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain aligned text table (numbers right-aligned)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def fmt(row: Sequence[str]) -> str:
        cells = []
        for i, cell in enumerate(row):
            numeric = row is not header and cell.replace(".", "", 1).isdigit()
            cells.append(cell.rjust(widths[i]) if numeric else cell.ljust(widths[i]))
        return "  ".join(cells).rstrip()

    return "\n".join([fmt(header), *(fmt(r) for r in rows)])
