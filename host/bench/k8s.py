"""The chart on the local Kubernetes 1.20.2 (slurmpod_host.kube), beside the emulator's figures of the
same run: `helm install` to every pod Ready (against the emulator's `cluster up` to every worker IDLE),
and a worker's pod creation to its Slurm node IDLE (against the emulator's pod start to IDLE).

Times are on the host's clock, which the pods share: a pod's creation is when the API first lists the
replacement's new uid (polled every 50 ms), IDLE is when a watcher in the controller pod first sees it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from slurmpod.errors import TransientError
from slurmpod_host.bench.report import Figure, Report, median
from slurmpod_host.kube import api, lifecycle, release
from slurmpod_host.kube.layout import Layout

NS = "slurmpod"
PODS = 4  # controller, 2 workers, login
READY_TIMEOUT_S = 300.0
IDLE_TIMEOUT_S = 120.0
POLL_S = 0.05


def _uid(admin: api.Client, pod: str) -> str | None:
    try:
        obj = admin.get(f"/api/v1/namespaces/{NS}/pods/{pod}")
    except TransientError:  # not there yet (404) is the expected answer while it is replaced
        return None
    return None if obj["metadata"].get("deletionTimestamp") else str(obj["metadata"]["uid"])


def _creation_to_idle(layout: Layout, admin: api.Client, controller: str, worker: str) -> float:
    old = _uid(admin, worker)
    api.kubectl(layout, "-n", NS, "delete", "pod", worker, "--wait=false")
    deadline = time.monotonic() + READY_TIMEOUT_S
    while _uid(admin, worker) in (None, old):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{worker}: no replacement pod after {READY_TIMEOUT_S} s")
        time.sleep(POLL_S)
    created = time.time()
    watch = (f"until sinfo -h -n {worker} -t idle -o %n 2>/dev/null | grep -qx {worker}; do sleep 0.05; done; "
             "date +%s.%N")
    done = api.kubectl(layout, "-n", NS, "exec", controller, "--", "timeout", str(int(IDLE_TIMEOUT_S)), "bash", "-c",
                       watch, timeout=IDLE_TIMEOUT_S + 30)
    return float(done.stdout.strip()) - created


def figures(report: Report, repo: Path, flavor: str, trials: int, *, emulator_up_s: float | None,
            emulator_idle_s: float | None, client: Any) -> None:
    layout = Layout.from_env()
    chart = release.Chart(repo)
    lifecycle.down(layout, client, sys.stderr)
    up = lifecycle.up(layout, client, sys.stderr)
    report.notes.append(f"k8s up (1.20.2, cached build) took {up.seconds:.1f} s")
    try:
        values = release.flavor_values(flavor)
        release.prepare(layout, chart, values)
        started = time.monotonic()
        done = release.helm(layout, chart, "install", chart.release, str(chart.path), "-n", NS, *values)
        if done.returncode != 0:
            raise subprocess.CalledProcessError(done.returncode, "helm install", done.stdout, done.stderr)
        release.wait_ready(layout, NS, PODS, READY_TIMEOUT_S)
        install_s = time.monotonic() - started
        report.add(Figure("k8s 1.20.2: helm install to all 4 pods Ready", "s", install_s, emulator_up_s,
                          "emulator: cluster up to every worker IDLE, same run"))
        admin = api.Client.from_kubeconfig(layout.kubeconfig)
        samples = []
        for i in range(trials):
            worker = f"{chart.release}-worker-{i % 2}"
            samples.append(_creation_to_idle(layout, admin, f"{chart.release}-controller-0", worker))
            release.wait_ready(layout, NS, PODS, READY_TIMEOUT_S)
        report.add(Figure(f"k8s 1.20.2: worker pod creation to Slurm node IDLE (median of {trials})", "s",
                          median(samples), emulator_idle_s, "emulator: worker pod start to IDLE, same run",
                          samples=tuple(samples)))
    finally:
        lifecycle.down(layout, client, sys.stderr)
