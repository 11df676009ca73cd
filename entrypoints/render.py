"""Rendering of the files a pod writes at start. Deterministic: same input, same bytes.

slurm.conf and cgroup.conf are jinja2 templates (the controller's start is not latency-bound).
supervisord.conf, which every worker writes on the path to IDLE, is built from a small section model:
importing jinja2 alone costs ~80 ms of a worker's start (measured with `python -X importtime`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Literal

from slurmpod import __version__, slurm_version
from slurmpod import well_known as wk
from slurmpod.errors import BadInput
from slurmpod.slurm_version import SlurmVersion

if TYPE_CHECKING:
    import jinja2

    from slurmpod.entrypoints.cluster_spec import ClusterSpec


@dataclass(frozen=True, slots=True)
class Program:
    """One supervisord program: a rendered run script under RUN_DIR/bin."""

    name: str
    script: str  # body of the bash run script
    priority: int
    user: str | None = None
    # supervisord's autorestart: always, never, or only after an exit other than 0 (a one-shot task
    # that must finish its job). Ref: http://supervisord.org/configuration.html#program-x-section-values
    restart: Literal["true", "false", "unexpected"] = "true"
    startsecs: int = 1
    argv: tuple[str, ...] = ()  # what the run script finally execs


@cache
def _env() -> jinja2.Environment:
    import jinja2  # noqa: PLC0415 - see module docstring

    return jinja2.Environment(
        loader=jinja2.PackageLoader("slurmpod.entrypoints", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # noqa: S701 - config files, not HTML; values are validated by confvalues
    )


SCHEDULER_PARAMETERS = "SchedulerParameters="
AUTH_INFO = "AuthInfo="
_MESSAGE_TIMEOUT = re.compile(r"MessageTimeout=([0-9]+)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class RequeueHold:
    """What slurm.conf says about the hold slurmctld puts on a batch job it requeued: an item of
    SchedulerParameters (from 25.11) or of AuthInfo (before), or nothing (Slurm's default, 120 s)."""

    scheduler_parameter: str | None = None
    auth_info: str | None = None


def requeue_hold(spec: ClusterSpec, version: SlurmVersion) -> RequeueHold:
    """The shortest hold this Slurm allows when the spec's ``requeue.fast`` is on (well_known says why each
    value is safe). A hold the spec's extraLines set themselves is theirs: scheduler_parameters and
    auth_info keep an item they name over ours.

    slurmctld pushes the requeued job's begin time to now + hold + 1 s once its epilogs are done
    (batch_requeue_fini in src/slurmctld/job_mgr.c). From 25.11 the hold is requeue_delay, which defaults
    to cred_expire; before, it is cred_expire itself, the job credential's lifetime.
    Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_requeue_delay
    Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_cred_expire
    """
    if not spec.requeue.fast:
        return RequeueHold()
    if version.requeue_delay:
        return RequeueHold(scheduler_parameter=f"requeue_delay={wk.FAST_REQUEUE_DELAY_S}")
    # The credential must outlive one launch RPC at the cluster's MessageTimeout (see well_known).
    timeouts = [int(m[1]) for line in spec.extra_lines if (m := _MESSAGE_TIMEOUT.fullmatch(line.strip()))]
    cred_expire = max(timeouts, default=wk.SLURM_DEFAULT_MESSAGE_TIMEOUT_S) + wk.CRED_MARGIN_S
    return RequeueHold(auth_info=f"cred_expire={cred_expire}")


def _key(item: str) -> str:
    return item.split("=", 1)[0].strip().lower()


def _merge(ours: list[str], theirs: list[str]) -> list[str]:
    """``ours`` then ``theirs``, an item of ours dropped where theirs names the same key (theirs wins)."""
    merged = [i for i in ours if i in theirs or _key(i) not in {_key(t) for t in theirs}]
    return merged + [i for i in theirs if i not in merged]


def scheduler_parameters(spec: ClusterSpec,
                         hold: RequeueHold = RequeueHold()) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(SchedulerParameters items, the other extraLines): slurmpod's items first, then the spec's own.

    A job whose prolog fails is requeued and, by default, held; with slurmpod's prolog draining the bad
    node, the job should run elsewhere instead. Ref: https://slurm.schedmd.com/prolog_epilog.html#failure_handling
    Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_nohold_on_prolog_fail
    One SchedulerParameters line holds them all: an extraLines one is merged, not repeated, and its
    requeue_delay replaces ours.
    """
    items: list[str] = ["nohold_on_prolog_fail"] if spec.hooks.prolog else []
    if hold.scheduler_parameter:
        items.append(hold.scheduler_parameter)
    theirs: list[str] = []
    rest: list[str] = []
    for line in spec.extra_lines:
        if line.startswith(SCHEDULER_PARAMETERS):
            theirs += [i for i in line[len(SCHEDULER_PARAMETERS):].split(",") if i and i not in theirs]
        else:
            rest.append(line)
    return tuple(_merge(items, theirs)), tuple(rest)


def auth_info(extra_lines: Sequence[str],
              hold: RequeueHold = RequeueHold()) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(AuthInfo items, the other lines): one AuthInfo line with our cred_expire unless an extraLines
    AuthInfo names its own. Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_AuthInfo"""
    items = [hold.auth_info] if hold.auth_info else []
    theirs: list[str] = []
    rest: list[str] = []
    for line in extra_lines:
        if line.startswith(AUTH_INFO):
            theirs += [i for i in line[len(AUTH_INFO):].split(",") if i and i not in theirs]
        else:
            rest.append(line)
    return tuple(_merge(items, theirs)), tuple(rest)


def mpi_default(spec: ClusterSpec, mpi_plugins: frozenset[str]) -> str:
    """MpiDefault: the spec's choice, which this Slurm must have, else pmix where it has mpi_pmix.so.
    Debian's Slurm 26.05 is built without PMIx, so there the default is none. Ref: https://slurm.schedmd.com/mpi_guide.html"""
    from slurmpod.errors import BadInput  # noqa: PLC0415 - workers never render slurm.conf

    if spec.mpi_default is None:
        return "pmix" if "pmix" in mpi_plugins else "none"
    if spec.mpi_default != "none" and spec.mpi_default not in mpi_plugins:
        have = ", ".join(sorted(mpi_plugins)) or "none"
        raise BadInput.one("mpiDefault", spec.mpi_default,
                           f"this Slurm has no mpi_{spec.mpi_default}.so (it has: {have})")
    return spec.mpi_default


def prolog_flags(spec: ClusterSpec) -> tuple[str, ...]:
    """The hooks' PrologFlags, plus Contain when jobs run in cgroups: pam_slurm_adopt (in every worker's
    sshd) adopts an ssh session into the job's extern step, which only Contain creates. slurmctld refuses
    NoHold beside Contain ("NoHold cannot be combined with Contain and/or X11"), so NoHold goes: srun then
    waits for the prolog to finish.
    Ref: https://slurm.schedmd.com/pam_slurm_adopt.html#SLURM_CONFIG
    Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_Contain
    """
    from slurmpod.entrypoints.cluster_spec import PrologFlag  # noqa: PLC0415 - workers never render slurm.conf

    flags = spec.hooks.prolog_flags
    if not spec.cgroups or PrologFlag.CONTAIN in flags:
        return flags
    return (*(f for f in flags if f is not PrologFlag.NO_HOLD), PrologFlag.CONTAIN)


def prep_plugins(spec: ClusterSpec) -> tuple[str, ...]:
    """slurmpod's PrEp plugin (images/files/prep_slurmpod.c) where the Prolog and the Epilog are both
    slurmpod's own; else nothing, and Slurm's default (script) runs what the spec names. The plugin runs
    the hooks whatever Prolog= and Epilog= say, so one of the site's own would not run under it."""
    ours = spec.hooks.prolog == wk.PROLOG_BIN and spec.hooks.epilog == wk.EPILOG_BIN
    return (wk.PREP_PLUGIN,) if ours else ()


def slurm_conf(spec: ClusterSpec, controller: str, accounting_host: str | None = None,
               mpi_plugins: frozenset[str] = frozenset(), version: SlurmVersion | None = None) -> str:
    """``accounting_host``: slurmdbd's host, required when the spec enables accounting. ``mpi_plugins``: the MPI
    plugin types this image's Slurm has (``slurm_version.mpi_plugins``). ``version``: the controller's Slurm
    (``slurm_version.detect``; None: slurm_version.DEFAULT), which picks the requeue hold's knob."""
    if spec.accounting.enabled and not accounting_host:
        raise ValueError("accounting enabled without a slurmdbd host")
    from slurmpod.entrypoints.cluster_spec import PreemptMode  # noqa: PLC0415 - workers never render slurm.conf

    preempt = spec.accounting.preempt_qos or any(p.preempt_mode is not PreemptMode.OFF for p in spec.partitions)
    hold = requeue_hold(spec, version or SlurmVersion.parse(slurm_version.DEFAULT))
    sched, extra = scheduler_parameters(spec, hold)
    auth, extra = auth_info(extra, hold)
    return (
        _env()
        .get_template("slurm.conf.j2")
        .render(
            spec=spec,
            controller=controller,
            preempt=preempt,
            prolog_flags=prolog_flags(spec),
            prep_plugins=prep_plugins(spec),
            scheduler_parameters=sched,
            auth_info=auth,
            hold=hold,
            extra_lines=extra,
            version=__version__,
            state_save_location=wk.STATE_SAVE_LOCATION,
            mpi_default=mpi_default(spec, mpi_plugins),
            accounting_host=accounting_host or "",
            accounting_port=wk.SLURMDBD_PORT,
            jwt_key=wk.JWT_KEY,
            plugstack_conf=wk.PLUGSTACK_CONF,
        )
    )


@dataclass(frozen=True, slots=True)
class SlurmdbdConf:
    """What slurmdbd.conf is rendered from; every value checked by the caller (confvalues)."""

    auth: str  # munge | slurm
    dbd_host: str  # this pod's name
    storage_host: str  # the db pod
    storage_pass: str  # from the mounted Secret file, never from values
    jwt: bool  # AuthAltTypes=auth/jwt with the mounted key


def slurmdbd_conf(c: SlurmdbdConf) -> str:
    return (
        _env()
        .get_template("slurmdbd.conf.j2")
        .render(c=c, version=__version__, port=wk.SLURMDBD_PORT, db_port=wk.MARIADB_PORT, user=wk.DB_USER,
                db=wk.DB_NAME, run_dir=wk.SLURMDBD_RUN_DIR, jwt_key=wk.JWT_KEY)
    )


def gres_conf() -> str:
    """The gres.conf every configless slurmd fetches from slurmctld (it never reads the worker's own).

    Dynamic nodes have names nobody knows ahead, so no `NodeName=` line can describe them: each slurmd
    asks NVML for its GPUs' device files, cores and links and must find as many as its `Gres=gpu:N`
    (which slurmpod also takes from NVML). Without libnvidia-ml, slurmd falls back to gpu/generic, so
    CPU-only workers are unaffected. Ref: https://slurm.schedmd.com/gres.conf.html#OPT_AutoDetect
    """
    return ("# gres.conf rendered by slurmpod: each GPU worker's slurmd finds its GPUs through NVML.\n"
            "# Ref: https://slurm.schedmd.com/gres.conf.html#OPT_AutoDetect\n"
            "AutoDetect=nvml\n")


def cgroup_conf() -> str:
    return _env().get_template("cgroup.conf.j2").render()


def plugstack_conf() -> str:
    """A worker's plugstack.conf: slurmpod's SPANK plugin (the task environment)."""
    return _env().get_template("plugstack.conf.j2").render(plugin=wk.SPANK_PLUGIN, exports=wk.TASK_PROLOG_EXPORTS,
                                                          scratch=wk.TASK_PROLOG_SCRATCH)


def ucx_conf(rdma_devices: tuple[str, ...]) -> str:
    """UCX's settings file for a worker with these RDMA devices (``hardware.Hardware.rdma_devices``)."""
    devices = f"RDMA devices: {', '.join(rdma_devices)}" if rdma_devices else "no RDMA device"
    return _env().get_template("ucx.conf.j2").render(rdma_devices=rdma_devices, devices=devices)


def _section(name: str, items: list[tuple[str, object]]) -> list[str]:
    lines = [f"[{name}]"]
    for key, value in items:
        text = str(value)
        if "\n" in text or "\r" in text:
            raise ValueError(f"line break in supervisord value {key}={text!r}")
        lines.append(f"{key}={text}")
    return [*lines, ""]


# What supervisord's `environment=` can carry: KEY="value" pairs, split by its shlex-based parser (which
# keeps no escape inside quotes and strips quote characters from both ends of a value) after %-expansion
# (done twice in the [supervisord] section), in an INI file where whitespace then ';' or '#' starts a
# comment. So a value is printable ASCII with no quote, '%', ';' or '#': nothing in it can end the pair,
# add a key, or start a line.
# Ref: http://supervisord.org/configuration.html#supervisord-section-values (environment)
# Ref: supervisor/datatypes.py dict_of_key_value_pairs ; supervisor/options.py ServerOptions.read_config
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_ENV_VALUE = re.compile(r"[ !$&()*+,\-./0-9:<=>?@A-Z\[\\\]^_`a-z{|}~]*")


def environment_value(pairs: Sequence[tuple[str, str]]) -> str:
    """The value of supervisord's `environment=` for ``pairs``; BadInput names a pair it cannot carry."""
    out = []
    for key, value in pairs:
        if not _ENV_KEY.fullmatch(key):
            raise BadInput.one("supervisord environment", key, "not an environment variable name")
        if not _ENV_VALUE.fullmatch(value):
            raise BadInput.one(key, value, "supervisord's programs get printable ASCII without quotes, '%', ';' or '#'")
        out.append(f'{key}="{value}"')
    return ",".join(out)


def supervisord_conf(
    role: str, programs: Sequence[Program], stop_wait: int, run_dir: str = wk.RUN_DIR,
    environment: Sequence[tuple[str, str]] = (),
) -> str:
    """supervisord.conf: PID 1 over the role's programs, run from ``run_dir``/bin where pod start writes
    them; ``environment`` reaches every program. Ref: http://supervisord.org/configuration.html"""
    run = run_dir
    lines = [f"; supervisord.conf rendered by slurmpod {__version__} for the {role} pod", ""]
    head: list[tuple[str, object]] = [
        ("nodaemon", "true"),
        ("user", "root"),
        ("logfile", "/dev/null"),
        ("logfile_maxbytes", 0),
        ("pidfile", f"{run}/supervisord.pid"),
    ]
    if environment:
        head.append(("environment", environment_value(environment)))
    lines += _section("supervisord", head)
    lines += _section("unix_http_server", [("file", f"{run}/{wk.SUPERVISOR_SOCK}"), ("chmod", "0700")])
    lines += _section(
        "rpcinterface:supervisor",
        [("supervisor.rpcinterface_factory", "supervisor.rpcinterface:make_main_rpcinterface")],
    )
    lines += _section("supervisorctl", [("serverurl", f"unix://{run}/{wk.SUPERVISOR_SOCK}")])
    for p in sorted(programs, key=lambda p: (p.priority, p.name)):
        items: list[tuple[str, object]] = [("command", f"{run}/bin/{p.name}")]
        if p.user:
            items.append(("user", p.user))
        items += [
            ("priority", p.priority),
            ("autostart", "true"),
            ("autorestart", p.restart),
            ("startsecs", p.startsecs),
            # restarts keep coming; supervisord backs off 1 s more per failed start
            ("startretries", 1000),
            ("stopsignal", "TERM"),
            ("stopwaitsecs", stop_wait),
            ("stopasgroup", "true"),
            ("killasgroup", "true"),
            # logs go to the pod's stdout (kubectl logs); each line is prefixed by the run script
            ("stdout_logfile", "/dev/stdout"),
            ("stdout_logfile_maxbytes", 0),
            ("redirect_stderr", "true"),
        ]
        lines += _section(f"program:{p.name}", items)
    return "\n".join(lines)
