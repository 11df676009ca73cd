"""The cluster spec: the controller's input (YAML from a ConfigMap), validated when loaded.

Every problem is reported at once, each naming its path in the document (``partitions[0].name``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurmpod import confvalues
from slurmpod import well_known as wk
from slurmpod.errors import BadInput, Problem

# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_PreemptMode
PREEMPT_MODES = ("OFF", "CANCEL", "REQUEUE", "SUSPEND", "GANG")
AUTH_TYPES = wk.AUTH_TYPES
TOPOLOGY_PLUGINS = ("none", "tree", "block")
SELECT_TYPES = ("cons_tres", "linear")


@dataclass(frozen=True, slots=True)
class NodeSetSpec:
    name: str
    feature: str


@dataclass(frozen=True, slots=True)
class PartitionSpec:
    name: str
    nodesets: tuple[str, ...]
    default: bool
    priority_tier: int
    preempt_mode: str
    grace_time: int
    max_time: str


@dataclass(frozen=True, slots=True)
class HooksSpec:
    """Programs Slurm runs on the nodes around jobs. Ref: https://slurm.schedmd.com/prolog_epilog.html"""

    prolog: str | None = None
    epilog: str | None = None
    prolog_flags: tuple[str, ...] = ()
    health_check_program: str | None = None
    health_check_interval: int = 0  # seconds; 0 disables the periodic run
    health_check_node_state: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    cluster_name: str
    auth: str
    select: str
    topology_plugin: str
    max_nodes: int
    node_timeout_seconds: int  # dynamic nodes not responding this long are deleted
    cgroups: bool  # proctrack/cgroup + task/cgroup (needs a delegated cgroup tree in the worker)
    partitions: tuple[PartitionSpec, ...]
    nodesets: tuple[NodeSetSpec, ...]
    extra_lines: tuple[str, ...]
    hooks: HooksSpec = HooksSpec()


_TOP_KEYS = {
    "clusterName",
    "auth",
    "select",
    "topologyPlugin",
    "maxNodes",
    "nodeTimeoutSeconds",
    "partitions",
    "nodesets",
    "extraLines",
    "hooks",
    "cgroups",
}
_PART_KEYS = {"name", "nodesets", "default", "priorityTier", "preemptMode", "graceTime", "maxTime"}


def _unknown(doc: dict[str, Any], allowed: set[str], path: str, problems: list[Problem]) -> None:
    for key in sorted(set(doc) - allowed):
        problems.append(
            Problem(f"{path}{key}", str(doc[key]), f"unknown key (allowed: {', '.join(sorted(allowed))})")
        )


def _mappings(
    doc: dict[str, Any], key: str, default: list[dict[str, Any]], problems: list[Problem], *, non_empty: bool
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The mappings of list ``key`` in order, each with its path prefix (``partitions[0].``)."""
    raw = doc.get(key, default)
    if not isinstance(raw, list) or (non_empty and not raw):
        problems.append(Problem(key, str(raw), "must be a non-empty list" if non_empty else "must be a list"))
        return
    for i, item in enumerate(raw):
        if isinstance(item, dict):
            yield f"{key}[{i}].", item
        else:
            problems.append(Problem(f"{key}[{i}]", str(item), "must be a mapping"))


def _duplicates(kind: str, names: list[str], problems: list[Problem]) -> None:
    for dup in sorted({n for n in names if names.count(n) > 1}):
        problems.append(Problem(kind, dup, "name used more than once"))


def _try(problems: list[Problem], fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except BadInput as exc:
        problems.extend(exc.problems)
        return None


def _max_time(field: str, value: object) -> str:
    text = str(value)
    # Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_MaxTime (minutes, [days-]hh:mm:ss or INFINITE)
    if text in ("INFINITE", "UNLIMITED") or re.fullmatch(r"[0-9]+(-[0-9]{1,2})?(:[0-9]{1,2}){0,2}", text):
        return text
    raise BadInput.one(field, text, "not a Slurm time (minutes, D-HH:MM:SS or INFINITE)")


def _preempt_text(value: object) -> str:
    """YAML 1.1 reads an unquoted `off` as false; for PreemptMode that can only mean OFF."""
    if value is False:
        return "OFF"
    return str(value).upper()


# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_PrologFlags
PROLOG_FLAGS = ("Alloc", "Contain", "DeferBatch", "NoHold", "ForceRequeueOnFail", "RunInJob", "Serial", "X11")
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_HealthCheckNodeState
HEALTH_CHECK_STATES = ("ALLOC", "ANY", "CYCLE", "IDLE", "MIXED", "NONDRAINED_IDLE", "START_ONLY")
_HOOK_KEYS = {"prolog", "epilog", "prologFlags", "healthCheckProgram", "healthCheckInterval",
              "healthCheckNodeState"}


def _hooks(doc: object, problems: list[Problem]) -> HooksSpec:
    if doc is None:
        return HooksSpec()
    if not isinstance(doc, dict):
        problems.append(Problem("hooks", str(doc), "must be a mapping"))
        return HooksSpec()
    _unknown(doc, _HOOK_KEYS, "hooks.", problems)
    paths: dict[str, str | None] = {}
    for key in ("prolog", "epilog", "healthCheckProgram"):
        value = doc.get(key)
        paths[key] = None if value is None else _try(problems, confvalues.path, f"hooks.{key}", str(value))
    lists: dict[str, tuple[str, ...]] = {}
    for key, allowed in (("prologFlags", PROLOG_FLAGS), ("healthCheckNodeState", HEALTH_CHECK_STATES)):
        raw = doc.get(key, [])
        if not isinstance(raw, list):
            problems.append(Problem(f"hooks.{key}", str(raw), "must be a list"))
            raw = []
        for i, item in enumerate(raw):
            _try(problems, _choice, f"hooks.{key}[{i}]", item, allowed)
        lists[key] = tuple(str(item) for item in raw if item in allowed)
    interval = _try(problems, confvalues.integer, "hooks.healthCheckInterval", doc.get("healthCheckInterval", 0),
                    0, 86_400)
    if interval and not paths["healthCheckProgram"]:
        problems.append(Problem("hooks.healthCheckInterval", str(interval), "needs hooks.healthCheckProgram"))
    return HooksSpec(paths["prolog"], paths["epilog"], lists["prologFlags"], paths["healthCheckProgram"],
                     interval or 0, lists["healthCheckNodeState"])


def _choice(field: str, value: object, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise BadInput.one(field, str(value), f"must be one of {', '.join(choices)}")
    return str(value)


def parse(doc: object, source: str = "cluster spec") -> ClusterSpec:
    problems: list[Problem] = []
    if not isinstance(doc, dict):
        raise BadInput.one(source, str(doc)[:80], "must be a YAML mapping")
    _unknown(doc, _TOP_KEYS, "", problems)

    raw_name = doc.get("clusterName", "slurmpod")
    cluster_name = None
    if not isinstance(raw_name, str):
        problems.append(Problem("clusterName", str(raw_name), "must be a string"))
    else:
        cluster_name = _try(problems, confvalues.name, "clusterName", raw_name)
    auth = _try(problems, _choice, "auth", doc.get("auth", "munge"), AUTH_TYPES)
    select = _try(problems, _choice, "select", doc.get("select", "cons_tres"), SELECT_TYPES)
    topo = _try(problems, _choice, "topologyPlugin", doc.get("topologyPlugin", "none"), TOPOLOGY_PLUGINS)
    max_nodes = _try(problems, confvalues.integer, "maxNodes", doc.get("maxNodes", 1024), 1, 65_000)
    node_timeout = _try(
        problems, confvalues.integer, "nodeTimeoutSeconds", doc.get("nodeTimeoutSeconds", 300), 10, 86_400
    )

    cgroups = doc.get("cgroups", False)
    if not isinstance(cgroups, bool):
        problems.append(Problem("cgroups", str(cgroups), "must be true or false"))

    nodesets: list[NodeSetSpec] = []
    default_sets = [{"name": "workers", "feature": "workers"}]
    for path, ns in _mappings(doc, "nodesets", default_sets, problems, non_empty=False):
        _unknown(ns, {"name", "feature"}, path, problems)
        name = _try(problems, confvalues.name, path + "name", str(ns.get("name", "")))
        feat = _try(
            problems, confvalues.feature, path + "feature", str(ns.get("feature", ns.get("name", "")))
        )
        if name and feat:
            nodesets.append(NodeSetSpec(name, feat))
    set_names = {n.name for n in nodesets}
    _duplicates("nodesets", [n.name for n in nodesets], problems)

    partitions: list[PartitionSpec] = []
    default_parts = [{"name": "main", "nodesets": ["workers"], "default": True}]
    for path, part in _mappings(doc, "partitions", default_parts, problems, non_empty=True):
        _unknown(part, _PART_KEYS, path, problems)
        pname = _try(problems, confvalues.name, path + "name", str(part.get("name", "")))
        members = part.get("nodesets", [])
        if not isinstance(members, list) or not members:
            problems.append(Problem(path + "nodesets", str(members), "must be a non-empty list"))
            members = []
        for m in members:
            if m not in set_names:
                problems.append(Problem(path + "nodesets", str(m), "no such nodeset"))
        default = part.get("default", False)
        if not isinstance(default, bool):
            problems.append(Problem(path + "default", str(default), "must be true or false"))
        tier = _try(
            problems, confvalues.integer, path + "priorityTier", part.get("priorityTier", 1), 0, 65_533
        )
        mode = _try(
            problems,
            _choice,
            path + "preemptMode",
            _preempt_text(part.get("preemptMode", "OFF")),
            PREEMPT_MODES,
        )
        grace = _try(problems, confvalues.integer, path + "graceTime", part.get("graceTime", 0), 0, 86_400)
        max_time = _try(problems, _max_time, path + "maxTime", part.get("maxTime", "INFINITE"))
        if pname is not None and None not in (tier, mode, grace, max_time):
            partitions.append(
                PartitionSpec(
                    pname, tuple(str(m) for m in members), bool(default), tier, mode, grace, max_time
                )
            )
    _duplicates("partitions", [p.name for p in partitions], problems)
    if sum(p.default for p in partitions) > 1:
        problems.append(
            Problem(
                "partitions",
                ",".join(p.name for p in partitions if p.default),
                "more than one default partition",
            )
        )

    extra = doc.get("extraLines", [])
    if not isinstance(extra, list):
        problems.append(Problem("extraLines", str(extra), "must be a list of strings"))
        extra = []
    for i, line in enumerate(extra):
        if not isinstance(line, str) or "\n" in line or "\r" in line:
            problems.append(Problem(f"extraLines[{i}]", str(line), "must be one line of text"))

    hooks = _hooks(doc.get("hooks"), problems)

    if problems or cluster_name is None:
        raise BadInput(problems)
    return ClusterSpec(
        cluster_name,
        auth,
        select,
        topo,
        max_nodes,
        node_timeout,
        bool(cgroups),
        tuple(partitions),
        tuple(nodesets),
        tuple(extra),
        hooks,
    )


def load(path: Path) -> ClusterSpec:
    import yaml  # noqa: PLC0415 - only the controller reads a spec; workers skip the import

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput.one("cluster spec", str(path), f"cannot read: {exc.strerror}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = " ".join(str(exc).split())  # one line: the message goes to the termination log
        raise BadInput.one("cluster spec", str(path), f"not valid YAML: {where}") from None
    return parse(doc if doc is not None else {}, str(path))
