"""xid: XID errors since the last run, from an NVML event set and the kernel log, classified by the catalog.

The kernel log (/dev/kmsg, where readable) holds every XID the driver raised, so the run keeps a
cursor (the last record's sequence number) in the state dir and reads only what is new; a new container's
first run reads only what was logged since the pod started. In the epilog,
XIDs on the job's GPUs are attributed to the job in the reason; in the health agent, which keeps one event
set registered for the pod's lifetime and knows which job runs on which GPU, in every context.
Ref: https://docs.nvidia.com/deploy/xid-errors/index.html (driver log line "NVRM: Xid (PCI:...): N, ...")

A fatal XID is an event, seen once: later runs find nothing new, yet the GPU stays broken until it is
reset (NVIDIA's catalog: "reset GPU" or "reboot", or replace it). So a fatal XID is latched in the state
dir and every later run fails on it again, until there is evidence of a reset: a new container (the
state dir lives in the container, so restarting the pod, which is how a GPU is reset under Kubernetes,
starts without the latch) or a new kernel boot (/proc/sys/kernel/random/boot_id changed). Clean runs
alone never lift it, and neither does `scontrol update state=resume` (the periodic run re-drains).
"""

from __future__ import annotations

import errno
import logging
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from slurmpod.nvml import Nvml, NvmlError, NvmlHung
from slurmpod.prolog_epilog import gpu_readers as rd
from slurmpod.prolog_epilog import xid_catalog
from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.checks.gpu import session
from slurmpod.prolog_epilog.job import JobInfo
from slurmpod.prolog_epilog.result import CheckResult, Context, Gpu, Remediation, Status

NAME = "xid"
STATE_KEY = "xid"
# /dev/kmsg record: "prio,seq,usec,flags;message". Ref: https://www.kernel.org/doc/Documentation/ABI/testing/dev-kmsg
_KMSG = re.compile(r"^\d+,(\d+),(\d+),[^;]*;(.*)$")
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\): (\d+)")
MAX_KMSG_BYTES = 8 * 1024 * 1024
# The pod's PID 1; field 22 of its stat is when it started, in clock ticks since boot.
# Ref: https://man7.org/linux/man-pages/man5/proc_pid_stat.5.html
INIT_STAT = Path("/proc/1/stat")
# Changes on every boot. Ref: https://man7.org/linux/man-pages/man4/random.4.html (boot_id)
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
LATCHED = "latched"  # state: "gpu:xid" -> {"boot": boot id, "reason": text, "remediation": class}

log = logging.getLogger(__name__)


def parse_kmsg(lines: Iterable[str], after_seq: int, since_usec: int = 0) -> tuple[list[tuple[str, int]], int]:
    """(PCI bus id, xid) for each XID record past ``after_seq`` and logged at ``since_usec`` (after boot)
    or later, and the last sequence number seen."""
    found, last = [], after_seq
    for line in lines:
        m = _KMSG.match(line.rstrip("\n"))
        if not m:
            continue
        seq = int(m.group(1))
        if seq <= after_seq:
            continue
        last = max(last, seq)
        if int(m.group(2)) < since_usec:
            continue
        x = _XID.search(m.group(3))
        if x:
            found.append((x.group(1).lower(), int(x.group(2))))
    return found, last


def read_kernel_log(path: Path) -> list[str]:
    """The records readable now, without blocking; [] where the log is not readable (not root, no kmsg)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        log.debug("kernel log not readable: path=%s error=%s", path, exc.strerror)
        return []
    lines, total = [], 0
    try:
        while total < MAX_KMSG_BYTES:
            try:
                chunk = os.read(fd, 8192)
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # a record overwritten while reading: skip on
                    continue
                break  # EAGAIN: the end of the buffer
            if not chunk:
                break
            total += len(chunk)
            lines.extend(chunk.decode("utf-8", "replace").splitlines())
    finally:
        os.close(fd)
    return lines


def container_start_usec(path: Path = INIT_STAT) -> int:
    """When the pod's PID 1 started, in microseconds since boot, the clock of a kernel log record; 0 where
    that is unreadable (then the whole log counts)."""
    try:
        text = path.read_text(encoding="ascii", errors="replace")
        ticks = int(text[text.rindex(")") + 2:].split()[19])  # fields after "pid (comm) " start at field 3
        return ticks * 1_000_000 // os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0


def judge(events: Sequence[tuple[int, int]], devs: Sequence[rd.Device], job: JobInfo,
          context: Context, running: Mapping[int, int] | None = None) -> CheckResult:
    """events: (gpu index or -1 when unknown, xid); running: GPU index -> the job running on it (what the
    health agent knows between a job's prolog and its epilog)."""
    values = tuple(sorted((f"xid_{code}", float(n)) for code, n in Counter(x for _, x in events).items()))
    if not events:
        return CheckResult(NAME, Status.OK, "no XID", values=values)
    uuid = {d.index: d.uuid for d in devs}
    fatal = [(g, xid_catalog.classify(x)) for g, x in events if xid_catalog.classify(x).severity is
             xid_catalog.Severity.FATAL]
    chosen = fatal or [(g, xid_catalog.classify(x)) for g, x in events]
    gpus = tuple(Gpu(g, uuid.get(g, "")) for g in sorted({g for g, _ in chosen}) if g >= 0)
    text = ", ".join(f"XID {x.code} ({x.meaning}) on GPU {g if g >= 0 else '?'}" for g, x in chosen[:4])
    if context is Context.EPILOG and job.present:
        mine = sorted({g for g, _ in chosen if g in job.gpus})
        if mine:
            text += f"; during job {job.job_id} on its GPU(s) {','.join(map(str, mine))}"
        elif not job.gpus:  # no GPU list in this epilog's environment: the job is all we know
            text += f"; during job {job.job_id}"
    elif running:
        held = sorted({(running[g], g) for g, _ in chosen if g in running})
        if held:
            text += "; during " + ", ".join(f"job {j} on its GPU {g}" for j, g in held)
    if fatal:
        worst = max((x.remediation for _, x in fatal), key=list(Remediation).index)
        return CheckResult(NAME, Status.FAIL, text, worst, gpus=gpus, values=values)
    return CheckResult(NAME, Status.WARN, text, gpus=gpus, values=values)


def boot_id(path: Path = BOOT_ID) -> str:
    try:
        return path.read_text(encoding="ascii").strip()
    except OSError:
        return ""


def latch(result: CheckResult, fatal: Sequence[tuple[int, int]], latched: Mapping[str, Any],
          boot: str) -> tuple[CheckResult, dict[str, Any]]:
    """(this run's result, the latches to keep): fatal XIDs ``(gpu, xid)`` seen now join the latches; a
    latch from another boot is dropped (a reboot resets the GPUs); while one is left, the result fails."""
    kept = {k: v for k, v in latched.items() if isinstance(v, dict) and v.get("boot") == boot}
    for g, code in fatal:
        x = xid_catalog.classify(code)
        kept.setdefault(f"{g}:{code}", {"boot": boot, "remediation": x.remediation.value,
                                        "reason": f"XID {code} ({x.meaning}) on GPU {g if g >= 0 else '?'}"})
    if result.status is Status.FAIL or not kept:
        return result, kept
    first = kept[sorted(kept)[0]]
    worst = max((Remediation(v["remediation"]) for v in kept.values()), key=list(Remediation).index)
    gpus = tuple(Gpu(g) for g in sorted({int(k.split(":")[0]) for k in kept}) if g >= 0)
    more = f" (+{len(kept) - 1} more)" if len(kept) > 1 else ""
    text = f"{first['reason']}{more}; latched until the GPU is reset (restart the pod)"
    return CheckResult(NAME, Status.FAIL, text, worst, gpus=gpus, values=result.values), kept


def run(env: CheckEnv) -> CheckResult:
    got = session(env, NAME)
    if isinstance(got, CheckResult):
        return got
    nv, devs = got
    try:
        # The agent's set has held every XID since the pod started; a set of this run's own sees only
        # those raised while it runs (the kernel log has the rest).
        watch = env.gpus.xid_watch
        events = list(rd.drain_xids(nv, watch) if watch is not None else rd.xid_events(nv, devs))
        bus = nv.batch(lambda: {_bus(nv, d): d.index for d in devs})
    except NvmlHung as exc:
        return CheckResult(NAME, Status.FAIL, f"NVML hung: {exc}", Remediation.RESTART_POD)
    except NvmlError as exc:
        return CheckResult(NAME, Status.FAIL, f"XID events unreadable: {exc}", Remediation.DRAIN)
    state = env.state.read(STATE_KEY)
    # A new container has no cursor: what the log held before it started was the previous pod's, whose
    # restart reset the GPU; reading it again would latch a fault the restart cleared.
    since = container_start_usec() if "kmsg_seq" not in state else 0
    kernel, last = parse_kmsg(read_kernel_log(Path(env.config.kernel_log)), int(state.get("kmsg_seq", -1)), since)
    events += [(bus.get(pci, -1), x) for pci, x in kernel]
    totals = Counter(state.get("totals", {}))
    for g, x in events:
        totals[f"{g}:{x}"] += 1
    fatal = [(g, x) for g, x in events if xid_catalog.classify(x).severity is xid_catalog.Severity.FATAL]
    judged = judge(events, devs, env.job, env.context, env.gpus.jobs_on_gpus)
    result, latched = latch(judged, fatal, state.get(LATCHED, {}), boot_id())
    env.state.write(STATE_KEY, {"kmsg_seq": last, "totals": dict(totals), LATCHED: latched})
    return result


def _bus(nv: Nvml, d: rd.Device) -> str:
    """The GPU's PCI bus id as the kernel log writes it ("0000:3b:00")."""
    pci = nv.optional("nvmlDeviceGetPciInfo", d.handle)
    if pci is None:
        return f"?{d.index}"
    bus_id = pci.busId.decode() if isinstance(pci.busId, bytes) else str(pci.busId)
    return bus_id[-12:-2].lower() if len(bus_id) >= 12 else bus_id.lower()


CHECK = Check(NAME, frozenset({Context.PROLOG, Context.EPILOG, Context.PERIODIC, Context.STARTUP}), run,
              timeout=5.0, skippable=True, description="XID errors since the last run")
