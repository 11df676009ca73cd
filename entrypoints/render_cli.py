"""`slurmpod render node|slurm-conf`: show what a pod would get, with no side effects.

`render node` builds the worker's plan with the same code pod start uses and prints the slurmd
command line that plan execs, so the preview is exactly what the worker runs.
"""

from __future__ import annotations

import argparse
import shlex
import socket
from collections.abc import Mapping
from pathlib import Path

from slurmpod import podinfo, slurm_version
from slurmpod import well_known as wk
from slurmpod.entrypoints import cluster_spec, inputs, render, slinky
from slurmpod.entrypoints.roles import worker
from slurmpod.entrypoints.startplan import Common


def _env(args: argparse.Namespace, env: Mapping[str, str]) -> dict[str, str]:
    if args.env_file:
        return podinfo.read_env_file(Path(args.env_file))
    return dict(env)


def node(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    given = _env(args, env)
    given[wk.ENV_PODINFO_DIR] = args.podinfo
    operator = None
    if args.slurmd_args:  # the same completion of the env the entrypoint does for Slinky's pods
        operator = slinky.parse(args.slurmd_args)
        given = slinky.pod_env(given, operator, socket.gethostname())
    # Auth does not change the node; the preview needs no key secret.
    inp = inputs.load("worker", given, inputs.Settings.from_env(given), operator, with_auth=False)
    common = Common(inp.pod, inp.auth, (), (), ())
    part = worker.build(inp, common, inputs.Adapters())
    assert part.node is not None  # a worker plan always has its node
    if args.static:
        print(part.node.node_line())
        return 0
    slurmd = next(p for p in part.programs if p.name == "slurmd")
    print(" ".join(shlex.quote(a) for a in slurmd.argv))
    return 0


def slurm_conf(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    given = _env(args, env)
    spec = cluster_spec.load(Path(args.cluster_spec))
    pod = podinfo.load(given, Path(args.podinfo), require_controller=False)
    print(render.slurm_conf(spec, pod.name, inputs.accounting_host(given, spec), slurm_version.mpi_plugins(),
                            slurm_version.detect(given)), end="")
    return 0
