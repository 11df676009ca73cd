"""`slurmpod render node|slurm-conf`: show what a pod would get, with no side effects.

`render node` builds the worker's plan with the same code pod start uses and prints the slurmd
command line that plan execs, so the preview is exactly what the worker runs.
"""

from __future__ import annotations

import argparse
import os
import shlex
import socket
from pathlib import Path

from slurmpod import podinfo, slurm_version
from slurmpod import well_known as wk
from slurmpod.entrypoints import cluster_spec, render, slinky, start


def _env(args: argparse.Namespace) -> dict[str, str]:
    env = dict(os.environ)
    if args.env_file:
        env = podinfo.read_env_file(Path(args.env_file))
    return env


def node(args: argparse.Namespace) -> int:
    env = _env(args)
    env[wk.ENV_PODINFO_DIR] = args.podinfo
    operator = None
    if args.slurmd_args:  # the same completion of the env the entrypoint does for Slinky's pods
        operator = slinky.parse(args.slurmd_args)
        env = slinky.pod_env(env, operator, socket.gethostname())
    settings = start.Settings.from_env(env)
    pod = podinfo.load(env, Path(args.podinfo), optional_dir=operator is not None)
    if operator is not None:
        pod = slinky.with_topology(pod, operator)
    # Auth does not change the node; the preview needs no key secret.
    common = start.common_without_keys(pod)
    part = start.worker_plan(common, env, settings, operator)
    assert part.node is not None  # a worker plan always has its node
    if args.static:
        print(part.node.node_line())
        return 0
    slurmd = next(p for p in part.programs if p.name == "slurmd")
    print(" ".join(shlex.quote(a) for a in slurmd.argv))
    return 0


def slurm_conf(args: argparse.Namespace) -> int:
    env = _env(args)
    spec = cluster_spec.load(Path(args.cluster_spec))
    pod = podinfo.load(env, Path(args.podinfo), require_controller=False)
    print(render.slurm_conf(spec, pod.name, start.accounting_host(env, spec), slurm_version.mpi_plugins()), end="")
    return 0
