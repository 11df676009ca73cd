"""Typed readers over the NVML adapter: one function per NVML query the checks use.

Every call goes through ``Nvml.call`` / ``Nvml.optional`` (a deadline on each, codes translated once
in ``slurmpod.nvml``); a reader returns None where NVML answers "not supported", never a failure.
Ref: https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slurmpod.nvml import Nvml, NvmlError, NvmlHung

log = logging.getLogger(__name__)

# Ref: nvmlMemoryErrorType_t / nvmlEccCounterType_t
CORRECTED, UNCORRECTED = 0, 1
VOLATILE, AGGREGATE = 0, 1
# Ref: nvmlPageRetirementCause_t
RETIRED_SBE, RETIRED_DBE = 0, 1
# Ref: nvmlNvLinkErrorCounter_t (DL_REPLAY, DL_RECOVERY, DL_CRC_FLIT, DL_CRC_DATA)
NVLINK_COUNTERS = ("replay", "recovery", "crc_flit", "crc_data")
NVLINK_MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS on Hopper; newer pynvml allow 36, links past a GPU's count error
# Ref: nvmlClocksEventReasons (nvmlClocksEventReasonHwSlowdown, ...HwThermalSlowdown, ...HwPowerBrakeSlowdown)
CLOCK_EVENTS = {0x8: "hw_slowdown", 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake", 0x20: "sw_thermal_slowdown"}
CLOCK_EVENTS_BAD = 0x8 | 0x40 | 0x80
XID_EVENT = 0x8  # nvmlEventTypeXidCriticalError
NVML_TEMPERATURE_GPU = 0
# Ref: nvmlGpuFabricState_t
FABRIC_NOT_SUPPORTED, FABRIC_NOT_STARTED, FABRIC_IN_PROGRESS, FABRIC_COMPLETED = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class Device:
    index: int
    uuid: str
    name: str
    handle: Any


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def devices(nv: Nvml) -> tuple[Device, ...]:
    def read() -> tuple[Device, ...]:
        out = []
        for i in range(nv.count()):
            h = nv.handle(i)
            out.append(Device(i, _text(nv.call("nvmlDeviceGetUUID", h)), _text(nv.call("nvmlDeviceGetName", h)), h))
        return tuple(out)
    return nv.batch(read)


@dataclass(frozen=True, slots=True)
class Ecc:
    volatile_corrected: int
    volatile_uncorrected: int
    aggregate_uncorrected: int


def ecc(nv: Nvml, d: Device) -> Ecc | None:
    def one(kind: int, counter: int) -> int | None:
        value = nv.optional("nvmlDeviceGetTotalEccErrors", d.handle, kind, counter)
        return None if value is None else int(value)

    vc, vu, au = one(CORRECTED, VOLATILE), one(UNCORRECTED, VOLATILE), one(UNCORRECTED, AGGREGATE)
    if vc is None and vu is None:
        return None  # ECC off or not offered (consumer GPUs)
    return Ecc(vc or 0, vu or 0, au or 0)


@dataclass(frozen=True, slots=True)
class RetiredPages:
    sbe: int
    dbe: int
    pending: bool


def retired_pages(nv: Nvml, d: Device) -> RetiredPages | None:
    sbe = nv.optional("nvmlDeviceGetRetiredPages", d.handle, RETIRED_SBE)
    if sbe is None:
        return None  # Ampere and later remap rows instead
    dbe = nv.optional("nvmlDeviceGetRetiredPages", d.handle, RETIRED_DBE) or []
    pending = nv.optional("nvmlDeviceGetRetiredPagesPendingStatus", d.handle)
    return RetiredPages(len(sbe), len(dbe), bool(pending))


@dataclass(frozen=True, slots=True)
class Remap:
    corrected: int
    uncorrected: int
    pending: bool
    failure: bool


def remapped_rows(nv: Nvml, d: Device) -> Remap | None:
    value = nv.optional("nvmlDeviceGetRemappedRows", d.handle)
    if value is None:
        return None
    corr, unc, pending, failure = (int(v) for v in value)
    return Remap(corr, unc, bool(pending), bool(failure))


@dataclass(frozen=True, slots=True)
class Link:
    link: int
    up: bool
    counters: tuple[tuple[str, int], ...]  # (NVLINK_COUNTERS name, value), missing when not supported


def nvlinks(nv: Nvml, d: Device) -> tuple[Link, ...] | None:
    """The GPU's links; None when the GPU has no NVLink. A link index past the GPU's links errors."""
    links = []
    for link in range(NVLINK_MAX_LINKS):
        try:
            state = nv.call("nvmlDeviceGetNvLinkState", d.handle, link)
        except NvmlError as exc:
            if link == 0 and exc.code == 3:
                return None
            break  # past the last link (NVML answers invalid argument / not supported)
        counters = []
        for i, name in enumerate(NVLINK_COUNTERS):
            value = nv.optional("nvmlDeviceGetNvLinkErrorCounter", d.handle, link, i)
            if value is not None:
                counters.append((name, int(value)))
        links.append(Link(link, bool(state), tuple(counters)))
    return tuple(links)


def clock_events(nv: Nvml, d: Device) -> int | None:
    value = nv.optional("nvmlDeviceGetCurrentClocksEventReasons", d.handle)
    if value is None:  # drivers before 535 name it "throttle reasons"
        value = nv.optional("nvmlDeviceGetCurrentClocksThrottleReasons", d.handle)
    return None if value is None else int(value)


def temperature(nv: Nvml, d: Device) -> int | None:
    value = nv.optional("nvmlDeviceGetTemperature", d.handle, NVML_TEMPERATURE_GPU)
    return None if value is None else int(value)


@dataclass(frozen=True, slots=True)
class Usage:
    used_mib: int
    pids: tuple[int, ...]


def usage(nv: Nvml, d: Device) -> Usage:
    mem = nv.call("nvmlDeviceGetMemoryInfo", d.handle)
    procs = nv.optional("nvmlDeviceGetComputeRunningProcesses", d.handle) or []
    return Usage(int(mem.used) // (1024 * 1024), tuple(sorted(int(p.pid) for p in procs)))


def persistence(nv: Nvml, d: Device) -> bool | None:
    value = nv.optional("nvmlDeviceGetPersistenceMode", d.handle)
    return None if value is None else bool(value)


@dataclass(frozen=True, slots=True)
class Fabric:
    state: int
    status: int  # an NVML return code; 0 success


def fabric(nv: Nvml, d: Device) -> Fabric | None:
    """NVSwitch fabric registration (Hopper and later); None on GPUs without a fabric."""
    info = nv.module.c_nvmlGpuFabricInfo_t()
    if nv.optional("nvmlDeviceGetGpuFabricInfo", d.handle, nv.module.byref(info)) is None:
        return None
    if int(info.state) == FABRIC_NOT_SUPPORTED:
        return None
    return Fabric(int(info.state), int(info.status))


@dataclass(frozen=True, slots=True)
class XidWatch:
    """An NVML event set registered for XIDs on some GPUs, and which handle is which GPU index."""

    event_set: object
    by_handle: Mapping[int, int]


def watch_xids(nv: Nvml, devs: tuple[Device, ...]) -> XidWatch:
    """An event set registered for XID events on ``devs``; free it with ``unwatch_xids``.
    Ref: https://docs.nvidia.com/deploy/nvml-api/group__nvmlEvents.html (nvmlDeviceRegisterEvents)"""
    def register() -> XidWatch:
        event_set = nv.call("nvmlEventSetCreate")
        by_handle: dict[int, int] = {}
        for d in devs:
            try:
                nv.call("nvmlDeviceRegisterEvents", d.handle, XID_EVENT, event_set)
            except NvmlError as exc:  # not supported on this GPU: no XID events from it
                log.debug("no XID events: gpu=%s error=%s", d.index, exc)
            by_handle[_address(d.handle)] = d.index
        return XidWatch(event_set, by_handle)
    return nv.batch(register)


def unwatch_xids(nv: Nvml, watch: XidWatch) -> None:
    try:
        nv.call("nvmlEventSetFree", watch.event_set)
    except (NvmlError, NvmlHung) as exc:  # a hung library keeps its set; the process is ending
        log.debug("nvmlEventSetFree: %s", exc)


def drain_xids(nv: Nvml, watch: XidWatch, limit: int = 256) -> tuple[tuple[int, int], ...]:
    """(gpu index, xid) for each XID event waiting in ``watch`` now: 0 ms waits until NVML says timeout
    (NVML_ERROR_TIMEOUT: nothing more is waiting). Ref: nvmlEventSetWait_v2 in the page above."""
    def drain() -> tuple[tuple[int, int], ...]:
        found = []
        for _ in range(limit):
            try:
                data = nv.call("nvmlEventSetWait_v2", watch.event_set, 0)
            except NvmlError as exc:
                if exc.code == 10:  # NVML_ERROR_TIMEOUT
                    break
                raise
            found.append((watch.by_handle.get(_address(data.device), -1), int(data.eventData)))
        return tuple(found)
    return nv.batch(drain)


def xid_events(nv: Nvml, devs: tuple[Device, ...], limit: int = 256) -> tuple[tuple[int, int], ...]:
    """(gpu index, xid) for each XID event raised while this call runs. Events only reach a set after it
    is registered, so a set made per run misses the XIDs between runs: those come from the kernel log,
    or from the health agent's set, registered for the pod's lifetime (``watch_xids``)."""
    watch = watch_xids(nv, devs)
    try:
        return drain_xids(nv, watch, limit)
    finally:
        unwatch_xids(nv, watch)


def _address(handle: Any) -> int:
    """A device handle's identity (pynvml hands out fresh ctypes pointer objects)."""
    import ctypes  # noqa: PLC0415 - only here, for the cast

    return int(ctypes.cast(handle, ctypes.c_void_p).value or 0)
