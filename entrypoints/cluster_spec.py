"""The cluster spec: the controller's input (YAML from a ConfigMap), validated when loaded.

Every problem is reported at once, each naming its path in the document (``partitions[0].name``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from slurmpod import confvalues, quantity
from slurmpod import well_known as wk
from slurmpod.demand import NodeSetShape
from slurmpod.errors import BadInput
from slurmpod.problems import Problems, Section, build, join
from slurmpod.topology import blocksizes
from slurmpod.topology.model import Provider, Unplaced


class Select(enum.StrEnum):
    """SelectType=select/<value>. Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_SelectType"""

    CONS_TRES = "cons_tres"
    LINEAR = "linear"


class TopologyPlugin(enum.StrEnum):
    """TopologyPlugin=topology/<value>. Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_TopologyPlugin"""

    NONE = "none"
    TREE = "tree"
    BLOCK = "block"


class Policy(enum.StrEnum):
    """Which job_submit plugin slurmctld runs: slurmpod's Python policy (job_submit_slurmpod.so, reading the
    mounted `policy` ConfigMap), Slurm's job_submit/lua (job_submit.lua beside slurm.conf), or none.
    Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_JobSubmitPlugins
    """

    NONE = "none"
    SLURMPOD = "slurmpod"
    LUA = "lua"


class MpiType(enum.StrEnum):
    """MPI plugins a cluster may make the default (srun --mpi= still picks per step). Left out of the spec,
    the default is pmix where the controller's Slurm has mpi_pmix.so, else none.
    Ref: https://slurm.schedmd.com/mpi_guide.html
    """

    PMIX = "pmix"
    PMI2 = "pmi2"
    NONE = "none"


class PreemptMode(enum.StrEnum):
    """A partition's PreemptMode. Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_PreemptMode"""

    OFF = "OFF"
    CANCEL = "CANCEL"
    REQUEUE = "REQUEUE"
    SUSPEND = "SUSPEND"
    GANG = "GANG"


class QosPreemptMode(enum.StrEnum):
    """A QoS's PreemptMode (GANG is cluster-wide only). Ref: https://slurm.schedmd.com/sacctmgr.html#OPT_PreemptMode"""

    OFF = "OFF"
    CANCEL = "CANCEL"
    REQUEUE = "REQUEUE"
    SUSPEND = "SUSPEND"


class PrologFlag(enum.StrEnum):
    """Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_PrologFlags"""

    ALLOC = "Alloc"
    CONTAIN = "Contain"
    DEFER_BATCH = "DeferBatch"
    NO_HOLD = "NoHold"
    FORCE_REQUEUE_ON_FAIL = "ForceRequeueOnFail"
    RUN_IN_JOB = "RunInJob"
    SERIAL = "Serial"
    X11 = "X11"


class HealthCheckState(enum.StrEnum):
    """Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_HealthCheckNodeState"""

    ALLOC = "ALLOC"
    ANY = "ANY"
    CYCLE = "CYCLE"
    IDLE = "IDLE"
    MIXED = "MIXED"
    NONDRAINED_IDLE = "NONDRAINED_IDLE"
    START_ONLY = "START_ONLY"


class AutoscalingMode(enum.StrEnum):
    """Who sets a nodeset's replicas when autoscaling is on: slurmpod's autoscaler (`slurmpod daemon
    autoscale`, drains before it removes) or KEDA (a ScaledObject over the StatefulSet, from slurmpod's
    metrics; it removes the highest ordinal whether busy or not). docs/autoscaling.md."""

    SLURMPOD = "slurmpod"
    KEDA = "keda"


@dataclass(frozen=True, slots=True)
class AutoscalingSpec:
    """A nodeset's autoscaling (cluster.yaml `nodesets[].autoscaling`)."""

    enabled: bool = False
    mode: AutoscalingMode = AutoscalingMode.SLURMPOD
    min_replicas: int = 0  # never fewer; 0: the nodeset may scale to zero when nothing is pending
    max_replicas: int = 4  # never more, whatever is pending
    idle_seconds: int = 300  # a node idle (no job) this long, with nothing pending, may be removed
    step: int = 1  # at most this many pods added, or nodes drained for removal, per pass

    @property
    def by_slurmpod(self) -> bool:
        """slurmpod's autoscaler sets this nodeset's replicas."""
        return self.enabled and self.mode is AutoscalingMode.SLURMPOD


@dataclass(frozen=True, slots=True)
class NodeShape:
    """What one pod of a nodeset offers jobs, from its container's limits (cluster.yaml `nodesets[].shape`,
    which the chart renders from `nodesets.<name>.slurmd.resources.limits`): the shape of the FUTURE
    placeholders an autoscaled nodeset keeps for pods it does not run, and what the demand judges a job's
    per-node CPUs and GPUs against. 0: unknown (no placeholder; the demand does not filter on it)."""

    cpus: int = 0  # whole CPUs of the cpu limit (a pod start gives jobs what its limit allows)
    real_memory_mib: int = 0  # the memory limit in MiB
    gpus: int = 0  # the nvidia.com/gpu limit

    @property
    def known(self) -> bool:
        return self.cpus > 0 and self.real_memory_mib > 0


def pod_node_name(stateful_set: str, ordinal: int) -> str:
    """The Slurm node of a nodeset's pod: the pod's name, `<stateful_set>-<ordinal>`.
    Ref: https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/#ordinal-index"""
    return f"{stateful_set}-{ordinal}"


@dataclass(frozen=True, slots=True)
class NodeSetSpec:
    name: str
    feature: str
    stateful_set: str = ""  # the StatefulSet whose pods are its nodes, `<stateful_set>-<ordinal>`; "" unknown
    autoscaling: AutoscalingSpec = AutoscalingSpec()
    shape: NodeShape = NodeShape()


@dataclass(frozen=True, slots=True)
class PartitionSpec:
    name: str
    nodesets: tuple[str, ...]
    default: bool
    priority_tier: int
    preempt_mode: PreemptMode
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
    prolog_flags: tuple[PrologFlag, ...] = ()
    health_check_program: str | None = None
    health_check_interval: int = 0  # seconds; 0 disables the periodic run
    health_check_node_state: tuple[HealthCheckState, ...] = ()
    prolog_epilog_timeout: int = 0  # seconds; 0 leaves Slurm's default (no limit)
    task_prolog: str | None = None  # a site's TaskProlog (slurmpod's task environment is a SPANK plugin)


# slurmpod's checks: what a cluster spec runs unless it says otherwise.
DEFAULT_HOOKS = HooksSpec(
    prolog=wk.PROLOG_BIN,
    epilog=wk.EPILOG_BIN,
    prolog_flags=tuple(PrologFlag(f) for f in wk.DEFAULT_PROLOG_FLAGS),
    health_check_program=wk.HEALTHCHECK_BIN,
    health_check_interval=wk.DEFAULT_HEALTH_CHECK_INTERVAL_S,
    health_check_node_state=tuple(HealthCheckState(s) for s in wk.DEFAULT_HEALTH_CHECK_NODE_STATE),
    prolog_epilog_timeout=wk.DEFAULT_PROLOG_EPILOG_TIMEOUT_S,
)


@dataclass(frozen=True, slots=True)
class RequeueSpec:
    """How soon a batch job Slurm requeued (its node failed, its prolog failed, preStop requeued it) may
    start again. ``fast``: the shortest hold this Slurm allows (render.requeue_hold) instead of Slurm's
    default, the credential lifetime (120 s). See docs/requeue.md.
    Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_cred_expire
    """

    fast: bool = True


@dataclass(frozen=True, slots=True)
class QosSpec:
    """One QoS the controller creates in slurmdbd at start (`sacctmgr -i`), idempotently.

    Ref: https://slurm.schedmd.com/qos.html, https://slurm.schedmd.com/preempt.html (preempt/qos)
    """

    name: str
    priority: int = 0
    preempt: tuple[str, ...] = ()  # QoS names whose running jobs this QoS's jobs may preempt
    preempt_mode: QosPreemptMode | None = None  # None: the cluster's PreemptMode (REQUEUE when there is preemption)


@dataclass(frozen=True, slots=True)
class AccountSpec:
    """One account and its users' associations, made in slurmdbd at start (`sacctmgr -i`), idempotently.

    With AccountingStorageEnforce=associations a user may run jobs only under an account they have an
    association with. Ref: https://slurm.schedmd.com/accounting.html,
    https://slurm.schedmd.com/slurm.conf.html#OPT_AccountingStorageEnforce
    """

    name: str
    users: tuple[str, ...] = ()
    parent: str = "root"  # Slurm's own top account, which every cluster has
    qos: tuple[str, ...] = ()  # empty: the users' associations inherit the parent's QoS (root's: normal)
    default_qos: str | None = None


@dataclass(frozen=True, slots=True)
class AccountingSpec:
    """slurmdbd accounting (cluster.yaml `accounting`); the chart sets `enabled` from values."""

    enabled: bool = False
    qos: tuple[QosSpec, ...] = ()
    accounts: tuple[AccountSpec, ...] = ()

    @property
    def enforce(self) -> tuple[str, ...]:
        """AccountingStorageEnforce: with accounting on, a job needs an association, its QoS must be one
        the association allows, and association and QoS limits hold.
        Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_AccountingStorageEnforce"""
        return ("associations", "limits", "qos") if self.enabled else ()

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
class K8sSyncSpec:
    """k8s-sync on the controller (cluster.yaml `k8sSync`): Kubernetes node state -> Slurm drains, Slurm
    node state -> worker pod label and condition, and the remediations the health checks ask for."""

    enabled: bool = False  # needs the API (the chart's k8s-sync RBAC); the emulator has none
    interval_seconds: int = 5  # a full pass at least this often; a Node change starts one at once
    not_ready_grace_seconds: int = 60  # NotReady (or Unknown) this long before the drain
    ready_settle_seconds: int = 10  # Ready again this long before that drain is lifted
    restart_pod: bool = False  # delete the pod of a drained idle node whose health reason says "restart pod"
    replace_node: bool = False  # taint and condition the node of one whose reason says "replace node"
    max_remediations: int = 3  # across the cluster, per remediation_window_seconds
    remediation_window_seconds: int = 3600


@dataclass(frozen=True, slots=True)
class MetricsSpec:
    """The controller's Prometheus exporter (cluster.yaml `metrics`, docs/metrics.md): on, it polls
    slurmctld every ``poll_seconds`` and serves the last poll on wk.EXPORTER_PORT."""

    enabled: bool = True
    poll_seconds: int = wk.DEFAULT_EXPORTER_POLL_S


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    cluster_name: str
    auth: wk.Auth
    select: Select
    topology_plugin: TopologyPlugin
    max_nodes: int
    node_timeout_seconds: int  # dynamic nodes not responding this long are deleted
    cgroups: bool  # proctrack/cgroup + task/cgroup (needs a delegated cgroup tree in the worker)
    partitions: tuple[PartitionSpec, ...]
    nodesets: tuple[NodeSetSpec, ...]
    extra_lines: tuple[str, ...]
    hooks: HooksSpec = DEFAULT_HOOKS
    topology: TopologySpec = TopologySpec()
    policy: Policy = Policy.NONE
    """Absent from the document: none (deploy/'s spec turns slurmpod on)."""
    mpi_default: MpiType | None = None
    """None: pmix where the controller's Slurm has it, else none (render.slurm_conf)."""
    srun_port_range: str = wk.DEFAULT_SRUN_PORT_RANGE
    """SrunPortRange: where srun listens for slurmstepd (login pods must accept it from workers)."""
    accounting: AccountingSpec = AccountingSpec()
    restapi: RestApiSpec = RestApiSpec()
    k8s_sync: K8sSyncSpec = K8sSyncSpec()
    requeue: RequeueSpec = RequeueSpec()
    metrics: MetricsSpec = MetricsSpec()


_TOP_KEYS = {"clusterName", "auth", "select", "topologyPlugin", "maxNodes", "nodeTimeoutSeconds", "partitions",
             "nodesets", "extraLines", "hooks", "cgroups", "topology", "policy", "mpiDefault", "srunPortRange",
             "accounting", "restapi", "k8sSync", "requeue", "metrics"}
_K8S_SYNC_KEYS = {"enabled", "intervalSeconds", "notReadyGraceSeconds", "readySettleSeconds", "remediation"}
_REMEDIATION_KEYS = {"restartPod", "replaceNode", "maxActions", "perSeconds"}
_NODESET_KEYS = {"name", "feature", "statefulSet", "autoscaling", "shape"}
_SHAPE_KEYS = {"cpu", "memory", "gpus"}
_AUTOSCALING_KEYS = {"enabled", "mode", "minReplicas", "maxReplicas", "idleSeconds", "step"}
# Replica bounds: a nodeset is at most a cluster (maxNodes' own bound).
MAX_REPLICAS = 65_000
MAX_STEP = 1_000
MAX_IDLE_SECONDS = 7 * 86_400
_TOPOLOGY_KEYS = {"source", "provider", "unplaced", "blockSizes", "slinkyTopology", "syncIntervalSeconds"}
PROVIDERS = ("auto", *(p.value for p in Provider))
_PART_KEYS = {"name", "nodesets", "default", "priorityTier", "preemptMode", "graceTime", "maxTime"}
_HOOK_KEYS = {"prolog", "epilog", "prologFlags", "healthCheckProgram", "healthCheckInterval",
              "healthCheckNodeState", "prologEpilogTimeout", "taskProlog"}
_ACCOUNTING_KEYS = {"enabled", "qos", "accounts"}
_QOS_KEYS = {"name", "priority", "preempt", "preemptMode"}
_ACCOUNT_KEYS = {"name", "users", "parent", "qos", "defaultQos"}
# Every Slurm database has this QoS from its start. Ref: https://slurm.schedmd.com/qos.html
DEFAULT_QOS = "normal"
# Every cluster's account tree starts at this account. Ref: https://slurm.schedmd.com/accounting.html
ROOT_ACCOUNT = "root"


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


def _provider(field: str, value: object) -> Provider | None:
    """A provider profile, or None for `auto` (topology.providers.AUTO_ORDER)."""
    if value == "auto":
        return None
    for provider in Provider:
        if value == provider.value:
            return provider
    raise BadInput.one(field, str(value), f"must be one of {', '.join(PROVIDERS)}")


def _cluster_name(field: str, value: object) -> str:
    if not isinstance(value, str):
        raise BadInput.one(field, str(value), "must be a string")
    return confvalues.name(field, value)


def port_range(field: str, value: object) -> str:
    """``LOW-HIGH`` of unprivileged ports. Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_SrunPortRange"""
    text = str(value)
    m = re.fullmatch(r"([0-9]{4,5})-([0-9]{4,5})", text)
    if not m or not 1024 < int(m[1]) < int(m[2]) <= 65535:
        raise BadInput.one(field, text, "must be LOW-HIGH with 1024 < LOW < HIGH <= 65535")
    return text


def _optional_path(doc: Section, key: str, default: str | None) -> str | None:
    value = doc.raw(key, default)
    return None if value is None else doc.problems.field(doc.where(key), str(value), confvalues.path)


def _hooks(doc: Section) -> HooksSpec:
    """Each key left out takes slurmpod's default (``DEFAULT_HOOKS``); a key set to null turns it off."""
    d = DEFAULT_HOOKS
    prolog = _optional_path(doc, "prolog", d.prolog)
    epilog = _optional_path(doc, "epilog", d.epilog)
    program = _optional_path(doc, "healthCheckProgram", d.health_check_program)
    task_prolog = _optional_path(doc, "taskProlog", d.task_prolog)
    flags = doc.choices("prologFlags", PrologFlag, d.prolog_flags)
    states = doc.choices("healthCheckNodeState", HealthCheckState, d.health_check_node_state)
    if PrologFlag.NO_HOLD in flags and (PrologFlag.CONTAIN in flags or PrologFlag.X11 in flags):
        # slurmctld exits: "PrologFlags invalid combination: NoHold cannot be combined with Contain and/or X11"
        # Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_NoHold
        doc.problems.add(doc.where("prologFlags"), ",".join(flags), "NoHold cannot be combined with Contain or X11")
    # A spec that turns the program off has no periodic run unless it also names an interval.
    default_interval = d.health_check_interval if program else 0
    # Null (or 0) turns either off.
    interval = doc.problems.field(doc.where("healthCheckInterval"), doc.raw("healthCheckInterval", default_interval)
                                  or 0, _int(0, 86_400))
    if interval and not program:
        doc.problems.add(doc.where("healthCheckInterval"), str(interval), "needs hooks.healthCheckProgram")
    timeout = doc.problems.field(doc.where("prologEpilogTimeout"), doc.raw("prologEpilogTimeout",
                                 d.prolog_epilog_timeout) or 0, _int(0, 65_533))
    return HooksSpec(prolog=prolog, epilog=epilog, prolog_flags=flags, health_check_program=program,
                     health_check_interval=interval or 0, health_check_node_state=states,
                     prolog_epilog_timeout=timeout or 0, task_prolog=task_prolog)


def _topology(doc: Section) -> TopologySpec:
    d = TopologySpec()
    source = doc.choice("source", TopologySource, d.source)
    provider = doc.get("provider", "auto", _provider)
    unplaced = doc.choice("unplaced", Unplaced, d.unplaced)
    raw_sizes = doc.listed("blockSizes", [], "must be a list of node counts") or []
    sizes = [doc.problems.field(join(doc.where("blockSizes"), i), size, _int(1, 65_000))
             for i, size in enumerate(raw_sizes)]
    if sizes and all(size is not None for size in sizes):
        # Slurm's rules that need no node counts (base, then base * 2^k increasing); each block's
        # size against the base is checked when the topology is rendered.
        doc.problems.field(doc.where("blockSizes"), [s for s in sizes if s is not None],
                           lambda field, value: blocksizes.validate(value, (), field))
    slinky = doc.raw("slinkyTopology")
    slinky_name = None if slinky is None else doc.text("slinkyTopology", "", confvalues.name)
    interval = doc.integer("syncIntervalSeconds", d.sync_interval_seconds, 1, 3600)
    return TopologySpec(source=source or d.source, provider=provider, unplaced=unplaced or d.unplaced,
                        block_sizes=tuple(s for s in sizes if s is not None), slinky_topology=slinky_name,
                        sync_interval_seconds=interval or d.sync_interval_seconds)


def _k8s_sync(doc: Section) -> K8sSyncSpec:
    d = K8sSyncSpec()
    rem = doc.section("remediation", _REMEDIATION_KEYS)
    return K8sSyncSpec(
        enabled=bool(doc.flag("enabled")),
        interval_seconds=_int_or(doc, "intervalSeconds", d.interval_seconds, 1, 300),
        not_ready_grace_seconds=_int_or(doc, "notReadyGraceSeconds", d.not_ready_grace_seconds, 0, 86_400),
        ready_settle_seconds=_int_or(doc, "readySettleSeconds", d.ready_settle_seconds, 0, 86_400),
        restart_pod=bool(rem.flag("restartPod")),
        replace_node=bool(rem.flag("replaceNode")),
        max_remediations=_int_or(rem, "maxActions", d.max_remediations, 0, 10_000),
        remediation_window_seconds=_int_or(rem, "perSeconds", d.remediation_window_seconds, 1, 7 * 86_400),
    )


def _metrics(doc: Section) -> MetricsSpec:
    d = MetricsSpec()
    enabled = doc.flag("enabled", d.enabled)
    return MetricsSpec(enabled=d.enabled if enabled is None else enabled,
                       poll_seconds=_int_or(doc, "pollSeconds", d.poll_seconds, wk.MIN_EXPORTER_POLL_S, 3600))


def _int_or(doc: Section, key: str, default: int, low: int, high: int) -> int:
    """The integer, or ``default`` when it is absent or wrong (a wrong one is a recorded problem)."""
    value = doc.integer(key, default, low, high)
    return default if value is None else value


def _accounting(doc: Section) -> AccountingSpec:
    enabled = doc.flag("enabled")
    qos: list[QosSpec] = []
    raw_preempts: list[tuple[str, list[Any]]] = []
    for q in doc.sections("qos", [], _QOS_KEYS):
        name = q.text("name", "", confvalues.name)
        priority = q.integer("priority", 0, 0, 1_000_000)
        preempt = q.listed("preempt", [], "must be a list of QoS names") or []
        spec = build(QosSpec, optional={"preempt_mode"}, name=name, priority=priority,
                     preempt=tuple(str(x) for x in preempt),
                     preempt_mode=q.choice("preemptMode", QosPreemptMode, None, _preempt_text))
        if spec is not None:
            qos.append(spec)
            raw_preempts.append((q.path, preempt))
    p = doc.problems
    p.unique(doc.where("qos"), [q.name for q in qos])
    known = {q.name for q in qos} | {DEFAULT_QOS}
    for (where_q, preempt), spec_q in zip(raw_preempts, qos, strict=True):
        for i, other in enumerate(preempt):
            where = f"{where_q}.preempt[{i}]"
            if p.check(isinstance(other, str) and other in known, where, str(other), "no such QoS"):
                p.check(other != spec_q.name, where, str(other), "a QoS cannot preempt itself")
    if qos and not enabled:
        p.add(doc.where("qos"), ",".join(q.name for q in qos), "needs accounting.enabled: true")
    accounts = _accounts(doc, known)
    if accounts and not enabled:
        p.add(doc.where("accounts"), ",".join(a.name for a in accounts), "needs accounting.enabled: true")
    return AccountingSpec(enabled=bool(enabled), qos=tuple(qos), accounts=accounts)


def _db_names(doc: Section, key: str) -> tuple[str, ...] | None:
    """A list of account, user or QoS names (each a lower-case Slurm name), every one once."""
    raw = doc.listed(key, [], "must be a list of names")
    if raw is None:
        return None
    items = [doc.problems.field(join(doc.where(key), i), item, _db_name) for i, item in enumerate(raw)]
    doc.problems.unique(doc.where(key), [n for n in items if n is not None])
    return None if any(n is None for n in items) else tuple(n for n in items if n is not None)


def _db_name(field: str, value: object) -> str:
    if not isinstance(value, str):
        raise BadInput.one(field, str(value), "must be a string")
    return confvalues.db_name(field, value)


def _accounts(doc: Section, known_qos: set[str]) -> tuple[AccountSpec, ...]:
    """`accounting.accounts`: each account's parent is root or an account listed before it (so slurmdbd
    gets parents first, and there is no cycle); its QoS are the spec's or normal."""
    p = doc.problems
    accounts: list[AccountSpec] = []
    listed: list[str] = []
    known = {k.lower() for k in known_qos}  # slurmdbd keeps QoS names in lower case
    for a in doc.sections("accounts", [], _ACCOUNT_KEYS):
        name = a.get("name", "", _db_name)
        if name == ROOT_ACCOUNT:
            p.add(a.where("name"), name, "Slurm's own top account; name the accounts under it")
            name = None
        parent = a.get("parent", ROOT_ACCOUNT, _db_name)
        if parent is not None and parent != ROOT_ACCOUNT and parent not in listed:
            p.add(a.where("parent"), parent, "no such account listed before this one (or root)")
            parent = None
        users = _db_names(a, "users")
        qos = _db_names(a, "qos")
        for i, q in enumerate(qos or ()):
            p.check(q in known, join(a.where("qos"), i), q, "no such QoS in accounting.qos (or normal)")
        default_qos = None if a.raw("defaultQos") is None else a.get("defaultQos", "", _db_name)
        if default_qos is not None and qos is not None and default_qos not in qos:
            # A default QoS must be one the association may use. Ref: https://slurm.schedmd.com/sacctmgr.html
            p.add(a.where("defaultQos"), default_qos, "must be one of this account's qos")
        spec = build(AccountSpec, optional={"default_qos"}, name=name, users=users, parent=parent, qos=qos,
                     default_qos=default_qos)
        if spec is not None:
            accounts.append(spec)
        if name is not None:
            listed.append(name)
    p.unique(doc.where("accounts"), listed)
    return tuple(accounts)


def _int(low: int, high: int) -> Callable[[str, Any], int]:
    return lambda field, value: confvalues.integer(field, value, low, high)


def _autoscaling(doc: Section, stateful_set: str | None, sts_field: str) -> AutoscalingSpec | None:
    """Every problem named; None when any was found. ``stateful_set``: the nodeset's ("" none, None bad)."""
    d = AutoscalingSpec()
    p = doc.problems
    before = len(p)
    enabled = doc.flag("enabled")
    mode = doc.choice("mode", AutoscalingMode, d.mode)
    low = doc.integer("minReplicas", d.min_replicas, 0, MAX_REPLICAS)
    high = doc.integer("maxReplicas", d.max_replicas, 1, MAX_REPLICAS)
    idle = doc.integer("idleSeconds", d.idle_seconds, 0, MAX_IDLE_SECONDS)
    step = doc.integer("step", d.step, 1, MAX_STEP)
    if low is not None and high is not None:
        p.check(low <= high, doc.where("minReplicas"), low, f"must not exceed maxReplicas ({high})")
    if enabled and stateful_set == "":
        p.add(sts_field, "", "needed when autoscaling is enabled: the StatefulSet whose replicas it sets")
    if len(p) > before:
        return None
    return build(AutoscalingSpec, enabled=enabled, mode=mode, min_replicas=low, max_replicas=high,
                 idle_seconds=idle, step=step)


def _quantity(doc: Section, key: str, unit: Fraction) -> int:
    """A Kubernetes quantity (cpu "500m", memory "1Gi") in whole ``unit``s, rounded down; 0 when absent."""
    raw = doc.raw(key)
    if raw in (None, ""):
        return 0
    try:
        value = quantity.parse(doc.where(key), raw)
    except BadInput as exc:
        for problem in exc.problems:
            doc.problems.add(problem.field, problem.value, problem.reason)
        return 0
    if value < 0:
        doc.problems.add(doc.where(key), str(raw), "must not be negative")
        return 0
    return int(value // unit)


def _shape(doc: Section) -> NodeShape | None:
    """Ref: https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#resource-units-in-kubernetes"""
    before = len(doc.problems)
    cpus = _quantity(doc, "cpu", Fraction(1))
    memory = _quantity(doc, "memory", Fraction(2**20))
    gpus = doc.integer("gpus", 0, 0, 1024)
    if len(doc.problems) > before:
        return None
    return build(NodeShape, cpus=max(cpus, 1) if doc.raw("cpu") not in (None, "") else 0,
                 real_memory_mib=memory, gpus=gpus)


def _nodesets(doc: Section) -> tuple[NodeSetSpec, ...]:
    nodesets: list[NodeSetSpec] = []
    for ns in doc.sections("nodesets", [{"name": "workers", "feature": "workers"}], _NODESET_KEYS):
        sts = "" if ns.raw("statefulSet") in (None, "") else ns.text("statefulSet", "", confvalues.node_name)
        spec = build(NodeSetSpec, name=ns.text("name", "", confvalues.name),
                     feature=ns.text("feature", str(ns.raw("name", "")), confvalues.feature), stateful_set=sts,
                     autoscaling=_autoscaling(ns.section("autoscaling", _AUTOSCALING_KEYS), sts,
                                              ns.where("statefulSet")),
                     shape=_shape(ns.section("shape", _SHAPE_KEYS)))
        if spec is not None:
            nodesets.append(spec)
    doc.problems.unique("nodesets", [n.name for n in nodesets])
    doc.problems.unique("nodesets[].statefulSet", [n.stateful_set for n in nodesets if n.stateful_set])
    return tuple(nodesets)


def _partitions(doc: Section, set_names: set[str]) -> tuple[PartitionSpec, ...]:
    p = doc.problems
    partitions: list[PartitionSpec] = []
    default_parts = [{"name": "main", "nodesets": ["workers"], "default": True}]
    for part in doc.sections("partitions", default_parts, _PART_KEYS, non_empty=True):
        name = part.text("name", "", confvalues.name)
        members = part.raw("nodesets", [])
        if not isinstance(members, list) or not members:
            p.add(part.where("nodesets"), str(members), "must be a non-empty list")
            members = []
        for m in members:
            p.check(m in set_names, part.where("nodesets"), str(m), "no such nodeset")
        default = part.raw("default", False)
        p.check(isinstance(default, bool), part.where("default"), str(default), "must be true or false")
        spec = build(PartitionSpec, name=name, nodesets=tuple(str(m) for m in members), default=bool(default),
                     priority_tier=part.integer("priorityTier", 1, 0, 65_533),
                     preempt_mode=part.choice("preemptMode", PreemptMode, PreemptMode.OFF, _preempt_text),
                     grace_time=part.integer("graceTime", 0, 0, 86_400),
                     max_time=part.get("maxTime", "INFINITE", _max_time))
        if spec is not None:
            partitions.append(spec)
    p.unique("partitions", [part.name for part in partitions])
    defaults = [part.name for part in partitions if part.default]
    p.check(len(defaults) <= 1, "partitions", ",".join(defaults), "more than one default partition")
    return tuple(partitions)


def _extra_lines(doc: Section) -> tuple[str, ...]:
    extra = doc.listed("extraLines", [], "must be a list of strings") or []
    for i, line in enumerate(extra):
        one_line = isinstance(line, str) and "\n" not in line and "\r" not in line
        doc.problems.check(one_line, f"extraLines[{i}]", str(line), "must be one line of text")
    return tuple(extra)


def parse(raw: object, source: str = "cluster spec") -> ClusterSpec:
    if not isinstance(raw, dict):
        raise BadInput.one(source, str(raw)[:80], "must be a YAML mapping")
    p = Problems()
    doc = p.section("", raw, _TOP_KEYS)
    values: dict[str, Any] = dict(
        cluster_name=doc.get("clusterName", "slurmpod", _cluster_name),
        auth=doc.choice("auth", wk.Auth, wk.Auth.MUNGE),
        select=doc.choice("select", Select, Select.CONS_TRES),
        topology_plugin=doc.choice("topologyPlugin", TopologyPlugin, TopologyPlugin.NONE),
        max_nodes=doc.integer("maxNodes", 1024, 1, 65_000),
        policy=doc.choice("policy", Policy, Policy.NONE),
        node_timeout_seconds=doc.integer("nodeTimeoutSeconds", 300, 10, 86_400),
        mpi_default=doc.choice("mpiDefault", MpiType, None),
        srun_port_range=doc.get("srunPortRange", wk.DEFAULT_SRUN_PORT_RANGE, port_range),
        cgroups=doc.flag("cgroups"),
    )
    nodesets = _nodesets(doc)
    scaled = sum(n.autoscaling.max_replicas for n in nodesets if n.autoscaling.enabled)
    if isinstance(values["max_nodes"], int):
        # slurmctld refuses a dynamic node past MaxNodeCount.
        # Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_MaxNodeCount
        p.check(values["max_nodes"] >= scaled, "maxNodes", str(values["max_nodes"]),
                f"below the autoscaled nodesets' maxReplicas together ({scaled}): not all their nodes could register")
    values.update(
        nodesets=nodesets,
        partitions=_partitions(doc, {n.name for n in nodesets}),
        extra_lines=_extra_lines(doc),
        hooks=_hooks(doc.section("hooks", _HOOK_KEYS)),
        topology=_topology(doc.section("topology", _TOPOLOGY_KEYS)),
        accounting=_accounting(doc.section("accounting", _ACCOUNTING_KEYS)),
        restapi=RestApiSpec(enabled=bool(doc.section("restapi", {"enabled"}).flag("enabled"))),
        k8s_sync=_k8s_sync(doc.section("k8sSync", _K8S_SYNC_KEYS)),
        requeue=RequeueSpec(fast=bool(doc.section("requeue", {"fast"}).flag("fast", True))),
        metrics=_metrics(doc.section("metrics", {"enabled", "pollSeconds"})),
    )
    p.raise_if_any()
    spec = build(ClusterSpec, optional={"mpi_default"}, **values)
    if spec is None:
        raise AssertionError("a field failed validation without a problem recorded")
    return spec


def demand_shape(spec: ClusterSpec, nodeset: NodeSetSpec) -> NodeSetShape:
    """What slurmpod.demand judges a job against for ``nodeset``: its feature, the partitions that hold it,
    its pods' CPUs and GPUs (0 where the spec has no shape) and, for a nodeset slurmpod's autoscaler keeps
    placeholders for, every ordinal up to maxReplicas. The exporter's demand gauge and the autoscaler start
    from this same shape."""
    kept: tuple[str, ...] = ()
    if nodeset.autoscaling.by_slurmpod and nodeset.shape.known and nodeset.stateful_set:
        kept = tuple(pod_node_name(nodeset.stateful_set, i) for i in range(nodeset.autoscaling.max_replicas))
    return NodeSetShape(nodeset.name, nodeset.feature,
                        tuple(p.name for p in spec.partitions if nodeset.name in p.nodesets),
                        nodeset.shape.cpus, nodeset.shape.gpus, kept)


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
