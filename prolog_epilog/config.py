"""The health config file (YAML): which checks run, their time budgets, thresholds per GPU model.

Every threshold is a named default with its source; a file only overrides what it names. A model
entry matches a GPU when its ``match`` text occurs in the NVML device name (first match wins) and is
laid over the top-level thresholds. Validated with ``Problems``: every error names its key path.

    deadline: {prolog: 20, epilog: 30, periodic: 90, startup: 120}
    expected_gpus: 8
    clean_runs_to_undrain: 3
    checks:
      nvlink: {enabled: true, timeout: 5, skippable: true, contexts: [periodic, epilog]}
    thresholds: {temperature_max_c: 88}
    models:
      - {match: "H200", thresholds: {allreduce_busbw_min_gbps: 430}}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slurmpod.errors import BadInput
from slurmpod.problems import Problems, join
from slurmpod.prolog_epilog.result import Context

# DCGM fails a GPU whose SBE + DBE retired pages reach DCGM_LIMIT_MAX_RETIRED_PAGES: 60 (newer releases
# 63, "to match the field diag"). Ref: DCGM dcgm_gpu_hardware_limits.h;
# https://docs.nvidia.com/deploy/dynamic-page-retirement/ (XID 48/63/64, nvmlDeviceGetRetiredPages)
RETIRED_PAGES_MAX = 60
# Ref: https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/ (an uncorrectable error is contained by
# row remapping and needs a GPU reset; DCGM's health check fails on any volatile DBE)
ECC_UNCORRECTED_VOLATILE_MAX = 0
# A site choice: correctable errors are expected at a low rate; a flood (NVIDIA's XID 92, "high
# single-bit ECC error rate") is worth a warning before it becomes uncorrectable.
ECC_CORRECTED_VOLATILE_MAX = 10_000
# Growth of one link's replay/recovery/CRC counters between two runs before a warning (DCGM's NVLink
# health watch flags any CRC growth; a few are normal on a busy link, so not a drain).
NVLINK_ERROR_GROWTH_MAX = 100
# Below the HBM/GPU slowdown temperatures NVML reports for H100/H200 (nvmlDeviceGetTemperatureThreshold);
# a hotter idle GPU means failing cooling. Ref: https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html
TEMPERATURE_MAX_C = 90
# Memory NVML reports used on an idle GPU: the driver's own reservation stays well below this.
GPU_MEMORY_HELD_MAX_MIB = 1024
# nccl-tests all_reduce_perf bus bandwidth at large messages (8 GPUs, NVSwitch), the floors.
# Ref: https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md (busbw definition)
ALLREDUCE_FLOORS_GBPS = (("H200", 430.0), ("H100", 460.0))
ALLREDUCE_BYTES = 512 * 1024 * 1024
DISK_FREE_MIN_GIB = 1.0  # "/" : enough for logs and Slurm's spool
SCRATCH_FREE_MIN_GIB = 10.0
# MemAvailable at least this share of the node's RealMemory. Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_RealMemory
MEM_AVAILABLE_MIN_FRACTION = 0.9
# Slurm kills a Prolog/Epilog past PrologEpilogTimeout, and a HealthCheckProgram that has not ended
# within 60 s; each deadline ends well before. (slurmd also runs HealthCheckProgram once at start, before
# it registers.) Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_PrologEpilogTimeout
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_HealthCheckProgram
DEFAULT_DEADLINES = {Context.PROLOG: 20.0, Context.EPILOG: 30.0, Context.PERIODIC: 50.0, Context.STARTUP: 120.0}
CLEAN_RUNS_TO_UNDRAIN = 3
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_AuthType (auth/munge, auth/slurm)
AUTH_TYPES = ("munge", "slurm")


@dataclass(frozen=True, slots=True)
class Thresholds:
    ecc_uncorrected_volatile_max: int = ECC_UNCORRECTED_VOLATILE_MAX
    ecc_corrected_volatile_max: int = ECC_CORRECTED_VOLATILE_MAX
    retired_pages_max: int = RETIRED_PAGES_MAX
    nvlink_error_growth_max: int = NVLINK_ERROR_GROWTH_MAX
    temperature_max_c: int = TEMPERATURE_MAX_C
    clock_events_fail: bool = False  # HW slowdown / thermal / power brake: warn (False) or fail (True)
    gpu_memory_held_max_mib: int = GPU_MEMORY_HELD_MAX_MIB
    allreduce_busbw_min_gbps: float = 0.0  # 0: no floor known for this model
    allreduce_bytes: int = ALLREDUCE_BYTES
    disk_free_min_gib: float = DISK_FREE_MIN_GIB
    scratch_free_min_gib: float = SCRATCH_FREE_MIN_GIB
    mem_available_min_fraction: float = MEM_AVAILABLE_MIN_FRACTION


_FIELDS = {f.name: f for f in dataclasses.fields(Thresholds)}


@dataclass(frozen=True, slots=True)
class CheckSettings:
    enabled: bool = True
    timeout: float | None = None  # None: the check's own budget
    skippable: bool | None = None  # may a job's comment skip it (None: the check's default)
    contexts: frozenset[Context] | None = None  # None: the check's own contexts


@dataclass(frozen=True, slots=True)
class ModelRule:
    match: str
    thresholds: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Config:
    deadlines: Mapping[Context, float] = field(default_factory=lambda: dict(DEFAULT_DEADLINES))
    expected_gpus: int | None = None  # None: from the pod's GPU limit (env), else not checked
    clean_runs_to_undrain: int = CLEAN_RUNS_TO_UNDRAIN
    checks: Mapping[str, CheckSettings] = field(default_factory=dict)
    thresholds: Mapping[str, Any] = field(default_factory=dict)
    models: tuple[ModelRule, ...] = ()
    scratch_dir: str = "/tmp"
    required_mounts: tuple[str, ...] = ()
    kernel_log: str = "/dev/kmsg"
    # Slurm's auth plugin and the node's RealMemory: the pod knows them from its env, but slurmd starts
    # the Prolog/Epilog/HealthCheckProgram with an environment of its own, so the pod writes them here.
    auth: str | None = None
    real_memory_mib: int | None = None

    def settings(self, check: str) -> CheckSettings:
        return self.checks.get(check, CheckSettings())

    def thresholds_for(self, gpu_name: str) -> Thresholds:
        """Built-in defaults, the model's built-in floor, the file's thresholds, then its model rule."""
        values: dict[str, Any] = {}
        floor = next((gbps for m, gbps in ALLREDUCE_FLOORS_GBPS if m in gpu_name), None)
        if floor is not None:
            values["allreduce_busbw_min_gbps"] = floor
        values.update(self.thresholds)
        rule = next((r for r in self.models if r.match in gpu_name), None)
        if rule is not None:
            values.update(rule.thresholds)
        return Thresholds(**values)


_TOP = {"deadline", "expected_gpus", "clean_runs_to_undrain", "checks", "thresholds", "models", "scratch_dir",
        "required_mounts", "kernel_log", "auth", "real_memory_mib"}
_CHECK_KEYS = {"enabled", "timeout", "skippable", "contexts"}


def _positive(p: Problems, path: str, value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        p.add(path, value, "must be a positive number of seconds")
        return None
    return float(value)


def _thresholds(p: Problems, path: str, raw: Any) -> dict[str, Any]:
    doc = p.mapping(path, raw)
    p.unknown_keys(path, doc, _FIELDS)
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if key not in _FIELDS:
            continue
        where = join(path, key)
        kind = _FIELDS[key].type
        if kind == "bool":
            if p.typed(where, value, bool, "true or false") is not None:
                out[key] = value
        elif kind == "int":
            v = p.typed(where, value, int, "a whole number")
            if v is not None and p.check(v >= 0, where, value, "must not be negative"):
                out[key] = v
        elif isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            out[key] = float(value)
        else:
            p.add(where, value, "must be a non-negative number")
    return out


def _contexts(p: Problems, path: str, raw: Any, known: set[str]) -> frozenset[Context] | None:
    if not isinstance(raw, list):
        p.add(path, raw, "must be a list of contexts")
        return None
    out = set()
    for i, item in enumerate(raw):
        if isinstance(item, str) and item in {c.value for c in Context}:
            out.add(Context(item))
        else:
            p.add(join(path, i), item, f"unknown context (allowed: {', '.join(c.value for c in Context)})")
    return frozenset(out)


def parse(raw: Any, known_checks: set[str]) -> Config:
    """A validated Config from a YAML document; BadInput naming every bad key."""
    p = Problems()
    doc = p.mapping("", raw)
    p.unknown_keys("", doc, _TOP)
    deadlines = dict(DEFAULT_DEADLINES)
    for key, value in p.mapping("deadline", doc.get("deadline", {})).items():
        where = join("deadline", key)
        if key not in {c.value for c in Context}:
            p.add(where, value, f"unknown context (allowed: {', '.join(c.value for c in Context)})")
            continue
        seconds = _positive(p, where, value)
        if seconds is not None:
            deadlines[Context(key)] = seconds
    expected = doc.get("expected_gpus")
    if expected is not None:
        expected = p.typed("expected_gpus", expected, int, "a whole number")
        if expected is not None:
            p.check(expected >= 0, "expected_gpus", expected, "must not be negative")
    clean = p.typed("clean_runs_to_undrain", doc.get("clean_runs_to_undrain", CLEAN_RUNS_TO_UNDRAIN), int,
                    "a whole number")
    if clean is not None:
        p.check(clean >= 1, "clean_runs_to_undrain", clean, "must be at least 1")
    checks: dict[str, CheckSettings] = {}
    for name, raw_check in p.mapping("checks", doc.get("checks", {})).items():
        where = join("checks", name)
        if name not in known_checks:
            p.add(where, name, f"unknown check (known: {', '.join(sorted(known_checks))})")
            continue
        c = p.mapping(where, raw_check)
        p.unknown_keys(where, c, _CHECK_KEYS)
        enabled = p.typed(join(where, "enabled"), c.get("enabled", True), bool, "true or false")
        skippable = c.get("skippable")
        if skippable is not None:
            skippable = p.typed(join(where, "skippable"), skippable, bool, "true or false")
        timeout = _positive(p, join(where, "timeout"), c["timeout"]) if "timeout" in c else None
        contexts = _contexts(p, join(where, "contexts"), c["contexts"], known_checks) if "contexts" in c else None
        checks[name] = CheckSettings(bool(enabled), timeout, skippable, contexts)
    thresholds = _thresholds(p, "thresholds", doc.get("thresholds", {}))
    models = []
    for where, m in p.mappings("models", doc.get("models", [])):
        p.unknown_keys(where, m, {"match", "thresholds"})
        match = m.get("match")
        if p.check(isinstance(match, str) and bool(match), join(where, "match"), match,
                   "must be a non-empty part of the NVML device name"):
            models.append(ModelRule(str(match), _thresholds(p, join(where, "thresholds"), m.get("thresholds", {}))))
    scratch = doc.get("scratch_dir", "/tmp")
    p.check(isinstance(scratch, str) and scratch.startswith("/"), "scratch_dir", scratch, "must be an absolute path")
    mounts = doc.get("required_mounts", [])
    if p.check(isinstance(mounts, list), "required_mounts", mounts, "must be a list of absolute paths"):
        for i, m in enumerate(mounts):
            p.check(isinstance(m, str) and m.startswith("/"), join("required_mounts", i), m, "must be an absolute path")
    kernel_log = doc.get("kernel_log", "/dev/kmsg")
    p.check(isinstance(kernel_log, str) and kernel_log.startswith("/"), "kernel_log", kernel_log,
            "must be an absolute path")
    auth = doc.get("auth")
    p.check(auth is None or auth in AUTH_TYPES, "auth", auth, f"must be one of {', '.join(AUTH_TYPES)}")
    real_memory = doc.get("real_memory_mib")
    if real_memory is not None:
        real_memory = p.typed("real_memory_mib", real_memory, int, "a whole number of MiB")
    p.raise_if_any()
    return Config(deadlines, expected, int(clean or CLEAN_RUNS_TO_UNDRAIN), checks, thresholds, tuple(models),
                  str(scratch), tuple(str(m) for m in mounts), str(kernel_log), auth, real_memory)


def load(path: Path | None, known_checks: set[str]) -> Config:
    """The config at ``path``; the defaults when there is none (no file is not an error).

    JSON (what the worker pod writes at start) is read without importing yaml: that import alone costs
    tens of milliseconds on every prolog, and JSON is YAML, so either text means the same config.
    """
    if path is None or not path.exists():
        return Config()
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("{"):
        import json  # noqa: PLC0415 - only for this form

        try:
            return parse(json.loads(text), known_checks)
        except ValueError:
            pass  # YAML flow style that is not JSON: the YAML reader decides
    import yaml  # noqa: PLC0415 - tens of ms on a loaded node: only when there is a YAML file to read

    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise BadInput.one(str(path), "", f"not YAML: {exc}") from None
    return parse(raw, known_checks)
