"""xid: XID errors since the last run, from an NVML event set and the kernel log, classified by the catalog.

The kernel log (/dev/kmsg, where readable) holds every XID the driver raised, so the run keeps a
cursor (the last record's sequence number) in the state dir and reads only what is new. In the epilog,
XIDs on the job's GPUs are attributed to the job in the reason.
Ref: https://docs.nvidia.com/deploy/xid-errors/index.html (driver log line "NVRM: Xid (PCI:...): N, ...")
"""

from __future__ import annotations

import errno
import logging
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

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
_KMSG = re.compile(r"^\d+,(\d+),\d+,[^;]*;(.*)$")
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\): (\d+)")
MAX_KMSG_BYTES = 8 * 1024 * 1024

log = logging.getLogger(__name__)


def parse_kmsg(lines: Iterable[str], after_seq: int) -> tuple[list[tuple[str, int]], int]:
    """(PCI bus id, xid) for each XID record past ``after_seq``, and the last sequence number seen."""
    found, last = [], after_seq
    for line in lines:
        m = _KMSG.match(line.rstrip("\n"))
        if not m:
            continue
        seq = int(m.group(1))
        if seq <= after_seq:
            continue
        last = max(last, seq)
        x = _XID.search(m.group(2))
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


def judge(events: Sequence[tuple[int, int]], devs: Sequence[rd.Device], job: JobInfo,
          context: Context) -> CheckResult:
    """events: (gpu index or -1 when unknown, xid)."""
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
    if fatal:
        worst = max((x.remediation for _, x in fatal), key=list(Remediation).index)
        return CheckResult(NAME, Status.FAIL, text, worst, gpus=gpus, values=values)
    return CheckResult(NAME, Status.WARN, text, gpus=gpus, values=values)


def run(env: CheckEnv) -> CheckResult:
    got = session(env, NAME)
    if isinstance(got, CheckResult):
        return got
    nv, devs = got
    try:
        events = list(rd.xid_events(nv, devs))
        bus = {_bus(nv, d): d.index for d in devs}
    except NvmlHung as exc:
        return CheckResult(NAME, Status.FAIL, f"NVML hung: {exc}", Remediation.RESTART_POD)
    except NvmlError as exc:
        return CheckResult(NAME, Status.FAIL, f"XID events unreadable: {exc}", Remediation.DRAIN)
    state = env.state.read(STATE_KEY)
    kernel, last = parse_kmsg(read_kernel_log(Path(env.config.kernel_log)), int(state.get("kmsg_seq", -1)))
    events += [(bus.get(pci, -1), x) for pci, x in kernel]
    totals = Counter(state.get("totals", {}))
    for g, x in events:
        totals[f"{g}:{x}"] += 1
    env.state.write(STATE_KEY, {"kmsg_seq": last, "totals": dict(totals)})
    return judge(events, devs, env.job, env.context)


def _bus(nv: Nvml, d: rd.Device) -> str:
    """The GPU's PCI bus id as the kernel log writes it ("0000:3b:00")."""
    pci = nv.optional("nvmlDeviceGetPciInfo", d.handle)
    if pci is None:
        return f"?{d.index}"
    bus_id = pci.busId.decode() if isinstance(pci.busId, bytes) else str(pci.busId)
    return bus_id[-12:-2].lower() if len(bus_id) >= 12 else bus_id.lower()


CHECK = Check(NAME, frozenset({Context.PROLOG, Context.EPILOG, Context.PERIODIC, Context.STARTUP}), run,
              timeout=5.0, skippable=True, description="XID errors since the last run")
