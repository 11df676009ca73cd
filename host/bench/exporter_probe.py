"""One measured side of the exporter bench, run inside the controller pod by the image's Python.

It imports the standard library and slurmpod only (slurmpod_host is never in a pod), and prints one JSON
object on stdout:
  poll    the exporter's own Poller, built by `slurmpod daemon exporter`'s settings from the cluster spec,
          polls once
  bare    the same four Slurm commands run by bash, timed by bash's `time`, their output thrown away
  sizes   the bytes each of the four commands prints
  daemon  the running `slurmpod daemon exporter`: its VmRSS and VmHWM, and one GET /metrics
For poll and bare: the seconds; slurmctld's RPCs from this process's user and their time (sdiag before and
after, minus one sdiag pair with nothing between, which holds sdiag's own RPC), and by message type from
every user; slurmctld's CPU time (its /proc stat); this process's and its children's CPU time; the peak
RSS of the largest child. The bench runs poll and bare as SlurmUser, whom nothing else in the pod runs as.
Ref: https://slurm.schedmd.com/sdiag.html, https://man7.org/linux/man-pages/man5/proc_pid_stat.5.html
"""

from __future__ import annotations

import json
import logging
import os
import resource
import shlex
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

COMMAND_TIMEOUT_S = 120.0
SCRAPE_TIMEOUT_S = 30.0
# The samples of a scrape the bench reads back (docs/metrics.md).
DAEMON_SAMPLES = ("slurmpod_exporter_up", "slurmpod_exporter_slurm_calls_total",
                  "slurmpod_exporter_poll_failures_total", "slurmpod_exporter_poll_seconds")


def rpc_table(sdiag: Mapping[str, Any], section: str = "rpcs_by_message_type",
              key: str = "message_type") -> dict[str, tuple[int, int]]:
    """`sdiag --json` -> {message type (or user id, with section rpcs_by_user and key user_id): (count,
    total_time us)}. Ref: https://slurm.schedmd.com/sdiag.html"""
    rows = (sdiag.get("statistics") or {}).get(section) or []
    return {str(r[key]): (int(r.get("count", 0)), int(r.get("total_time", 0))) for r in rows
            if isinstance(r, dict) and key in r}


def net_rpcs(before: Mapping[str, tuple[int, int]], after: Mapping[str, tuple[int, int]],
             blank: Mapping[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """RPCs between ``before`` and ``after`` less those between ``after`` and ``blank`` (sdiag's own RPC and
    background: one sdiag pair with nothing between). A type that comes out below zero counts zero."""
    out = {}
    for kind in sorted(set(before) | set(after) | set(blank)):
        b, a, z = (t.get(kind, (0, 0)) for t in (before, after, blank))
        count = (a[0] - b[0]) - (z[0] - a[0])
        spent = (a[1] - b[1]) - (z[1] - a[1])
        if count > 0:
            out[kind] = (count, max(spent, 0))
    return out


def bare_script(commands: list[tuple[str, ...]]) -> str:
    """bash: the commands one after another, output thrown away, timed by `time` (seconds on stderr)."""
    # Ref: https://www.gnu.org/software/bash/manual/bash.html#index-TIMEFORMAT
    body = " && ".join(f"{shlex.join(argv)} >/dev/null" for argv in commands)
    return f"TIMEFORMAT=%R; time {{ {body}; }}"


def proc_ticks(stat: str) -> int:
    """utime + stime (clock ticks) from a /proc/PID/stat line; the command name may hold spaces."""
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc_pid_stat(5)


def status_kib(status: str, key: str) -> int:
    """A `Key:   123 kB` line of /proc/PID/status, in KiB; 0 when absent."""
    for line in status.splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    return 0


def find_pid(match: Callable[[list[str]], bool]) -> int | None:
    """The first process whose argv ``match(argv)`` accepts."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode("utf-8", "replace").rstrip("\0").split("\0")
        except OSError:
            continue
        if argv and match(argv):
            return int(entry.name)
    return None


def _is_slurmctld(argv: list[str]) -> bool:
    return os.path.basename(argv[0]) == "slurmctld"  # not slurmscriptd, whose argv[0] is "slurmctld: slurmscriptd"


def _is_exporter(argv: list[str]) -> bool:
    return any(argv[i:i + 2] == ["daemon", "exporter"] for i in range(len(argv)))


def _sdiag() -> Any:
    done = subprocess.run(["sdiag", "--json"], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=True)
    return json.loads(done.stdout)


def _ticks(pid: int) -> int:
    return proc_ticks(Path(f"/proc/{pid}/stat").read_text(encoding="utf-8"))


def _cpu_s() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _commands() -> list[tuple[str, ...]]:
    from slurmpod.entrypoints.exporter import poll  # noqa: PLC0415 - the pod's slurmpod, imported when run there

    return poll.commands()


class _Errors(logging.Handler):
    """The `err` of the poller's log lines (a failed poll logs why; State does not keep it)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        ctx = getattr(record, "ctx", None)
        self.seen.append(str(ctx.get("err", "")) if isinstance(ctx, dict) else record.getMessage())


def _poll() -> dict[str, Any]:
    from slurmpod import well_known as wk  # noqa: PLC0415
    from slurmpod.entrypoints.cluster_spec import load  # noqa: PLC0415
    from slurmpod.entrypoints.exporter import daemon  # noqa: PLC0415
    from slurmpod.entrypoints.exporter.poll import Poller  # noqa: PLC0415
    from slurmpod.slurm import CliSlurmClient  # noqa: PLC0415

    spec = load(Path(os.environ.get(wk.ENV_CLUSTER_SPEC, wk.CLUSTER_SPEC_FILE)))
    poller = Poller(CliSlurmClient(), daemon.settings(spec, None))
    errors = _Errors()
    logging.getLogger(Poller.__module__).addHandler(errors)

    def run() -> tuple[float, bool, str]:
        state = poller.poll()
        return state.poll_seconds, state.up, "; ".join(errors.seen)[-300:]

    return _measured(run)


def _bare() -> dict[str, Any]:
    def run() -> tuple[float, bool, str]:
        done = subprocess.run(["bash", "-c", bare_script(_commands())], capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S, check=False)  # a failure is reported, not raised
        lines = done.stderr.strip().splitlines()
        return float(lines[-1]) if lines else 0.0, done.returncode == 0, done.stderr.strip()[-300:]

    return _measured(run)


def _measured(action: Callable[[], tuple[float, bool, str]]) -> dict[str, Any]:
    ctld = find_pid(_is_slurmctld)
    if ctld is None:
        raise SystemExit("no slurmctld process in this pod")
    ticks0, cpu0 = _ticks(ctld), _cpu_s()
    before = _sdiag()
    seconds, up, error = action()
    after = _sdiag()
    ticks1, cpu1 = _ticks(ctld), _cpu_s()
    blank = _sdiag()
    # This process's user alone: the pod's probes and daemons run as root, and land in any window.
    mine = net_rpcs(*(rpc_table(d, "rpcs_by_user", "user_id") for d in (before, after, blank))).get(str(os.getuid()))
    by_type = net_rpcs(*(rpc_table(d) for d in (before, after, blank)))
    hz = os.sysconf("SC_CLK_TCK")
    return {"seconds": seconds, "up": up, "error": error if not up else "",
            "rpcs": mine[0] if mine else 0, "rpc_us": mine[1] if mine else 0,
            "rpcs_by_type": {k: v[0] for k, v in by_type.items()},
            "ctld_cpu_s": (ticks1 - ticks0) / hz, "cpu_s": cpu1 - cpu0,
            "child_peak_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}


def _sizes() -> dict[str, Any]:
    out: dict[str, int] = {}
    for argv in _commands():
        done = subprocess.run(list(argv), capture_output=True, timeout=COMMAND_TIMEOUT_S, check=True)
        out[shlex.join(argv)] = len(done.stdout)
    return {"bytes": out}


def _daemon() -> dict[str, Any]:
    from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415

    from slurmpod import well_known as wk  # noqa: PLC0415

    pid = find_pid(_is_exporter)
    if pid is None:
        return {"running": False}
    status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    port = int(os.environ.get(wk.ENV_EXPORTER_PORT, wk.EXPORTER_PORT))
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as reply:
        body = reply.read()
    samples = {s.name: s.value for fam in text_string_to_metric_families(body.decode("utf-8"))
               for s in fam.samples if s.name in DAEMON_SAMPLES}
    return {"running": True, "pid": pid, "rss_kib": status_kib(status, "VmRSS"),
            "hwm_kib": status_kib(status, "VmHWM"), "scrape_bytes": len(body), "samples": samples}


def main(argv: list[str]) -> int:
    modes: dict[str, Callable[[], dict[str, Any]]] = {"poll": _poll, "bare": _bare, "sizes": _sizes, "daemon": _daemon}
    if len(argv) != 2 or argv[1] not in modes:
        print(f"usage: {argv[0]} {{{','.join(modes)}}}", file=sys.stderr)
        return 2
    started = time.monotonic()
    result = modes[argv[1]]()
    print(json.dumps({"mode": argv[1], "wall_s": time.monotonic() - started, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
