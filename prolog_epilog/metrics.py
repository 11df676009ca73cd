"""Prometheus textfile metrics for node-exporter's textfile collector, written atomically.

One file per context (``slurmpod_health_<context>.prom``), replaced whole on every run.
Ref: https://github.com/prometheus/node_exporter#textfile-collector
Ref: https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from slurmpod.prolog_epilog.result import CheckResult, Context, Status
from slurmpod.prolog_epilog.state import write_atomic

STATUS_VALUE = {Status.OK: 0, Status.SKIPPED: 0, Status.WARN: 1, Status.FAIL: 2}


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(context: Context, results: Sequence[CheckResult], run_seconds: float, now: float,
           xid_totals: Mapping[str, int]) -> str:
    c = _label(context.value)
    lines = [
        "# HELP slurmpod_health_check_status Check outcome: 0 ok or skipped, 1 warn, 2 fail.",
        "# TYPE slurmpod_health_check_status gauge",
        *(f'slurmpod_health_check_status{{check="{_label(r.check)}",context="{c}"}} {STATUS_VALUE[r.status]}'
          for r in results),
        "# HELP slurmpod_health_check_duration_seconds How long each check took.",
        "# TYPE slurmpod_health_check_duration_seconds gauge",
        *(f'slurmpod_health_check_duration_seconds{{check="{_label(r.check)}",context="{c}"}} {r.duration:.6f}'
          for r in results),
        "# HELP slurmpod_health_run_duration_seconds How long the whole run took.",
        "# TYPE slurmpod_health_run_duration_seconds gauge",
        f'slurmpod_health_run_duration_seconds{{context="{c}"}} {run_seconds:.6f}',
        "# HELP slurmpod_health_last_run_timestamp_seconds When the run ended (Unix time).",
        "# TYPE slurmpod_health_last_run_timestamp_seconds gauge",
        f'slurmpod_health_last_run_timestamp_seconds{{context="{c}"}} {now:.3f}',
        "# HELP slurmpod_health_xid_total XID errors seen on this node, by GPU and code.",
        "# TYPE slurmpod_health_xid_total counter",
    ]
    for key in sorted(xid_totals):
        gpu, _, xid = key.partition(":")
        lines.append(f'slurmpod_health_xid_total{{gpu="{_label(gpu)}",xid="{_label(xid)}"}} {int(xid_totals[key])}')
    return "\n".join(lines) + "\n"


def write(directory: Path, context: Context, text: str) -> Path:
    path = directory / f"slurmpod_health_{context.value}.prom"
    write_atomic(path, text)
    return path
