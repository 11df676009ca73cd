"""`slurmpod k8s build|up|down|status|prepare`: a local single-node Kubernetes 1.20.2 to try the chart on.

Exit codes: 0 success, 1 it did not come up / something was left behind (printed), 2 bad input.
"""

from __future__ import annotations

import argparse
import sys

from slurmpod_host.cluster import runtime
from slurmpod_host.images.build import find_repo
from slurmpod_host.kube import build, lifecycle, release
from slurmpod_host.kube.layout import Layout


def main(args: argparse.Namespace) -> int:
    layout = Layout.from_env()
    command = args.k8s_command
    if command == "build":
        build.ensure(layout, sys.stdout)
        return 0
    if command == "status":
        return 0 if lifecycle.status(layout, sys.stdout) else 1
    if command == "prepare":
        chart = release.Chart(find_repo(), args.release, args.namespace)
        release.prepare(layout, chart, [f"--values={v}" for v in args.values or []])
        print(f"k8s: namespace {args.namespace}, Secret {args.release}-munge and volumes ready: "
              f"helm install {args.release} {chart.path} -n {args.namespace}")
        return 0
    client = runtime.connect()
    if command == "up":
        lifecycle.up(layout, client, sys.stdout)
    else:
        lifecycle.down(layout, client, sys.stdout)
    return 0
