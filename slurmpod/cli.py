"""The `slurmpod` command. It only parses, builds settings and calls the library.

Every option has one environment twin, declared with its command (``--flavor`` <-> ``SLURMPOD_FLAVOR``,
``probe --timeout`` <-> ``SLURMPOD_PROBE_TIMEOUT``); the flag wins. An environment value is parsed with
the flag's own type and choices, so a bad one exits 2 naming the variable, like a bad flag. One name
never carries two meanings: ``build_parser`` refuses a second declaration of a name with another meaning.
Exit codes: 0 success, 1 check/policy/runtime failure, 2 bad input.

`images`, `cluster` and `demo` are host tools from the slurmpod-host distribution (./host); the pod
images do not carry it, and nothing on the pod path imports it.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slurmpod import errors, logs, termination
from slurmpod import well_known as wk

log = logging.getLogger(__name__)

Handler = Callable[[argparse.Namespace], int]
FLAVORS = ("24.11", "26.05")
LOG_FORMATS = ("text", "json")
HOST_PACKAGE = "slurmpod_host"


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


def _opt(p: argparse.ArgumentParser, twins: Twins, flag: str, *, env: str | None = None, **kw: Any) -> None:
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


def _lazy(module: str, func: str = "main") -> Handler:
    """Import the implementing module only when its command runs: keeps pod start fast."""

    def run(args: argparse.Namespace) -> int:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if module.startswith(HOST_PACKAGE) and (exc.name or "").startswith(HOST_PACKAGE):
                raise errors.PermanentError(
                    f"`{module.split('.')[1]}` is a host tool from the slurmpod-host distribution, not installed "
                    "here (pod images never carry it): in a checkout, `make bootstrap` or `pip install ./host`"
                ) from None
            raise
        fn: Handler = getattr(mod, func)
        return fn(args)

    return run


def _host_commands(sub: Any, t: Twins) -> None:
    images = sub.add_parser("images", help="build and list the container images (host tool)")
    isub = images.add_subparsers(dest="images_command", required=True)
    b = isub.add_parser("build", help="build images (base made with debootstrap when missing)")
    _opt(b, t, "--flavor", choices=FLAVORS, default="24.11", help="Slurm flavor of the images")
    _opt(b, t, "--role", env="SLURMPOD_BUILD_ROLES", action="append",
         choices=["base", *wk.IMAGE_ROLES], help="roles to build (repeatable; default: all)")
    _opt(b, t, "--base-image", default=None, help="start from this registry image instead of debootstrap")
    _opt(b, t, "--mirror", default=None, help="Debian mirror (default: the host's apt sources)")
    _opt(b, t, "--log-file", env="SLURMPOD_BUILD_LOG", default=None,
         help="full build log (default build/images-FLAVOR.log)")
    _opt(b, t, "--values-file", default=None, help="write the built image ids into this Helm values file")
    b.set_defaults(handler=_lazy("slurmpod_host.images.build"))
    pin = isub.add_parser("pin", help="write the built images' digests into a Helm values file (only those change)")
    _opt(pin, t, "--values", required=True, help="values file of deploy/helm/slurmpod or of Slinky's slurm chart")
    _opt(pin, t, "--flavor", choices=FLAVORS, default="24.11", help="Slurm flavor of the images")
    _opt(pin, t, "--path", action="append", default=None,
         help="KEYPATH=ROLE to pin, e.g. nodesets.gpu.slurmd.image=worker (repeatable; default: every "
              "controller.slurmctld.image, nodesets.*.slurmd.image, loginsets.*.login.image)")
    _opt(pin, t, "--local-id", action="store_true", default=False,
         help="pin the local image ID where the image has no RepoDigest (not pullable by a kubelet)")
    pin.set_defaults(handler=_lazy("slurmpod_host.images.pin"))
    ls = isub.add_parser("list", help="list built slurmpod images")
    ls.set_defaults(handler=_lazy("slurmpod_host.images.build", "list_main"))

    cluster = sub.add_parser("cluster", help="pods emulated with Docker, from the manifests in deploy/ (host tool)")
    csub = cluster.add_subparsers(dest="cluster_command", required=True)
    up = csub.add_parser("up", help="start controller, N workers and a login pod; wait for IDLE")
    _opt(up, t, "--flavor", choices=FLAVORS, default="24.11", help="Slurm flavor of the images")
    _opt(up, t, "--workers", type=int, default=2, help="number of worker pods")
    _opt(up, t, "--timeout", env="SLURMPOD_UP_TIMEOUT", type=float, default=120.0,
         help="seconds to wait for every worker to be IDLE")
    _opt(up, t, "--auth", choices=list(wk.AUTH_TYPES), default="munge",
         help="AuthType: munge (munged in every pod) or slurm (auth/slurm with a generated slurm.key)")
    _opt(up, t, "--manifests", default=None,
         help="kustomization directory to run (default deploy/kubernetes; deploy/kubernetes/accounting "
              "adds slurmdbd, MariaDB and slurmrestd)")
    for c in (up, csub.add_parser("down", help="remove every container, network and volume"),
              csub.add_parser("status", help="pods and sinfo")):
        _opt(c, t, "--name", default="slurmpod", help="cluster name (prefix of every Docker object)")
        c.set_defaults(handler=_lazy("slurmpod_host.cluster.cli"))

    _k8s_commands(sub, t)

    demo = sub.add_parser("demo", help="build if needed, cluster up, run the demo jobs (host tool)")
    _opt(demo, t, "--flavor", choices=FLAVORS, default="24.11", help="Slurm flavor of the images")
    _opt(demo, t, "--workers", type=int, default=2, help="number of worker pods")
    _opt(demo, t, "--name", default="slurmpod", help="cluster name (prefix of every Docker object)")
    demo.set_defaults(handler=_lazy("slurmpod_host.cluster.demo"))


def _k8s_commands(sub: Any, t: Twins) -> None:
    """`slurmpod k8s`: a local Kubernetes 1.20.2 (slurmpod_host.kube). Paths come from SLURMPOD_K8S_CACHE
    and SLURMPOD_K8S_STATE_DIR (slurmpod_host.kube.layout)."""
    k8s = sub.add_parser("k8s", help="a local single-node Kubernetes 1.20.2 on this Docker engine (host tool)")
    ksub = k8s.add_subparsers(dest="k8s_command", required=True)
    for name, text in (("build", "build the control plane and kubelet once per machine (cached)"),
                       ("up", "start etcd, the control plane, a kubelet, kube-proxy and DNS; print KUBECONFIG"),
                       ("down", "stop it all and remove its containers, bridge, rules and state"),
                       ("status", "the daemons, nodes and pods")):
        ksub.add_parser(name, help=text).set_defaults(handler=_lazy("slurmpod_host.kube.cli"))
    prep = ksub.add_parser("prepare", help="before `helm install`: the namespace, the munge key Secret and "
                           "PersistentVolumes for the release's claims (there is no provisioner)")
    _opt(prep, t, "--release", env="SLURMPOD_K8S_RELEASE", default="slurmpod", help="the Helm release name")
    _opt(prep, t, "--namespace", env="SLURMPOD_K8S_NAMESPACE", default="slurmpod", help="the release's namespace")
    _opt(prep, t, "--values", env="SLURMPOD_K8S_VALUES", action="append", default=None,
         help="a values file the release will be installed with (repeatable)")
    prep.set_defaults(handler=_lazy("slurmpod_host.kube.cli"))


def _pod_commands(sub: Any, t: Twins) -> None:
    ep = sub.add_parser("entrypoint", help="pod start: render config, then exec supervisord")
    ep.add_argument("role", help="controller | worker | login | accounting | db | restapi")
    _opt(ep, t, "--dry-run", action="store_true", help="render and print the plan; start nothing")
    # Slinky's operator appends slurmd's args to the image's entrypoint (entrypoints/slinky.py).
    ep.add_argument("slurmd_args", nargs=argparse.REMAINDER,
                    help="-Z --conf-server HOST:PORT --conf VALUE, as Slinky's operator passes them")
    ep.set_defaults(handler=_lazy("slurmpod.entrypoints.start"))

    render = sub.add_parser("render", help="show what a pod would get; no side effects")
    rsub = render.add_subparsers(dest="render_command", required=True)
    podinfo_help = "dir with the pod's downward-API files (labels, annotations)"
    rn = rsub.add_parser("node", help="print the slurmd invocation a worker would exec")
    _opt(rn, t, "--podinfo", env=wk.ENV_PODINFO_DIR, required=True, help=podinfo_help)
    _opt(rn, t, "--env-file", default=None, help="KEY=VALUE lines standing in for the pod's env")
    _opt(rn, t, "--static", action="store_true", help="print a static NodeName= line instead")
    rn.add_argument("slurmd_args", nargs="*", metavar="-- SLURMD_ARG",
                    help="preview a worker started with Slinky's slurmd args (after --)")
    rn.set_defaults(handler=_lazy("slurmpod.entrypoints.render_cli", "node"))
    rc = rsub.add_parser("slurm-conf", help="print slurm.conf for a controller")
    _opt(rc, t, "--cluster-spec", env=wk.ENV_CLUSTER_SPEC, required=True, help="the cluster spec YAML")
    _opt(rc, t, "--podinfo", env=wk.ENV_PODINFO_DIR, required=True, help=podinfo_help)
    _opt(rc, t, "--env-file", default=None, help="KEY=VALUE lines standing in for the pod's env")
    rc.set_defaults(handler=_lazy("slurmpod.entrypoints.render_cli", "slurm_conf"))

    probe = sub.add_parser("probe", help="Kubernetes probes")
    probe.add_argument("kind", choices=["ready", "live"])
    _opt(probe, t, "--timeout", env="SLURMPOD_PROBE_TIMEOUT", type=float, default=5.0,
         help="seconds the probe may take")
    probe.set_defaults(handler=_lazy("slurmpod.entrypoints.probes"))

    pre = sub.add_parser("prestop", help="drain this node, requeue its jobs, stop slurmd")
    _opt(pre, t, "--grace", env=wk.ENV_GRACE_SECONDS, type=float, default=30.0,
         help="the pod's terminationGracePeriodSeconds")
    pre.set_defaults(handler=_lazy("slurmpod.entrypoints.prestop"))

    daemon = sub.add_parser("daemon", help="helpers supervisord runs beside the Slurm daemons")
    dsub = daemon.add_subparsers(dest="task", required=True)
    reaper = dsub.add_parser("node-reaper", help="controller: delete dynamic nodes whose pod is gone")
    _opt(reaper, t, "--node-timeout", type=float, default=300.0,
         help="seconds a dynamic node may not respond before it is deleted")
    _opt(reaper, t, "--interval", env="SLURMPOD_REAPER_INTERVAL", type=float, default=15.0,
         help="seconds between reaper passes")
    reaper.set_defaults(handler=_lazy("slurmpod.entrypoints.daemons", "reaper_main"))
    reconcile = dsub.add_parser("reconcile-node", help="worker: make the registered node match this pod")
    _opt(reconcile, t, "--expect", env="SLURMPOD_EXPECT_CONF", default=None,
         help="the --conf string this pod registers with")
    reconcile.set_defaults(handler=_lazy("slurmpod.entrypoints.daemons", "reconcile_main"))
    tsync = dsub.add_parser("topology-sync", help="controller: keep topology.conf/topology.yaml current")
    _opt(tsync, t, "--interval", env="SLURMPOD_TOPOLOGY_SYNC_INTERVAL", type=float, default=None,
         help="seconds between passes (default: the cluster spec's topology.syncIntervalSeconds)")
    tsync.set_defaults(handler=_lazy("slurmpod.entrypoints.topology_sync"))
    acct = dsub.add_parser("accounting-setup", help="register the cluster and the spec's QoS in slurmdbd (controller)")
    acct.set_defaults(handler=_lazy("slurmpod.entrypoints.accounting_setup"))


def _topology_commands(sub: Any, t: Twins) -> None:
    topo = sub.add_parser("topology", help="Slurm network topology from Kubernetes node labels")
    tsub = topo.add_subparsers(dest="topology_command", required=True)
    r = tsub.add_parser("render", help="print topology.conf (tree|block) or topology.yaml; no side effects")
    _opt(r, t, "--nodes", env="SLURMPOD_TOPOLOGY_NODES", required=True,
         help="`kubectl get nodes -o json` output")
    _opt(r, t, "--pods", env="SLURMPOD_TOPOLOGY_PODS", default=None,
         help="`kubectl get pods -o json` output: Slurm nodes are its worker pods (default: the Kubernetes nodes)")
    _opt(r, t, "--format", env="SLURMPOD_TOPOLOGY_FORMAT", required=True, choices=["tree", "block", "yaml"],
         help="topology.conf for topology/tree or topology/block, or topology.yaml (Slurm 25.05+)")
    _opt(r, t, "--yaml-plugin", env="SLURMPOD_TOPOLOGY_YAML_PLUGIN", choices=["block", "tree"], default="block",
         help="with --format yaml: the kind of topology it holds")
    _opt(r, t, "--provider", env="SLURMPOD_TOPOLOGY_PROVIDER", default="auto",
         choices=["auto", "generic", "slinky", "topograph", "gke", "eks", "coreweave", "nebius"],
         help="which labels give the placement (auto: the first that places any node)")
    _opt(r, t, "--unplaced", env="SLURMPOD_TOPOLOGY_UNPLACED", choices=["own-block", "error"], default="own-block",
         help="nodes no label places: together in a block named 'unplaced', or an error")
    _opt(r, t, "--slinky-topology", env="SLURMPOD_TOPOLOGY_SLINKY_TOPOLOGY", default=None,
         help="with Slinky annotations (topo:unit,...): the topology whose units to use (default: the first)")
    _opt(r, t, "--block-sizes", env="SLURMPOD_TOPOLOGY_BLOCK_SIZES", default=None,
         help="BlockSizes, e.g. 4,16 (default: the smallest block, doubled while it fits)")
    r.set_defaults(handler=_lazy("slurmpod.topology.render_cli"))


def _policy_commands(sub: Any, t: Twins) -> None:
    policy = sub.add_parser("policy", help="the job_submit policy, without Slurm")
    psub = policy.add_subparsers(dest="policy_command", required=True)
    check = psub.add_parser("check", help="print the decision for one job as JSON (exit 0 accept/modify, 1 reject)")
    _opt(check, t, "--policy", env=wk.ENV_POLICY, default=wk.POLICY_FILE, help="the policy YAML")
    _opt(check, t, "--job", env="SLURMPOD_POLICY_JOB", required=True, help="the job as JSON (a file, or - for stdin)")
    check.set_defaults(handler=_lazy("slurmpod.slurm_plugins.check_cli"))


def _health_commands(sub: Any, t: Twins) -> None:
    """Node health: what Slurm runs as Prolog, Epilog and HealthCheckProgram, and the same checks on demand."""
    check = sub.add_parser("check", help="node health checks")
    csub = check.add_subparsers(dest="check_command", required=True)
    run = csub.add_parser("run", help="run the health checks of one context and print the results")
    _opt(run, t, "--context", env="SLURMPOD_CHECK_CONTEXT", required=True,
         choices=["prolog", "epilog", "periodic", "startup"], help="which checks: those of this context")
    _opt(run, t, "--json", env="SLURMPOD_CHECK_JSON", action="store_true", help="print the results as JSON")
    _opt(run, t, "--act", env="SLURMPOD_CHECK_ACT", action="store_true",
         help="drain or resume this node as the hooks would (default: only report)")
    _opt(run, t, "--config", env=wk.ENV_HEALTH_CONFIG, default=None, help="the health config YAML")
    _opt(run, t, "--state-dir", env=wk.ENV_HEALTH_STATE_DIR, default=None,
         help="where counters are kept between runs")
    _opt(run, t, "--metrics-dir", env=wk.ENV_HEALTH_METRICS_DIR, default=None,
         help="node-exporter textfile dir for the metrics")
    run.set_defaults(handler=_lazy("slurmpod.prolog_epilog.main", "check_run"))
    for name, func, text in (
        ("prolog", "prolog", "Slurm Prolog: health checks before a job; exit 1 drains and requeues"),
        ("epilog", "epilog", "Slurm Epilog: health checks after a job"),
        ("healthcheck", "healthcheck", "Slurm HealthCheckProgram: periodic checks, drain and undrain"),
    ):
        sub.add_parser(name, help=text).set_defaults(handler=_lazy("slurmpod.prolog_epilog.main", func))
    sub.add_parser("task-prolog", help="Slurm TaskProlog: export the pod's task environment, make the job's "
                   "scratch dir").set_defaults(handler=_lazy("slurmpod.prolog_epilog.task_env"))


def build_parser(environ: Mapping[str, str] | None = None) -> tuple[argparse.ArgumentParser, Twins]:
    """The parser and its environment twins (with any problems found in the environment's values)."""
    twins = Twins(os.environ if environ is None else environ)
    parser = argparse.ArgumentParser(prog="slurmpod", description=__doc__.splitlines()[0])
    _opt(parser, twins, "--log-format", env=wk.ENV_LOG_FORMAT, choices=list(LOG_FORMATS), default="text",
         help="log line format")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _host_commands(sub, twins)
    _pod_commands(sub, twins)
    _topology_commands(sub, twins)
    _policy_commands(sub, twins)
    _health_commands(sub, twins)
    return parser, twins


def _fail(exc: errors.SlurmpodError, prefix: str) -> int:
    msg = f"slurmpod: {prefix}{exc}"
    print(msg, file=sys.stderr)
    termination.write(msg)
    return exc.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser, twins = build_parser()
        if twins.problems:
            raise errors.BadInput(twins.problems)
    except errors.BadInput as exc:
        return _fail(exc, "bad input: ")
    args = parser.parse_args(argv)
    logs.setup(args.log_format)
    return _dispatch(args.handler, args)


def _dispatch(handler: Handler, args: argparse.Namespace) -> int:
    """Run a command; the one place that turns errors into exit codes and the termination log."""
    try:
        return handler(args)
    except errors.BadInput as exc:
        return _fail(exc, "bad input: ")
    except errors.SlurmpodError as exc:
        return _fail(exc, "")
    except OSError as exc:  # a read-only or full filesystem, a missing directory: one line, no traceback
        where = f" {exc.filename}" if exc.filename else ""
        return _fail(errors.PermanentError(f"{exc.strerror or exc}{where}"), "")
    except KeyboardInterrupt:
        return 130



def _hook(command: str) -> int:
    """What Slurm runs, without building the whole command tree first: the prolog delays every job, and
    the parser costs it tens of milliseconds. The hooks take no arguments; their one option, the log
    format, comes from its environment twin, validated as the flag would be."""
    fmt = os.environ.get(wk.ENV_LOG_FORMAT, "text")
    if fmt not in LOG_FORMATS:
        return _fail(errors.BadInput.one(wk.ENV_LOG_FORMAT, fmt, f"must be one of {', '.join(LOG_FORMATS)}"),
                     "bad input: ")
    logs.setup(fmt)
    return _dispatch(_lazy("slurmpod.prolog_epilog.main", command), argparse.Namespace(log_format=fmt))


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
