"""Bench results: one JSON document and a short Markdown table, both under the output folder."""

from __future__ import annotations

import json
import platform
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured quantity, with the baseline measured in the same run where there is one."""

    name: str
    unit: str
    value: float
    baseline: float | None = None
    baseline_name: str = ""
    floor: str = ""  # the requirement, e.g. "<= 1.5x baseline"
    ok: bool | None = None
    samples: tuple[float, ...] = ()
    baseline_samples: tuple[float, ...] = ()

    @property
    def ratio(self) -> float | None:
        return None if not self.baseline else self.value / self.baseline


@dataclass(slots=True)
class Report:
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.time)

    def add(self, figure: Figure) -> None:
        self.figures.append(figure)
        shown = f"{figure.value:.3f} {figure.unit}"
        if figure.baseline is not None:
            ratio = figure.ratio
            shown += f" (baseline {figure.baseline:.3f}, x{ratio:.2f})" if ratio is not None else \
                f" (baseline {figure.baseline:.3f})"
        verdict = "" if figure.ok is None else ("ok" if figure.ok else "MISSED")
        print(f"bench: {figure.name}: {shown} {figure.floor} {verdict}", flush=True)

    def write(self, out: Path) -> tuple[Path, Path]:
        out.mkdir(parents=True, exist_ok=True)
        doc = {
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "seconds": round(time.time() - self.started, 1),
            "host": {"machine": platform.machine(), "python": platform.python_version(),
                     "cpus": _cpus()},
            "figures": [{**asdict(f), "ratio": f.ratio} for f in self.figures],
            "notes": self.notes,
        }
        json_path = out / "bench.json"
        json_path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        md_path = out / "bench.md"
        md_path.write_text(table(self.figures) + "".join(f"\n- {n}" for n in self.notes) + "\n", encoding="utf-8")
        return json_path, md_path


def _cpus() -> int:
    import os  # noqa: PLC0415 - report-only

    return os.cpu_count() or 0


def table(figures: list[Figure]) -> str:
    head = "| figure | value | baseline | ratio | floor | ok |\n|---|---|---|---|---|---|\n"
    rows = []
    for f in figures:
        base = f"{f.baseline:.3f} {f.unit} ({f.baseline_name})" if f.baseline is not None else "-"
        ratio = f"{f.ratio:.2f}" if f.ratio is not None else "-"
        ok = "-" if f.ok is None else ("yes" if f.ok else "NO")
        rows.append(f"| {f.name} | {f.value:.3f} {f.unit} | {base} | {ratio} | {f.floor or '-'} | {ok} |")
    return head + "\n".join(rows) + "\n"


def median(values: list[float]) -> float:
    return statistics.median(values)
