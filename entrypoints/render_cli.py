"""`slurmpod render node|slurm-conf`: show what a pod would get, with no side effects."""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from slurmpod import podinfo, slurm_version
from slurmpod import well_known as wk
from slurmpod.entrypoints import cluster_spec, gpus, hardware, nodespec, programs, render


def _env(args: argparse.Namespace) -> dict[str, str]:
    env = dict(os.environ)
    if args.env_file:
        env = podinfo.read_env_file(Path(args.env_file))
    return env


def node(args: argparse.Namespace) -> int:
    env = _env(args)
    pod = podinfo.load(env, Path(args.podinfo))
    hw = hardware.probe(Path(env.get("SLURMPOD_HW_ROOT", "/")), gpus.inventory())
    spec = nodespec.build(pod, hw, slurm_version.detect(env), env.get(wk.ENV_NODESET) or None)
    if args.static:
        print(spec.node_line())
        return 0
    server = programs.conf_server(pod.controller)
    argv = ["slurmd", "-D", "-Z", "--conf-server", server, "--conf", spec.conf_string()]
    print(" ".join(shlex.quote(a) for a in argv))
    return 0


def slurm_conf(args: argparse.Namespace) -> int:
    env = _env(args)
    spec = cluster_spec.load(Path(args.cluster_spec))
    pod = podinfo.load(env, Path(args.podinfo), require_controller=False)
    print(render.slurm_conf(spec, pod.name), end="")
    return 0
