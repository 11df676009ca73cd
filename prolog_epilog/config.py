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

from slurmpod import well_known as wk
from slurmpod.errors import BadInput
from slurmpod.problems import Problems, Section, join
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
    auth: wk.Auth | None = None
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


def _thresholds(t: Section) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in t.doc.items():
        if key not in _FIELDS:
            continue
        kind = _FIELDS[key].type
        if kind == "bool":
            if t.typed(key, None, bool, "true or false") is not None:
                out[key] = value
        elif kind == "int":
            v = t.typed(key, None, int, "a whole number")
            if v is not None and t.problems.check(v >= 0, t.where(key), value, "must not be negative"):
                out[key] = v
        elif isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            out[key] = float(value)
        else:
            t.problems.add(t.where(key), value, "must be a non-negative number")
    return out


def _contexts(p: Problems, path: str, raw: Any) -> frozenset[Context] | None:
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


def _check(c: Section) -> CheckSettings:
    return CheckSettings(
        enabled=bool(c.flag("enabled", True)),
        skippable=None if c.raw("skippable") is None else c.flag("skippable"),
        timeout=_positive(c.problems, c.where("timeout"), c.doc["timeout"]) if "timeout" in c.doc else None,
        contexts=_contexts(c.problems, c.where("contexts"), c.doc["contexts"]) if "contexts" in c.doc else None,
    )


def _absolute(doc: Section, key: str, value: Any) -> bool:
    return doc.problems.check(isinstance(value, str) and value.startswith("/"), doc.where(key), value,
                              "must be an absolute path")


def parse(raw: Any, known_checks: set[str]) -> Config:
    """A validated Config from a YAML document; BadInput naming every bad key."""
    p = Problems()
    doc = p.section("", raw, _TOP)
    deadlines = dict(DEFAULT_DEADLINES)
    for key, value in p.mapping("deadline", doc.raw("deadline", {})).items():
        where = join("deadline", key)
        if key not in {c.value for c in Context}:
            p.add(where, value, f"unknown context (allowed: {', '.join(c.value for c in Context)})")
            continue
        seconds = _positive(p, where, value)
        if seconds is not None:
            deadlines[Context(key)] = seconds
    expected = doc.raw("expected_gpus")
    if expected is not None:
        expected = doc.typed("expected_gpus", None, int, "a whole number")
        if expected is not None:
            p.check(expected >= 0, "expected_gpus", expected, "must not be negative")
    clean = doc.typed("clean_runs_to_undrain", CLEAN_RUNS_TO_UNDRAIN, int, "a whole number")
    if clean is not None:
        p.check(clean >= 1, "clean_runs_to_undrain", clean, "must be at least 1")
    checks: dict[str, CheckSettings] = {}
    for name, raw_check in p.mapping("checks", doc.raw("checks", {})).items():
        where = join("checks", name)
        if name not in known_checks:
            p.add(where, name, f"unknown check (known: {', '.join(sorted(known_checks))})")
            continue
        checks[name] = _check(p.section(where, raw_check, _CHECK_KEYS, nullable=False))
    thresholds = _thresholds(doc.section("thresholds", _FIELDS, nullable=False))
    models = []
    for m in doc.sections("models", [], {"match", "thresholds"}):
        match = m.raw("match")
        if p.check(isinstance(match, str) and bool(match), m.where("match"), match,
                   "must be a non-empty part of the NVML device name"):
            models.append(ModelRule(str(match), _thresholds(m.section("thresholds", _FIELDS, nullable=False))))
    scratch = doc.raw("scratch_dir", "/tmp")
    _absolute(doc, "scratch_dir", scratch)
    mounts = doc.listed("required_mounts", [], "must be a list of absolute paths")
    for i, mount in enumerate(mounts or []):
        _absolute(doc, f"required_mounts[{i}]", mount)
    kernel_log = doc.raw("kernel_log", "/dev/kmsg")
    _absolute(doc, "kernel_log", kernel_log)
    auth = doc.choice("auth", wk.Auth, None)
    real_memory = doc.raw("real_memory_mib")
    if real_memory is not None:
        real_memory = doc.typed("real_memory_mib", None, int, "a whole number of MiB")
    p.raise_if_any()
    return Config(deadlines=deadlines, expected_gpus=expected,
                  clean_runs_to_undrain=int(clean or CLEAN_RUNS_TO_UNDRAIN), checks=checks, thresholds=thresholds,
                  models=tuple(models), scratch_dir=str(scratch), required_mounts=tuple(str(m) for m in mounts or ()),
                  kernel_log=str(kernel_log), auth=auth,
                  real_memory_mib=real_memory)


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
