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
from slurmpod.problems import Problems, Section

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
    doc = p.section("", raw, TOP_KEYS)
    fail_mode = doc.choice("failMode", pol.FailMode, pol.FailMode.CLOSED)
    topology = _topology(doc.section("topology", TOPOLOGY_KEYS))
    tiers = tuple(_tier(t, i) for i, t in enumerate(doc.sections("tiers", [], TIER_KEYS)))
    p.unique("tiers", (t.name for t in tiers))
    default_tier = doc.raw("defaultTier")
    if default_tier is not None and not any(t.name == default_tier for t in tiers):
        p.add("defaultTier", default_tier, "must name one of the tiers")
    claimed: dict[str, str] = {}
    for i, tier in enumerate(tiers):
        for part in sorted(tier.partitions) + [f"qos:{q}" for q in sorted(tier.qos)]:
            if part in claimed:
                p.add(f"tiers[{i}]", part, f"already mapped to tier {claimed[part]!r}")
            claimed[part] = tier.name
    cpu_only = _names(doc, "cpuOnlyPartitions")
    rules = tuple(_rule(r, base_dir) for r in doc.sections("rules", [], RULE_KEYS))
    unverified = doc.flag("acceptUnverifiedAccounts")
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


def _topology(doc: Section) -> pol.Topology:
    if not doc.doc:
        return pol.Topology()
    p = doc.problems
    kind = doc.choice("plugin", pol.TopologyKind, pol.TopologyKind.NONE) or pol.TopologyKind.NONE
    size = _at_least(doc, "groupSize", 0, 0)
    if kind is not pol.TopologyKind.NONE and size < 1:
        p.add(doc.where("groupSize"), doc.raw("groupSize"), "required (nodes per block or leaf switch, >= 1)")
    wait = _at_least(doc, "maxSwitchWaitSeconds", 300, 0)
    gpu_only = doc.flag("gpuJobsOnly", True)
    oversize = doc.choice("oversize", pol.Oversize, pol.Oversize.SEGMENT) or pol.Oversize.SEGMENT
    if oversize is pol.Oversize.SEGMENT and kind is pol.TopologyKind.TREE:
        p.add(doc.where("oversize"), "segment", "segments need topology/block; use reject or allow with tree")
    whole = _at_least(doc, "wholeNodeGpus", 0, 0)
    opt_out = _access(doc.section("optOut", ACCESS_KEYS)) if "optOut" in doc.doc else pol.NOBODY
    return pol.Topology(kind, size, wait, gpu_only if gpu_only is not None else True, oversize, whole, opt_out)


def _tier(doc: Section, rank: int) -> pol.Tier:
    name = doc.typed("name", None, str, "a tier name") or f"#{rank}"
    partitions = _names(doc, "partitions")
    qos = _names(doc, "qos")
    if not partitions and not qos:
        doc.problems.add(doc.path, name, "a tier needs partitions or qos to be matched by")
    requeue = doc.flag("requeue")
    grace = _grace(doc.section("graceSignal", GRACE_KEYS)) if doc.raw("graceSignal") is not None else None
    max_time = _at_least(doc, "maxTimeMinutes", 1, 1) if doc.raw("maxTimeMinutes") is not None else None
    over = doc.choice("overTime", pol.OverTime, pol.OverTime.REJECT) or pol.OverTime.REJECT
    access = _access(doc.section("access", ACCESS_KEYS)) if "access" in doc.doc else pol.EVERYONE
    return pol.Tier(name, rank, partitions, qos, bool(requeue), grace, max_time, over, access)


def _grace(doc: Section) -> pol.GraceSignal | None:
    sig = _signal(doc)
    seconds = doc.integer("seconds", 0, 1, WARN_TIME_MAX)
    target = doc.choice("target", pol.SignalTarget, pol.SignalTarget.STEPS) or pol.SignalTarget.STEPS
    return pol.GraceSignal(sig, seconds, target) if sig and seconds else None


def _signal(doc: Section) -> int:
    """USR1, SIGUSR1 or a number. Ref: https://slurm.schedmd.com/sbatch.html#OPT_signal"""
    raw = doc.raw("signal")
    if isinstance(raw, int) and not isinstance(raw, bool) and 0 < raw < 65:
        return raw
    if isinstance(raw, str):
        name = raw.upper() if raw.upper().startswith("SIG") else "SIG" + raw.upper()
        try:
            return int(signal.Signals[name])
        except KeyError:
            pass
    doc.problems.add(doc.where("signal"), raw, "must be a signal name (USR1, SIGTERM) or number 1-64")
    return 0


def _access(doc: Section) -> pol.Access:
    return pol.Access(_names(doc, "users"), _names(doc, "groups"), _names(doc, "accounts"))


def _rule(doc: Section, base_dir: Path) -> pol.CustomRule | None:
    file = doc.typed("file", None, str, "a path to a Python file")
    func_name = doc.typed("function", "rule", str, "a function name")
    if file is None or func_name is None:
        return None
    path = Path(file) if Path(file).is_absolute() else base_dir / file
    spec = importlib.util.spec_from_file_location(f"slurmpod_policy_rule_{path.stem}", path)
    if spec is None or spec.loader is None or not path.is_file():
        doc.problems.add(doc.where("file"), file, "no such Python file")
        return None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a site's file: any error it raises is a problem with the policy
        doc.problems.add(doc.where("file"), file, f"failed to load: {type(exc).__name__}: {exc}")
        return None
    func = getattr(module, func_name, None)
    if not callable(func):
        doc.problems.add(doc.where("function"), func_name, f"no such function in {file}")
        return None
    return pol.CustomRule(f"{path.name}:{func_name}", func)


def _names(doc: Section, key: str) -> frozenset[str]:
    raw = doc.raw(key, [])
    if isinstance(raw, list) and all(isinstance(x, str) and x and x.strip() == x for x in raw):
        return frozenset(raw)
    doc.problems.add(doc.where(key), raw, "must be a list of names")
    return frozenset()


def _at_least(doc: Section, key: str, default: int, minimum: int) -> int:
    """A whole number >= ``minimum``; ``minimum`` (with its problem recorded) when it is not."""
    value = doc.integer(key, default, minimum, 2**31 - 1)
    return minimum if value is None else value
