"""The cluster spec: the controller's input (YAML from a ConfigMap), validated when loaded.

Every problem is reported at once, each naming its path in the document (``partitions[0].name``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurmpod import confvalues
from slurmpod import well_known as wk
from slurmpod.errors import BadInput
from slurmpod.problems import Problems
from slurmpod.topology import blocksizes
from slurmpod.topology.model import Provider, Unplaced

# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_PreemptMode
PREEMPT_MODES = ("OFF", "CANCEL", "REQUEUE", "SUSPEND", "GANG")
AUTH_TYPES = wk.AUTH_TYPES
TOPOLOGY_PLUGINS = ("none", "tree", "block")
SELECT_TYPES = ("cons_tres", "linear")
# Which job_submit plugin slurmctld runs: slurmpod's Python policy (job_submit_slurmpod.so, reading the
# mounted `policy` ConfigMap), Slurm's job_submit/lua (job_submit.lua beside slurm.conf), or none.
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_JobSubmitPlugins
POLICY_NONE, POLICY_SLURMPOD, POLICY_LUA = "none", "slurmpod", "lua"
POLICIES = (POLICY_NONE, POLICY_SLURMPOD, POLICY_LUA)
# MPI plugins a cluster may make the default (srun --mpi= still picks per step). Left out of the spec, the
# default is pmix where the controller's Slurm has mpi_pmix.so, else none. Ref: https://slurm.schedmd.com/mpi_guide.html
MPI_TYPES = ("pmix", "pmi2", "none")


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
    """Programs Slurm runs on the nodes around jobs. Ref: https://slurm.schedmd.com/prolog_epilog.html

    The field defaults are "no hooks"; a cluster spec gets slurmpod's own hooks (``DEFAULT_HOOKS``) for
    every key it leaves out, and none for a key it sets to null.
    """

    prolog: str | None = None
    epilog: str | None = None
    prolog_flags: tuple[str, ...] = ()
    health_check_program: str | None = None
    health_check_interval: int = 0  # seconds; 0 disables the periodic run
    health_check_node_state: tuple[str, ...] = ()
    prolog_epilog_timeout: int = 0  # seconds; 0 leaves Slurm's default (no limit)
    task_prolog: str | None = None  # as the job's user before each task; its stdout's `export` lines


# slurmpod's checks: what a cluster spec runs unless it says otherwise.
DEFAULT_HOOKS = HooksSpec(
    prolog=wk.PROLOG_BIN,
    epilog=wk.EPILOG_BIN,
    prolog_flags=wk.DEFAULT_PROLOG_FLAGS,
    health_check_program=wk.HEALTHCHECK_BIN,
    health_check_interval=wk.DEFAULT_HEALTH_CHECK_INTERVAL_S,
    health_check_node_state=wk.DEFAULT_HEALTH_CHECK_NODE_STATE,
    prolog_epilog_timeout=wk.DEFAULT_PROLOG_EPILOG_TIMEOUT_S,
    task_prolog=wk.TASK_PROLOG_BIN,
)


@dataclass(frozen=True, slots=True)
class QosSpec:
    """One QoS the controller creates in slurmdbd at start (`sacctmgr -i`), idempotently.

    Ref: https://slurm.schedmd.com/qos.html, https://slurm.schedmd.com/preempt.html (preempt/qos)
    """

    name: str
    priority: int = 0
    preempt: tuple[str, ...] = ()  # QoS names whose running jobs this QoS's jobs may preempt
    preempt_mode: str | None = None  # None: the cluster's PreemptMode (REQUEUE when there is preemption)


@dataclass(frozen=True, slots=True)
class AccountingSpec:
    """slurmdbd accounting (cluster.yaml `accounting`); the chart sets `enabled` from values."""

    enabled: bool = False
    qos: tuple[QosSpec, ...] = ()

    @property
    def preempt_qos(self) -> bool:
        """preempt/qos applies when accounting is on and some QoS may preempt another."""
        return self.enabled and any(q.preempt for q in self.qos)


@dataclass(frozen=True, slots=True)
class RestApiSpec:
    """slurmrestd (cluster.yaml `restapi`): on, slurmctld and slurmdbd accept auth/jwt tokens."""

    enabled: bool = False


class TopologySource(enum.Enum):
    """Where the controller learns the worker pods' placements (cluster.yaml `topology.source`)."""

    # From slurmctld: each worker registers its pod's placement (annotation, label or Slinky env) as
    # `slurmd --extra`; works wherever slurmctld runs, needs no API access (the emulator has no API).
    SLURM = "slurm"
    # From the Kubernetes API: node labels by `provider`, worker pods by their spec.nodeName; needs the
    # read-only ClusterRole of the chart's topology-reader RBAC.
    API = "api"


@dataclass(frozen=True, slots=True)
class TopologySpec:
    """How the controller renders and keeps the topology (used when topologyPlugin is not none)."""

    source: TopologySource = TopologySource.SLURM
    provider: Provider | None = None  # API source: None = auto (topology.providers.AUTO_ORDER)
    unplaced: Unplaced = Unplaced.OWN_BLOCK
    block_sizes: tuple[int, ...] = ()  # empty: topology.blocksizes.default
    slinky_topology: str | None = None  # which pair of a Slinky annotation (API source); None: the first
    sync_interval_seconds: int = 10  # how often topology-sync compares; a change costs a reconfigure


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
    hooks: HooksSpec = DEFAULT_HOOKS
    topology: TopologySpec = TopologySpec()
    policy: str = POLICY_NONE
    """One of POLICIES; absent from the document: none (deploy/'s spec turns slurmpod on)."""
    mpi_default: str | None = None
    """One of MPI_TYPES; None: pmix where the controller's Slurm has it, else none (render.slurm_conf)."""
    srun_port_range: str = wk.DEFAULT_SRUN_PORT_RANGE
    """SrunPortRange: where srun listens for slurmstepd (login pods must accept it from workers)."""
    accounting: AccountingSpec = AccountingSpec()
    restapi: RestApiSpec = RestApiSpec()


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
    "topology",
    "policy",
    "mpiDefault",
    "srunPortRange",
    "accounting",
    "restapi",
}
_TOPOLOGY_KEYS = {"source", "provider", "unplaced", "blockSizes", "slinkyTopology", "syncIntervalSeconds"}
PROVIDERS = ("auto", *(p.value for p in Provider))
_PART_KEYS = {"name", "nodesets", "default", "priorityTier", "preemptMode", "graceTime", "maxTime"}


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
              "healthCheckNodeState", "prologEpilogTimeout", "taskProlog"}


def _hooks(doc: object, p: Problems) -> HooksSpec:
    """Each key left out takes slurmpod's default (``DEFAULT_HOOKS``); a key set to null turns it off."""
    if doc is None:
        return DEFAULT_HOOKS
    if not isinstance(doc, dict):
        p.add("hooks", str(doc), "must be a mapping")
        return DEFAULT_HOOKS
    p.unknown_keys("hooks", doc, _HOOK_KEYS)
    d = DEFAULT_HOOKS
    paths: dict[str, str | None] = {}
    for key, default in (("prolog", d.prolog), ("epilog", d.epilog), ("healthCheckProgram", d.health_check_program),
                         ("taskProlog", d.task_prolog)):
        value = doc.get(key, default)
        paths[key] = None if value is None else p.field(f"hooks.{key}", str(value), confvalues.path)
    lists: dict[str, tuple[str, ...]] = {}
    for key, allowed, default_list in (("prologFlags", PROLOG_FLAGS, d.prolog_flags),
                                       ("healthCheckNodeState", HEALTH_CHECK_STATES, d.health_check_node_state)):
        raw = doc.get(key, list(default_list))
        if raw is None:
            raw = []
        if not isinstance(raw, list):
            p.add(f"hooks.{key}", str(raw), "must be a list")
            raw = []
        for i, item in enumerate(raw):
            p.field(f"hooks.{key}[{i}]", item, _one_of(allowed))
        lists[key] = tuple(str(item) for item in raw if item in allowed)
    flags = lists["prologFlags"]
    if "NoHold" in flags and ("Contain" in flags or "X11" in flags):
        # slurmctld exits: "PrologFlags invalid combination: NoHold cannot be combined with Contain and/or X11"
        # Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_NoHold
        p.add("hooks.prologFlags", ",".join(flags), "NoHold cannot be combined with Contain or X11")
    # A spec that turns the program off has no periodic run unless it also names an interval.
    default_interval = d.health_check_interval if paths["healthCheckProgram"] else 0
    interval = p.field("hooks.healthCheckInterval", doc.get("healthCheckInterval", default_interval) or 0,
                       _int(0, 86_400))
    if interval and not paths["healthCheckProgram"]:
        p.add("hooks.healthCheckInterval", str(interval), "needs hooks.healthCheckProgram")
    timeout = p.field("hooks.prologEpilogTimeout", doc.get("prologEpilogTimeout", d.prolog_epilog_timeout) or 0,
                      _int(0, 65_533))
    return HooksSpec(paths["prolog"], paths["epilog"], lists["prologFlags"], paths["healthCheckProgram"],
                     interval or 0, lists["healthCheckNodeState"], timeout or 0, paths["taskProlog"])


def _topology(doc: object, p: Problems) -> TopologySpec:
    if doc is None:
        return TopologySpec()
    if not isinstance(doc, dict):
        p.add("topology", str(doc), "must be a mapping")
        return TopologySpec()
    p.unknown_keys("topology", doc, _TOPOLOGY_KEYS)
    source = p.field("topology.source", doc.get("source", "slurm"),
                     _one_of(tuple(s.value for s in TopologySource)))
    provider = p.field("topology.provider", doc.get("provider", "auto"), _one_of(PROVIDERS))
    unplaced = p.field("topology.unplaced", doc.get("unplaced", Unplaced.OWN_BLOCK.value),
                       _one_of(tuple(u.value for u in Unplaced)))
    raw_sizes = doc.get("blockSizes", [])
    if not isinstance(raw_sizes, list):
        p.add("topology.blockSizes", str(raw_sizes), "must be a list of node counts")
        raw_sizes = []
    sizes = [p.field(f"topology.blockSizes[{i}]", size, _int(1, 65_000)) for i, size in enumerate(raw_sizes)]
    if sizes and all(size is not None for size in sizes):
        # Slurm's rules that need no node counts (base, then base * 2^k increasing); each block's
        # size against the base is checked when the topology is rendered.
        p.field("topology.blockSizes", [s for s in sizes if s is not None],
                lambda field, value: blocksizes.validate(value, (), field))
    slinky = doc.get("slinkyTopology")
    slinky_name = None if slinky is None else p.field("topology.slinkyTopology", str(slinky), confvalues.name)
    interval = p.field("topology.syncIntervalSeconds", doc.get("syncIntervalSeconds", 10), _int(1, 3600))
    return TopologySpec(
        TopologySource(source) if source else TopologySource.SLURM,
        None if provider in (None, "auto") else Provider(provider),
        Unplaced(unplaced) if unplaced else Unplaced.OWN_BLOCK,
        tuple(s for s in sizes if s is not None),
        slinky_name,
        interval or 10,
    )


_ACCOUNTING_KEYS = {"enabled", "qos"}
_QOS_KEYS = {"name", "priority", "preempt", "preemptMode"}
# QoS PreemptMode values sacctmgr takes (GANG is cluster-wide only). Ref: https://slurm.schedmd.com/sacctmgr.html#OPT_PreemptMode
QOS_PREEMPT_MODES = ("OFF", "CANCEL", "REQUEUE", "SUSPEND")
# Every Slurm database has this QoS from its start. Ref: https://slurm.schedmd.com/qos.html
DEFAULT_QOS = "normal"


def _flag(doc: dict[str, Any], key: str, field: str, p: Problems) -> bool:
    value = doc.get(key, False)
    if not isinstance(value, bool):
        p.add(field, str(value), "must be true or false")
        return False
    return value


def _mapping(doc: object, field: str, p: Problems) -> dict[str, Any] | None:
    if doc is None:
        return None
    if not isinstance(doc, dict):
        p.add(field, str(doc), "must be a mapping")
        return None
    return doc


def _accounting(raw: object, p: Problems) -> AccountingSpec:
    doc = _mapping(raw, "accounting", p)
    if doc is None:
        return AccountingSpec()
    p.unknown_keys("accounting", doc, _ACCOUNTING_KEYS)
    enabled = _flag(doc, "enabled", "accounting.enabled", p)
    qos: list[QosSpec] = []
    raw_preempts: list[tuple[str, list[Any]]] = []
    for path, q in p.mappings("accounting.qos", doc.get("qos", [])):
        p.unknown_keys(path, q, _QOS_KEYS)
        name = p.field(f"{path}.name", str(q.get("name", "")), confvalues.name)
        priority = p.field(f"{path}.priority", q.get("priority", 0), _int(0, 1_000_000))
        preempt = q.get("preempt", [])
        if not isinstance(preempt, list):
            p.add(f"{path}.preempt", str(preempt), "must be a list of QoS names")
            preempt = []
        raw_mode = q.get("preemptMode")
        mode = None if raw_mode is None else p.field(f"{path}.preemptMode", _preempt_text(raw_mode),
                                                      _one_of(QOS_PREEMPT_MODES))
        if name is not None and priority is not None:
            qos.append(QosSpec(name, priority, tuple(str(x) for x in preempt), mode))
            raw_preempts.append((path, preempt))
    p.unique("accounting.qos", [q.name for q in qos])
    known = {q.name for q in qos} | {DEFAULT_QOS}
    for (where_q, preempt), spec_q in zip(raw_preempts, qos, strict=True):
        for i, other in enumerate(preempt):
            where = f"{where_q}.preempt[{i}]"
            if p.check(isinstance(other, str) and other in known, where, str(other), "no such QoS"):
                p.check(other != spec_q.name, where, str(other), "a QoS cannot preempt itself")
    if qos and not enabled:
        p.add("accounting.qos", ",".join(q.name for q in qos), "needs accounting.enabled: true")
    return AccountingSpec(enabled, tuple(qos))


def _restapi(raw: object, p: Problems) -> RestApiSpec:
    doc = _mapping(raw, "restapi", p)
    if doc is None:
        return RestApiSpec()
    p.unknown_keys("restapi", doc, {"enabled"})
    return RestApiSpec(_flag(doc, "enabled", "restapi.enabled", p))


def _choice(field: str, value: object, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise BadInput.one(field, str(value), f"must be one of {', '.join(choices)}")
    return str(value)


def _one_of(choices: tuple[str, ...]) -> Callable[[str, Any], str]:
    return lambda field, value: _choice(field, value, choices)


def _int(low: int, high: int) -> Callable[[str, Any], int]:
    return lambda field, value: confvalues.integer(field, value, low, high)


def port_range(field: str, value: object) -> str:
    """``LOW-HIGH`` of unprivileged ports. Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_SrunPortRange"""
    text = str(value)
    m = re.fullmatch(r"([0-9]{4,5})-([0-9]{4,5})", text)
    if not m or not 1024 < int(m[1]) < int(m[2]) <= 65535:
        raise BadInput.one(field, text, "must be LOW-HIGH with 1024 < LOW < HIGH <= 65535")
    return text


def parse(doc: object, source: str = "cluster spec") -> ClusterSpec:
    if not isinstance(doc, dict):
        raise BadInput.one(source, str(doc)[:80], "must be a YAML mapping")
    p = Problems()
    p.unknown_keys("", doc, _TOP_KEYS)

    raw_name = doc.get("clusterName", "slurmpod")
    cluster_name = None
    if not isinstance(raw_name, str):
        p.add("clusterName", str(raw_name), "must be a string")
    else:
        cluster_name = p.field("clusterName", raw_name, confvalues.name)
    auth = p.field("auth", doc.get("auth", "munge"), _one_of(AUTH_TYPES))
    select = p.field("select", doc.get("select", "cons_tres"), _one_of(SELECT_TYPES))
    topo = p.field("topologyPlugin", doc.get("topologyPlugin", "none"), _one_of(TOPOLOGY_PLUGINS))
    max_nodes = p.field("maxNodes", doc.get("maxNodes", 1024), _int(1, 65_000))
    policy = p.field("policy", doc.get("policy", POLICY_NONE), _one_of(POLICIES))
    node_timeout = p.field("nodeTimeoutSeconds", doc.get("nodeTimeoutSeconds", 300), _int(10, 86_400))
    raw_mpi = doc.get("mpiDefault")
    mpi_default = None if raw_mpi is None else p.field("mpiDefault", raw_mpi, _one_of(MPI_TYPES))
    srun_ports = p.field("srunPortRange", doc.get("srunPortRange", wk.DEFAULT_SRUN_PORT_RANGE), port_range)

    cgroups = doc.get("cgroups", False)
    if not isinstance(cgroups, bool):
        p.add("cgroups", str(cgroups), "must be true or false")

    nodesets: list[NodeSetSpec] = []
    default_sets = [{"name": "workers", "feature": "workers"}]
    for path, ns in p.mappings("nodesets", doc.get("nodesets", default_sets)):
        p.unknown_keys(path, ns, {"name", "feature"})
        name = p.field(f"{path}.name", str(ns.get("name", "")), confvalues.name)
        feat = p.field(f"{path}.feature", str(ns.get("feature", ns.get("name", ""))), confvalues.feature)
        if name and feat:
            nodesets.append(NodeSetSpec(name, feat))
    set_names = {n.name for n in nodesets}
    p.unique("nodesets", [n.name for n in nodesets])

    partitions: list[PartitionSpec] = []
    default_parts = [{"name": "main", "nodesets": ["workers"], "default": True}]
    for path, part in p.mappings("partitions", doc.get("partitions", default_parts), non_empty=True):
        p.unknown_keys(path, part, _PART_KEYS)
        pname = p.field(f"{path}.name", str(part.get("name", "")), confvalues.name)
        members = part.get("nodesets", [])
        if not isinstance(members, list) or not members:
            p.add(f"{path}.nodesets", str(members), "must be a non-empty list")
            members = []
        for m in members:
            p.check(m in set_names, f"{path}.nodesets", str(m), "no such nodeset")
        default = part.get("default", False)
        p.check(isinstance(default, bool), f"{path}.default", str(default), "must be true or false")
        tier = p.field(f"{path}.priorityTier", part.get("priorityTier", 1), _int(0, 65_533))
        mode = p.field(f"{path}.preemptMode", _preempt_text(part.get("preemptMode", "OFF")), _one_of(PREEMPT_MODES))
        grace = p.field(f"{path}.graceTime", part.get("graceTime", 0), _int(0, 86_400))
        max_time = p.field(f"{path}.maxTime", part.get("maxTime", "INFINITE"), _max_time)
        if pname is not None and tier is not None and mode is not None and grace is not None \
                and max_time is not None:
            partitions.append(
                PartitionSpec(pname, tuple(str(m) for m in members), bool(default), tier, mode, grace, max_time)
            )
    p.unique("partitions", [part.name for part in partitions])
    defaults = [part.name for part in partitions if part.default]
    p.check(len(defaults) <= 1, "partitions", ",".join(defaults), "more than one default partition")

    extra = doc.get("extraLines", [])
    if not isinstance(extra, list):
        p.add("extraLines", str(extra), "must be a list of strings")
        extra = []
    for i, line in enumerate(extra):
        one_line = isinstance(line, str) and "\n" not in line and "\r" not in line
        p.check(one_line, f"extraLines[{i}]", str(line), "must be one line of text")

    hooks = _hooks(doc.get("hooks"), p)
    topology = _topology(doc.get("topology"), p)
    accounting = _accounting(doc.get("accounting"), p)
    restapi = _restapi(doc.get("restapi"), p)

    p.raise_if_any()
    if (cluster_name is None or auth is None or select is None or topo is None or max_nodes is None
            or node_timeout is None or policy is None or srun_ports is None):
        raise AssertionError("a field failed validation without a problem recorded")
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
        topology,
        policy,
        mpi_default,
        srun_ports,
        accounting,
        restapi,
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
