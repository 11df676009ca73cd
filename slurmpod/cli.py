"""The `slurmpod` command. It only parses, builds settings and calls the library.

Every option has an environment twin (``--flavor`` <-> ``SLURMPOD_FLAVOR``); the flag wins.
Exit codes: 0 success, 1 check/policy/runtime failure, 2 bad input.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from slurmpod import errors, logs, termination

log = logging.getLogger(__name__)

Handler = Callable[[argparse.Namespace], int]


def _env_name(flag: str) -> str:
    return "SLURMPOD_" + flag.lstrip("-").replace("-", "_").upper()


def _opt(p: argparse.ArgumentParser, flag: str, **kw: Any) -> None:
    """Add an option whose default comes from its SLURMPOD_ environment twin."""
    env = _env_name(flag)
    if env in os.environ:
        raw = os.environ[env]
        if kw.get("action") == "append":
            kw["default"] = [v for v in raw.split(",") if v]
        elif kw.get("action") == "store_true":
            kw["default"] = raw.lower() in {"1", "true", "yes"}
        else:
            kw["default"] = kw.get("type", str)(raw)
    kw["help"] = (kw.get("help", "") + f" [env {env}]").strip()
    p.add_argument(flag, **kw)


def _lazy(module: str, func: str = "main") -> Handler:
    """Import the implementing module only when its command runs: keeps pod start fast."""

    def run(args: argparse.Namespace) -> int:
        fn: Handler = getattr(importlib.import_module(module), func)
        return fn(args)

    return run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="slurmpod", description=__doc__.splitlines()[0])
    _opt(parser, "--log-format", choices=["text", "json"], default="text")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    # images
    images = sub.add_parser("images", help="build and list the container images")
    isub = images.add_subparsers(dest="images_command", required=True)
    b = isub.add_parser("build", help="build images (base made with debootstrap when missing)")
    _opt(b, "--flavor", choices=["24.11", "26.05"], default="24.11")
    _opt(
        b,
        "--role",
        action="append",
        choices=["base", "controller", "worker", "login"],
        help="roles to build (repeatable; default: all)",
    )
    _opt(b, "--base-image", default=None, help="start from this registry image instead of debootstrap")
    _opt(b, "--mirror", default=None, help="Debian mirror (default: the host's apt sources)")
    _opt(b, "--log-file", default=None, help="full build log (default build/images-FLAVOR.log)")
    _opt(b, "--values-file", default=None, help="write the built image ids into this Helm values file")
    b.set_defaults(handler=_lazy("slurmpod.images.build"))
    ls = isub.add_parser("list", help="list built slurmpod images")
    ls.set_defaults(handler=_lazy("slurmpod.images.build", "list_main"))

    # cluster
    cluster = sub.add_parser("cluster", help="pods emulated with Docker, from the manifests in deploy/")
    csub = cluster.add_subparsers(dest="cluster_command", required=True)
    up = csub.add_parser("up", help="start controller, N workers and a login pod; wait for IDLE")
    _opt(up, "--flavor", choices=["24.11", "26.05"], default="24.11")
    _opt(up, "--workers", type=int, default=2)
    _opt(up, "--timeout", type=float, default=120.0, help="seconds to wait for every worker to be IDLE")
    _opt(up, "--auth", choices=["munge", "slurm"], default="munge",
         help="AuthType: munge (munged in every pod) or slurm (auth/slurm with a generated slurm.key)")
    for c in (
        up,
        csub.add_parser("down", help="remove every container, network and volume"),
        csub.add_parser("status", help="pods and sinfo"),
    ):
        _opt(c, "--name", default="slurmpod", help="cluster name (prefix of every Docker object)")
        c.set_defaults(handler=_lazy("slurmpod.cluster.cli"))

    demo = sub.add_parser("demo", help="build if needed, cluster up, run the demo jobs")
    _opt(demo, "--flavor", choices=["24.11", "26.05"], default="24.11")
    _opt(demo, "--workers", type=int, default=2)
    _opt(demo, "--name", default="slurmpod")
    demo.set_defaults(handler=_lazy("slurmpod.cluster.demo"))

    # pod runtime
    ep = sub.add_parser("entrypoint", help="pod start: render config, then exec supervisord")
    ep.add_argument("role", help="controller | worker | login")
    _opt(ep, "--dry-run", action="store_true", help="render and print the plan; start nothing")
    ep.set_defaults(handler=_lazy("slurmpod.entrypoints.start"))

    render = sub.add_parser("render", help="show what a pod would get; no side effects")
    rsub = render.add_subparsers(dest="render_command", required=True)
    rn = rsub.add_parser("node", help="print the slurmd invocation for a worker")
    _opt(rn, "--podinfo", required="SLURMPOD_PODINFO" not in os.environ, help="dir with labels, annotations")
    _opt(rn, "--env-file", default=None, help="KEY=VALUE lines standing in for the pod's env")
    _opt(rn, "--static", action="store_true", help="print a static NodeName= line instead")
    rn.set_defaults(handler=_lazy("slurmpod.entrypoints.render_cli", "node"))
    rc = rsub.add_parser("slurm-conf", help="print slurm.conf for a controller")
    _opt(rc, "--cluster-spec", required="SLURMPOD_CLUSTER_SPEC" not in os.environ)
    _opt(rc, "--podinfo", required="SLURMPOD_PODINFO" not in os.environ)
    _opt(rc, "--env-file", default=None)
    rc.set_defaults(handler=_lazy("slurmpod.entrypoints.render_cli", "slurm_conf"))

    probe = sub.add_parser("probe", help="Kubernetes probes")
    probe.add_argument("kind", choices=["ready", "live"])
    _opt(probe, "--timeout", type=float, default=5.0)
    probe.set_defaults(handler=_lazy("slurmpod.entrypoints.probes"))

    pre = sub.add_parser("prestop", help="drain this node, requeue its jobs, stop slurmd")
    _opt(pre, "--grace", type=float, default=None, help="seconds (default: SLURMPOD_GRACE_SECONDS or 30)")
    pre.set_defaults(handler=_lazy("slurmpod.entrypoints.prestop"))
    daemon = sub.add_parser("daemon", help="helpers supervisord runs beside the Slurm daemons")
    daemon.add_argument("task", choices=["node-reaper", "reconcile-node"])
    _opt(
        daemon,
        "--timeout",
        type=float,
        default=300.0,
        help="node-reaper: seconds a dynamic node may not respond before deletion; "
        "reconcile-node: seconds to wait for registration",
    )
    _opt(daemon, "--interval", type=float, default=15.0, help="node-reaper: seconds between passes")
    _opt(daemon, "--expect", default=None, help="reconcile-node: the --conf string this pod registers with")
    daemon.set_defaults(handler=_lazy("slurmpod.entrypoints.daemons"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logs.setup(args.log_format)
    handler: Handler = args.handler
    try:
        return handler(args)
    except errors.BadInput as exc:
        msg = f"slurmpod: bad input: {exc}"
        print(msg, file=sys.stderr)
        termination.write(msg)
        return exc.exit_code
    except errors.SlurmpodError as exc:
        msg = f"slurmpod: {exc}"
        print(msg, file=sys.stderr)
        termination.write(msg)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
