"""The `slurmpod` command. It only parses, builds settings and calls the library.

Every option has one environment twin, declared with its command (``--dry-run`` <-> ``SLURMPOD_DRY_RUN``,
``probe --timeout`` <-> ``SLURMPOD_PROBE_TIMEOUT``); the flag wins. An environment value is parsed with
the flag's own type and choices, so a bad one exits 2 naming the variable, like a bad flag. One name
never carries two meanings: ``build_parser`` refuses a second declaration of a name with another meaning.
Exit codes: 0 success, 1 check/policy/runtime failure, 2 bad input.

Host commands (image builds, the pods-in-Docker emulator, the demo) are not declared here: the
slurmpod-host distribution (./host) registers them through the ``slurmpod.commands`` entry-point group,
consulted only for a command that is not a pod command, so pod start never pays for importlib.metadata.
The pod images do not carry that distribution, and nothing on the pod path imports it.
Ref: https://packaging.python.org/en/latest/specifications/entry-points/
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, cast

from slurmpod import errors, logs, termination
from slurmpod import well_known as wk

log = logging.getLogger(__name__)

# A command: its parsed flags and the environment, read once by ``main``.
Handler = Callable[[argparse.Namespace, Mapping[str, str]], int]
LOG_FORMATS = ("text", "json")
# The entry-point group host distributions register their command groups in: each entry is a function
# taking a ``Commands`` (one function per command group, e.g. `images`, `cluster`).
COMMANDS_GROUP = "slurmpod.commands"
HOST_MISSING = ("not a pod command; host commands (image builds, the pods-in-Docker cluster, the demo) come "
                "with the slurmpod-host distribution, not installed here (pod images never carry it): in a "
                "checkout, `make bootstrap` or `pip install ./host`")


@dataclass(frozen=True, slots=True)
class Twin:
    """One environment twin: its name and what it means (the option it feeds)."""

    env: str
    flag: str
    meaning: str  # the help text: two declarations of one name must mean the same


class Twins:
    """The environment twins of one parser; refuses one name with two meanings."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.declared: dict[str, Twin] = {}
        self.problems: list[errors.Problem] = []

    def declare(self, twin: Twin) -> None:
        known = self.declared.get(twin.env)
        if known is not None and known.meaning != twin.meaning:
            raise AssertionError(f"{twin.env} declared for {known.flag} ({known.meaning!r}) "
                                 f"and for {twin.flag} ({twin.meaning!r})")
        self.declared[twin.env] = twin


def default_env_name(flag: str) -> str:
    return "SLURMPOD_" + flag.lstrip("-").replace("-", "_").upper()


def _truthy(env: str, raw: str) -> bool:
    low = raw.strip().lower()
    if low in {"1", "true", "yes", "on"}:
        return True
    if low in {"0", "false", "no", "off", ""}:
        return False
    raise errors.BadInput.one(env, raw, "expected true or false (1/0, yes/no, on/off)")


def _from_env(env: str, raw: str, kw: Mapping[str, Any]) -> Any:
    """Parse an environment value as argparse would parse the flag; BadInput names the variable."""
    if kw.get("action") == "store_true":
        return _truthy(env, raw)
    convert = kw.get("type", str)
    choices = kw.get("choices")
    items = [v.strip() for v in raw.split(",") if v.strip()] if kw.get("action") == "append" else [raw]
    out = []
    for item in items:
        try:
            value = convert(item)
        except (TypeError, ValueError):
            raise errors.BadInput.one(env, raw, f"not a valid {getattr(convert, '__name__', 'value')}") from None
        if choices is not None and value not in choices:
            raise errors.BadInput.one(env, raw, f"expected one of {', '.join(map(str, choices))}")
        out.append(value)
    return out if kw.get("action") == "append" else out[0]


def tcp_port(raw: str) -> int:
    """A TCP port number, 0 to 65535 (0: off)."""
    value = int(raw)
    if not 0 <= value <= 65535:  # the TCP port range
        raise ValueError(raw)
    return value


def option(p: argparse.ArgumentParser, twins: Twins, flag: str, *, env: str | None = None, **kw: Any) -> None:
    """Add an option whose default comes from its declared SLURMPOD_ environment twin."""
    name = env or default_env_name(flag)
    meaning = kw.get("help", "") or flag
    twins.declare(Twin(name, flag, meaning))
    if name in twins.environ:
        try:
            kw["default"] = _from_env(name, twins.environ[name], kw)
        except errors.BadInput as exc:
            twins.problems.extend(exc.problems)
        kw.pop("required", None)
    kw["help"] = (kw.get("help", "") + f" [env {name}]").strip()
    p.add_argument(flag, **kw)


def lazy(module: str, func: str = "main", *, takes_env: bool = True) -> Handler:
    """Import the implementing module only when its command runs: keeps pod start fast.

    ``takes_env``: the function takes (args, env); host tools take their args alone."""

    def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
        fn = getattr(importlib.import_module(module), func)
        return int(fn(args, env) if takes_env else fn(args))

    return run


@dataclass(frozen=True, slots=True)
class Commands:
    """What a host distribution's registration function gets: the subcommand table and the twins, so
    its options keep one SLURMPOD_ twin each and one meaning per name across every distribution."""

    sub: Any  # argparse's subparsers action of the top-level parser
    twins: Twins

    def group(self, name: str, help: str) -> Any:
        """A top-level command with subcommands of its own: returns their subparsers action."""
        parser = self.sub.add_parser(name, help=help)
        return parser.add_subparsers(dest=f"{name.replace('-', '_')}_command", required=True)

    def command(self, name: str, help: str) -> argparse.ArgumentParser:
        return cast("argparse.ArgumentParser", self.sub.add_parser(name, help=help))

    def option(self, parser: argparse.ArgumentParser, flag: str, *, env: str | None = None, **kw: Any) -> None:
        option(parser, self.twins, flag, env=env, **kw)


def _pod_commands(sub: Any, t: Twins) -> None:
    ep = sub.add_parser("entrypoint", help="pod start: render config, then exec supervisord")
    ep.add_argument("role", help="controller | worker | login | accounting | db | restapi")
    option(ep, t, "--dry-run", action="store_true", help="render and print the plan; start nothing")
    # Slinky's operator appends slurmd's args to the image's entrypoint (entrypoints/slinky.py).
    ep.add_argument("slurmd_args", nargs=argparse.REMAINDER,
                    help="-Z --conf-server HOST:PORT --conf VALUE, as Slinky's operator passes them")
    ep.set_defaults(handler=lazy("slurmpod.entrypoints.start"))

    render = sub.add_parser("render", help="show what a pod would get; no side effects")
    rsub = render.add_subparsers(dest="render_command", required=True)
    podinfo_help = "dir with the pod's downward-API files (labels, annotations)"
    rn = rsub.add_parser("node", help="print the slurmd invocation a worker would exec")
    option(rn, t, "--podinfo", env=wk.ENV_PODINFO_DIR, required=True, help=podinfo_help)
    option(rn, t, "--env-file", default=None, help="KEY=VALUE lines standing in for the pod's env")
    option(rn, t, "--static", action="store_true", help="print a static NodeName= line instead")
    rn.add_argument("slurmd_args", nargs="*", metavar="-- SLURMD_ARG",
                    help="preview a worker started with Slinky's slurmd args (after --)")
    rn.set_defaults(handler=lazy("slurmpod.entrypoints.render_cli", "node"))
    rc = rsub.add_parser("slurm-conf", help="print slurm.conf for a controller")
    option(rc, t, "--cluster-spec", env=wk.ENV_CLUSTER_SPEC, required=True, help="the cluster spec YAML")
    option(rc, t, "--podinfo", env=wk.ENV_PODINFO_DIR, required=True, help=podinfo_help)
    option(rc, t, "--env-file", default=None, help="KEY=VALUE lines standing in for the pod's env")
    rc.set_defaults(handler=lazy("slurmpod.entrypoints.render_cli", "slurm_conf"))

    probe = sub.add_parser("probe", help="Kubernetes probes")
    probe.add_argument("kind", choices=["ready", "live"])
    option(probe, t, "--timeout", env="SLURMPOD_PROBE_TIMEOUT", type=float, default=5.0,
         help="seconds the probe may take")
    probe.set_defaults(handler=lazy("slurmpod.entrypoints.probes"))

    pre = sub.add_parser("prestop", help="drain this node, requeue its jobs, stop slurmd")
    option(pre, t, "--grace", env=wk.ENV_GRACE_SECONDS, type=float, default=30.0,
         help="the pod's terminationGracePeriodSeconds")
    pre.set_defaults(handler=lazy("slurmpod.entrypoints.prestop"))

    daemon = sub.add_parser("daemon", help="helpers supervisord runs beside the Slurm daemons")
    dsub = daemon.add_subparsers(dest="task", required=True)
    reaper = dsub.add_parser("node-reaper", help="controller: delete dynamic nodes whose pod is gone")
    option(reaper, t, "--node-timeout", type=float, default=300.0,
         help="seconds a dynamic node may not respond before it is deleted")
    option(reaper, t, "--interval", env="SLURMPOD_REAPER_INTERVAL", type=float, default=15.0,
         help="seconds between reaper passes")
    reaper.set_defaults(handler=lazy("slurmpod.entrypoints.daemons", "reaper_main"))
    reconcile = dsub.add_parser("reconcile-node", help="worker: make the registered node match this pod")
    option(reconcile, t, "--expect", env="SLURMPOD_EXPECT_CONF", default=None,
         help="the --conf string this pod registers with")
    reconcile.set_defaults(handler=lazy("slurmpod.entrypoints.daemons", "reconcile_main"))
    claim = dsub.add_parser("claim-placeholder",
                            help="worker, before slurmd: delete this pod's FUTURE placeholder so slurmd registers")
    claim.set_defaults(handler=lazy("slurmpod.entrypoints.daemons", "claim_main"))
    tsync = dsub.add_parser("topology-sync", help="controller: keep topology.conf/topology.yaml current")
    option(tsync, t, "--interval", env="SLURMPOD_TOPOLOGY_SYNC_INTERVAL", type=float, default=None,
         help="seconds between passes (default: the cluster spec's topology.syncIntervalSeconds)")
    tsync.set_defaults(handler=lazy("slurmpod.entrypoints.topology_sync"))
    acct = dsub.add_parser("accounting-setup",
                           help="register the cluster and the spec's QoS, accounts and users in slurmdbd (controller)")
    acct.set_defaults(handler=lazy("slurmpod.entrypoints.accounting_setup"))
    ksync = dsub.add_parser("k8s-sync", help="controller: Kubernetes node state to Slurm drains, Slurm state to pods")
    option(ksync, t, "--state-dir", env="SLURMPOD_K8S_SYNC_STATE_DIR", default=f"{wk.RUN_DIR}/k8s-sync",
         help="where the remediation budget and the counters are kept")
    ksync.set_defaults(handler=lazy("slurmpod.entrypoints.k8s_sync.daemon"))
    scale = dsub.add_parser("autoscale", help="controller: worker nodesets' replicas follow the pending jobs they "
                            "could serve; scale-in drains idle nodes first")
    option(scale, t, "--interval", env="SLURMPOD_AUTOSCALE_INTERVAL", type=float, default=15.0,
           help="seconds between passes")
    option(scale, t, "--counters", env="SLURMPOD_AUTOSCALE_COUNTERS_FILE", default=wk.AUTOSCALE_COUNTERS_FILE,
           help="where the decisions are counted for the exporter (JSON)")
    scale.set_defaults(handler=lazy("slurmpod.entrypoints.autoscale.daemon"))
    exporter = dsub.add_parser("exporter", help="controller: Prometheus metrics of Slurm and slurmpod")
    option(exporter, t, "--port", env=wk.ENV_EXPORTER_PORT, type=tcp_port, default=wk.EXPORTER_PORT,
           help="TCP port of /metrics")
    option(exporter, t, "--poll-seconds", env="SLURMPOD_EXPORTER_POLL_SECONDS", type=float, default=None,
           help="seconds between two reads of slurmctld (default: the cluster spec's metrics.pollSeconds)")
    exporter.set_defaults(handler=lazy("slurmpod.entrypoints.exporter.daemon"))
    agent = dsub.add_parser("health-agent", help="worker: hold NVML, run the periodic health checks, answer "
                            "the prolog, epilog and healthcheck over a local socket")
    option(agent, t, "--socket", env=wk.ENV_HEALTH_AGENT_SOCKET, default=wk.HEALTH_AGENT_SOCKET,
           help="the Unix socket the hooks ask the health agent on")
    option(agent, t, "--interval", env="SLURMPOD_HEALTH_AGENT_INTERVAL", type=float, default=60.0,
           help="seconds between the agent's periodic runs")
    option(agent, t, "--max-age", env="SLURMPOD_HEALTH_AGENT_MAX_AGE", type=float, default=120.0,
           help="oldest results (seconds) a healthcheck is answered with; older ones are run again")
    option(agent, t, "--metrics-port", env=wk.ENV_HEALTH_AGENT_METRICS_PORT, type=tcp_port,
           default=wk.HEALTH_AGENT_METRICS_PORT, help="TCP port of the live Prometheus metrics (0: none)")
    option(agent, t, "--config", env=wk.ENV_HEALTH_CONFIG, default=None, help="the health config YAML")
    option(agent, t, "--state-dir", env=wk.ENV_HEALTH_STATE_DIR, default=None,
           help="where counters are kept between runs")
    agent.set_defaults(handler=lazy("slurmpod.prolog_epilog.agent.daemon"))


def _topology_commands(sub: Any, t: Twins) -> None:
    topo = sub.add_parser("topology", help="Slurm network topology from Kubernetes node labels")
    tsub = topo.add_subparsers(dest="topology_command", required=True)
    r = tsub.add_parser("render", help="print topology.conf (tree|block) or topology.yaml; no side effects")
    option(r, t, "--nodes", env="SLURMPOD_TOPOLOGY_NODES", required=True,
         help="`kubectl get nodes -o json` output")
    option(r, t, "--pods", env="SLURMPOD_TOPOLOGY_PODS", default=None,
         help="`kubectl get pods -o json` output: Slurm nodes are its worker pods (default: the Kubernetes nodes)")
    option(r, t, "--format", env="SLURMPOD_TOPOLOGY_FORMAT", required=True, choices=["tree", "block", "yaml"],
         help="topology.conf for topology/tree or topology/block, or topology.yaml (Slurm 25.05+)")
    option(r, t, "--yaml-plugin", env="SLURMPOD_TOPOLOGY_YAML_PLUGIN", choices=["block", "tree"], default="block",
         help="with --format yaml: the kind of topology it holds")
    option(r, t, "--provider", env="SLURMPOD_TOPOLOGY_PROVIDER", default="auto",
         choices=["auto", "generic", "slinky", "topograph", "gke", "eks", "coreweave", "nebius"],
         help="which labels give the placement (auto: the first that places any node)")
    option(r, t, "--unplaced", env="SLURMPOD_TOPOLOGY_UNPLACED", choices=["own-block", "error"], default="own-block",
         help="nodes no label places: together in a block named 'unplaced', or an error")
    option(r, t, "--slinky-topology", env="SLURMPOD_TOPOLOGY_SLINKY_TOPOLOGY", default=None,
         help="with Slinky annotations (topo:unit,...): the topology whose units to use (default: the first)")
    option(r, t, "--block-sizes", env="SLURMPOD_TOPOLOGY_BLOCK_SIZES", default=None,
         help="BlockSizes, e.g. 4,16 (default: the smallest block, doubled while it fits)")
    r.set_defaults(handler=lazy("slurmpod.topology.render_cli"))


def _policy_commands(sub: Any, t: Twins) -> None:
    policy = sub.add_parser("policy", help="the job_submit policy, without Slurm")
    psub = policy.add_subparsers(dest="policy_command", required=True)
    check = psub.add_parser("check", help="print the decision for one job as JSON (exit 0 accept/modify, 1 reject)")
    option(check, t, "--policy", env=wk.ENV_POLICY, default=wk.POLICY_FILE, help="the policy YAML")
    option(check, t, "--job", env="SLURMPOD_POLICY_JOB", required=True, help="the job as JSON (a file, or - for stdin)")
    check.set_defaults(handler=lazy("slurmpod.policy.check_cli"))


def _health_commands(sub: Any, t: Twins) -> None:
    """Node health: what Slurm runs as Prolog, Epilog and HealthCheckProgram, and the same checks on demand."""
    check = sub.add_parser("check", help="node health checks")
    csub = check.add_subparsers(dest="check_command", required=True)
    run = csub.add_parser("run", help="run the health checks of one context and print the results")
    option(run, t, "--context", env="SLURMPOD_CHECK_CONTEXT", required=True,
         choices=["prolog", "epilog", "periodic", "startup"], help="which checks: those of this context")
    option(run, t, "--json", env="SLURMPOD_CHECK_JSON", action="store_true", help="print the results as JSON")
    option(run, t, "--act", env="SLURMPOD_CHECK_ACT", action="store_true",
         help="drain or resume this node as the hooks would (default: only report)")
    option(run, t, "--config", env=wk.ENV_HEALTH_CONFIG, default=None, help="the health config YAML")
    option(run, t, "--state-dir", env=wk.ENV_HEALTH_STATE_DIR, default=None,
         help="where counters are kept between runs")
    option(run, t, "--metrics-dir", env=wk.ENV_HEALTH_METRICS_DIR, default=None,
         help="node-exporter textfile dir for the metrics")
    run.set_defaults(handler=lazy("slurmpod.prolog_epilog.main", "check_run"))
    for name, func, text in (
        ("prolog", "prolog", "Slurm Prolog: health checks before a job; exit 1 drains and requeues"),
        ("epilog", "epilog", "Slurm Epilog: health checks after a job"),
        ("healthcheck", "healthcheck", "Slurm HealthCheckProgram: periodic checks, drain and undrain"),
    ):
        sub.add_parser(name, help=text).set_defaults(handler=lazy("slurmpod.prolog_epilog.main", func))
    sub.add_parser("task-prolog", help="Slurm TaskProlog: export the pod's task environment, make the job's "
                   "scratch dir").set_defaults(handler=lazy("slurmpod.prolog_epilog.task_env"))


def build_parser(environ: Mapping[str, str] | None = None, *,
                 host: bool = True) -> tuple[argparse.ArgumentParser, Twins]:
    """The parser and its environment twins (with any problems found in the environment's values).

    ``host``: add the commands host distributions register (``COMMANDS_GROUP``); pod commands never need them."""
    twins = Twins(os.environ if environ is None else environ)
    parser = argparse.ArgumentParser(prog="slurmpod", description=__doc__.splitlines()[0])
    option(parser, twins, "--log-format", env=wk.ENV_LOG_FORMAT, choices=list(LOG_FORMATS), default="text",
           help="log line format")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if host:
        _host_commands(Commands(sub, twins))
    _pod_commands(sub, twins)
    _topology_commands(sub, twins)
    _policy_commands(sub, twins)
    _health_commands(sub, twins)
    return parser, twins


def _host_commands(commands: Commands) -> None:
    """Every command group a host distribution registers; none when only the pod side is installed."""
    from importlib.metadata import entry_points  # noqa: PLC0415 - never on a pod command's path

    for entry in sorted(entry_points(group=COMMANDS_GROUP), key=lambda e: e.name):
        entry.load()(commands)


def command_word(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names (after the top-level options), or None (no command, or --help)."""
    it = iter(argv)
    for arg in it:
        if arg == "--log-format":
            next(it, None)
        elif arg.startswith("--log-format="):
            continue
        elif arg.startswith("-"):
            return None
        else:
            return arg
    return None


def _parser_for(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[argparse.ArgumentParser, Twins]:
    """The pod commands alone when ``argv`` names one of them; otherwise with the host's commands too."""
    word = command_word(argv)
    parser, twins = build_parser(environ, host=False)
    if word is not None and word in _choices(parser):
        return parser, twins
    parser, twins = build_parser(environ, host=True)
    if word is not None and word not in _choices(parser):
        raise errors.BadInput.one("COMMAND", word, HOST_MISSING)
    return parser, twins


def _choices(parser: argparse.ArgumentParser) -> Mapping[str, Any]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return cast("Mapping[str, Any]", sub.choices)


def _fail(exc: errors.SlurmpodError, prefix: str, environ: Mapping[str, str]) -> int:
    msg = f"slurmpod: {prefix}{exc}"
    print(msg, file=sys.stderr)
    termination.write(msg, termination.path(environ))
    return exc.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """The one place the process environment is read: a frozen copy goes to the command."""
    environ: Mapping[str, str] = MappingProxyType(dict(os.environ))
    args_in = sys.argv[1:] if argv is None else list(argv)
    try:
        parser, twins = _parser_for(args_in, environ)
        if twins.problems:
            raise errors.BadInput(twins.problems)
    except errors.BadInput as exc:
        return _fail(exc, "bad input: ", environ)
    args = parser.parse_args(args_in)
    logs.setup(args.log_format)
    return _dispatch(args.handler, args, environ)


def _dispatch(handler: Handler, args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """Run a command; the one place that turns errors into exit codes and the termination log."""
    try:
        return handler(args, environ)
    except errors.BadInput as exc:
        return _fail(exc, "bad input: ", environ)
    except errors.SlurmpodError as exc:
        return _fail(exc, "", environ)
    except OSError as exc:  # a read-only or full filesystem, a missing directory: one line, no traceback
        where = f" {exc.filename}" if exc.filename else ""
        return _fail(errors.PermanentError(f"{exc.strerror or exc}{where}"), "", environ)
    except KeyboardInterrupt:
        return 130


def _hook(command: str) -> int:
    """What Slurm runs, without building the whole command tree first: the prolog delays every job, and
    the parser costs it tens of milliseconds. The hooks take no arguments; their one option, the log
    format, comes from its environment twin, validated as the flag would be.

    slurmd starts hooks without a search path, so scontrol and munge are found through HOOK_PATH.
    Ref: https://slurm.schedmd.com/prolog_epilog.html
    """
    os.environ.setdefault("PATH", wk.HOOK_PATH)  # for the commands the checks run, not read back
    environ: Mapping[str, str] = MappingProxyType(dict(os.environ))
    fmt = environ.get(wk.ENV_LOG_FORMAT, "text")
    if fmt not in LOG_FORMATS:
        return _fail(errors.BadInput.one(wk.ENV_LOG_FORMAT, fmt, f"must be one of {', '.join(LOG_FORMATS)}"),
                     "bad input: ", environ)
    logs.setup(fmt)
    return _dispatch(lazy("slurmpod.prolog_epilog.main", command), argparse.Namespace(log_format=fmt), environ)


# Slurm's Prolog=, Epilog= and HealthCheckProgram= take a path and no arguments: one program each.
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_Prolog
def prolog_main() -> int:
    return _hook("prolog")


def epilog_main() -> int:
    return _hook("epilog")


def healthcheck_main() -> int:
    return _hook("healthcheck")


if __name__ == "__main__":
    sys.exit(main())
