"""Load the policy YAML into a `Policy`: every problem reported at once, each naming its key path.

Unknown keys are refused, so a typo (``maxTimeMinute``) is an error, never a rule silently off.
Custom rule files are executed here, at load time, never at import time.
"""

from __future__ import annotations

import importlib.util
import signal
from pathlib import Path
from typing import Any

import yaml

from slurmpod.errors import BadInput
from slurmpod.policy import model as pol
from slurmpod.problems import Problems, join

TOP_KEYS = ("failMode", "topology", "tiers", "defaultTier", "cpuOnlyPartitions", "rules", "acceptUnverifiedAccounts")
TOPOLOGY_KEYS = ("plugin", "groupSize", "maxSwitchWaitSeconds", "gpuJobsOnly", "oversize", "wholeNodeGpus", "optOut")
TIER_KEYS = ("name", "partitions", "qos", "requeue", "graceSignal", "maxTimeMinutes", "overTime", "access")
ACCESS_KEYS = ("users", "groups", "accounts")
GRACE_KEYS = ("signal", "seconds", "target")
RULE_KEYS = ("file", "function")
WARN_TIME_MAX = 0xFFFF  # job_desc.warn_time is a uint16_t. Ref: slurm/slurm.h


def load(path: str | Path, accounts_enforced: bool = True) -> pol.Policy:
    """Read and validate the policy file; BadInput names the file's key paths. ``accounts_enforced``:
    whether Slurm checks --account against its associations on this cluster (bridge.accounts_enforced)."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise BadInput.one(str(path), "(yaml)", f"not valid YAML: {exc}") from None
    return parse(raw, Path(path).parent, accounts_enforced)


def fail_mode_of(raw: Any) -> pol.FailMode:
    """The fail mode a possibly invalid document asks for (closed unless it says `failMode: open`)."""
    return pol.FailMode.OPEN if isinstance(raw, dict) and raw.get("failMode") == "open" else pol.FailMode.CLOSED


def parse(raw: Any, base_dir: Path, accounts_enforced: bool = True) -> pol.Policy:
    p = Problems()
    doc = p.mapping("", raw)
    p.unknown_keys("", doc, TOP_KEYS)
    fail_mode = _enum(p, "failMode", doc.get("failMode", "closed"), pol.FailMode)
    topology = _topology(p, doc.get("topology"))
    tiers = tuple(_tier(p, where, i, item) for i, (where, item) in enumerate(p.mappings("tiers", doc["tiers"]))) \
        if "tiers" in doc else ()
    p.unique("tiers", (t.name for t in tiers))
    default_tier = doc.get("defaultTier")
    if default_tier is not None and not any(t.name == default_tier for t in tiers):
        p.add("defaultTier", default_tier, "must name one of the tiers")
    claimed: dict[str, str] = {}
    for i, tier in enumerate(tiers):
        for part in sorted(tier.partitions) + [f"qos:{q}" for q in sorted(tier.qos)]:
            if part in claimed:
                p.add(f"tiers[{i}]", part, f"already mapped to tier {claimed[part]!r}")
            claimed[part] = tier.name
    cpu_only = _names(p, "cpuOnlyPartitions", doc.get("cpuOnlyPartitions", []))
    rules = tuple(_rule(p, where, item, base_dir) for where, item in p.mappings("rules", doc.get("rules", [])))
    unverified = p.typed("acceptUnverifiedAccounts", doc.get("acceptUnverifiedAccounts", False), bool, "true or false")
    if not accounts_enforced and not unverified:
        _unverified_accounts(p, tiers, topology)
    p.raise_if_any()
    return pol.Policy(fail_mode=fail_mode or pol.FailMode.CLOSED, topology=topology, tiers=tiers,
                      default_tier=default_tier, cpu_only_partitions=cpu_only,
                      custom=tuple(r for r in rules if r is not None))


def _unverified_accounts(p: Problems, tiers: tuple[pol.Tier, ...], topology: pol.Topology) -> None:
    """Access by account is whatever the user types unless Slurm checks --account against the database
    (AccountingStorageEnforce=associations): refuse such rules, naming each one.
    Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_AccountingStorageEnforce"""
    why = ("names accounts, but this cluster does not enforce them (slurm.conf AccountingStorageEnforce lacks "
           "associations), so any user may type --account; use users or groups, or set "
           "acceptUnverifiedAccounts: true")
    for i, tier in enumerate(tiers):
        if tier.access.accounts:
            p.add(f"tiers[{i}].access.accounts", sorted(tier.access.accounts), why)
    if topology.opt_out.accounts:
        p.add("topology.optOut.accounts", sorted(topology.opt_out.accounts), why)


def _topology(p: Problems, raw: Any) -> pol.Topology:
    if raw is None:
        return pol.Topology()
    doc = p.mapping("topology", raw)
    p.unknown_keys("topology", doc, TOPOLOGY_KEYS)
    kind = _enum(p, "topology.plugin", doc.get("plugin", "none"), pol.TopologyKind) or pol.TopologyKind.NONE
    size = _int(p, "topology.groupSize", doc.get("groupSize", 0), 0)
    if kind is not pol.TopologyKind.NONE and size < 1:
        p.add("topology.groupSize", doc.get("groupSize"), "required (nodes per block or leaf switch, >= 1)")
    wait = _int(p, "topology.maxSwitchWaitSeconds", doc.get("maxSwitchWaitSeconds", 300), 0)
    gpu_only = p.typed("topology.gpuJobsOnly", doc.get("gpuJobsOnly", True), bool, "true or false")
    oversize = _enum(p, "topology.oversize", doc.get("oversize", "segment"), pol.Oversize) or pol.Oversize.SEGMENT
    if oversize is pol.Oversize.SEGMENT and kind is pol.TopologyKind.TREE:
        p.add("topology.oversize", "segment", "segments need topology/block; use reject or allow with tree")
    whole = _int(p, "topology.wholeNodeGpus", doc.get("wholeNodeGpus", 0), 0)
    opt_out = _access(p, "topology.optOut", doc["optOut"]) if "optOut" in doc else pol.NOBODY
    return pol.Topology(kind, size, wait, gpu_only if gpu_only is not None else True, oversize, whole, opt_out)


def _tier(p: Problems, where: str, rank: int, doc: dict[str, Any]) -> pol.Tier:
    p.unknown_keys(where, doc, TIER_KEYS)
    name = p.typed(join(where, "name"), doc.get("name"), str, "a tier name") or f"#{rank}"
    partitions = _names(p, join(where, "partitions"), doc.get("partitions", []))
    qos = _names(p, join(where, "qos"), doc.get("qos", []))
    if not partitions and not qos:
        p.add(where, name, "a tier needs partitions or qos to be matched by")
    requeue = p.typed(join(where, "requeue"), doc.get("requeue", False), bool, "true or false")
    grace = _grace(p, join(where, "graceSignal"), doc["graceSignal"]) if doc.get("graceSignal") is not None else None
    max_time = _int(p, join(where, "maxTimeMinutes"), doc["maxTimeMinutes"], 1) \
        if doc.get("maxTimeMinutes") is not None else None
    over = _enum(p, join(where, "overTime"), doc.get("overTime", "reject"), pol.OverTime) or pol.OverTime.REJECT
    access = _access(p, join(where, "access"), doc["access"]) if "access" in doc else pol.EVERYONE
    return pol.Tier(name, rank, partitions, qos, bool(requeue), grace, max_time, over, access)


def _grace(p: Problems, where: str, raw: Any) -> pol.GraceSignal | None:
    doc = p.mapping(where, raw)
    p.unknown_keys(where, doc, GRACE_KEYS)
    sig = _signal(p, join(where, "signal"), doc.get("signal"))
    seconds = _int(p, join(where, "seconds"), doc.get("seconds"), 1)
    p.check(seconds <= WARN_TIME_MAX, join(where, "seconds"), seconds, f"must be <= {WARN_TIME_MAX}")
    target = _enum(p, join(where, "target"), doc.get("target", "steps"), pol.SignalTarget) or pol.SignalTarget.STEPS
    return pol.GraceSignal(sig, seconds, target) if sig else None


def _signal(p: Problems, where: str, raw: Any) -> int:
    """USR1, SIGUSR1 or a number. Ref: https://slurm.schedmd.com/sbatch.html#OPT_signal"""
    if isinstance(raw, int) and not isinstance(raw, bool) and 0 < raw < 65:
        return raw
    if isinstance(raw, str):
        name = raw.upper() if raw.upper().startswith("SIG") else "SIG" + raw.upper()
        try:
            return int(signal.Signals[name])
        except KeyError:
            pass
    p.add(where, raw, "must be a signal name (USR1, SIGTERM) or number 1-64")
    return 0


def _access(p: Problems, where: str, raw: Any) -> pol.Access:
    doc = p.mapping(where, raw)
    p.unknown_keys(where, doc, ACCESS_KEYS)
    return pol.Access(_names(p, join(where, "users"), doc.get("users", [])),
                      _names(p, join(where, "groups"), doc.get("groups", [])),
                      _names(p, join(where, "accounts"), doc.get("accounts", [])))


def _rule(p: Problems, where: str, doc: dict[str, Any], base_dir: Path) -> pol.CustomRule | None:
    p.unknown_keys(where, doc, RULE_KEYS)
    file = p.typed(join(where, "file"), doc.get("file"), str, "a path to a Python file")
    func_name = p.typed(join(where, "function"), doc.get("function", "rule"), str, "a function name")
    if file is None or func_name is None:
        return None
    path = Path(file) if Path(file).is_absolute() else base_dir / file
    spec = importlib.util.spec_from_file_location(f"slurmpod_policy_rule_{path.stem}", path)
    if spec is None or spec.loader is None or not path.is_file():
        p.add(join(where, "file"), file, "no such Python file")
        return None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a site's file: any error it raises is a problem with the policy
        p.add(join(where, "file"), file, f"failed to load: {type(exc).__name__}: {exc}")
        return None
    func = getattr(module, func_name, None)
    if not callable(func):
        p.add(join(where, "function"), func_name, f"no such function in {file}")
        return None
    return pol.CustomRule(f"{path.name}:{func_name}", func)


def _names(p: Problems, where: str, raw: Any) -> frozenset[str]:
    if isinstance(raw, list) and all(isinstance(x, str) and x and x.strip() == x for x in raw):
        return frozenset(raw)
    p.add(where, raw, "must be a list of names")
    return frozenset()


def _int(p: Problems, where: str, raw: Any, minimum: int) -> int:
    value = p.typed(where, raw, int, "an integer")
    if value is None:
        return minimum
    return value if p.check(value >= minimum, where, value, f"must be >= {minimum}") else minimum


def _enum(p: Problems, where: str, raw: Any, kind: type[pol.E]) -> pol.E | None:
    try:
        return kind(raw)
    except ValueError:
        p.add(where, raw, f"expected one of {', '.join(str(m.value) for m in kind)}")
        return None
