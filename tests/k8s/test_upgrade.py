"""`helm upgrade` with a changed worker image rolls the workers (the StatefulSet controller replaces them
one at a time, highest ordinal first, each after the previous is Ready) and no job is lost: jobs on a
worker being replaced are requeued by its preStop and complete elsewhere or on its replacement.
Ref: https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/#rolling-updates
"""

from __future__ import annotations

import subprocess
import time

from kubekit import (
    KUBELET_REMOVAL_S,
    NAMESPACE,
    READY_TIMEOUT_S,
    RELEASE,
    WORKER_SELECTOR,
    WORKERS,
    Kube,
    note,
    session_values,
)
from waiting import wait_for

from slurmpod_host.kube import release

TASKS = 6
WORKER_GRACE_S = 60  # nodesets.workers.terminationGracePeriodSeconds: the kubelet's bound on preStop + stop
# The roll, one worker after the other: preStop and stop, the old object's removal, the new pod Ready.
ROLL_BOUND_S = WORKERS * (WORKER_GRACE_S + KUBELET_REMOVAL_S) + READY_TIMEOUT_S
JOBS_BOUND_S = 180.0


def _tag(source: str, target: str) -> None:
    subprocess.run(["docker", "tag", source, target], check=True, timeout=60)


def test_helm_upgrade_with_a_new_worker_image_rolls_the_workers_and_loses_no_job(kube: Kube) -> None:
    new_tag = f"{kube.flavor}-k8s-upgrade"
    _tag(f"slurmpod/worker:{kube.flavor}", f"slurmpod/worker:{new_tag}")
    try:
        job = kube.submit("sleep 15; hostname", "--requeue", f"--array=0-{TASKS - 1}", "-o", "/dev/null")
        wait_for("array tasks running", lambda: True if "RUNNING" in kube.exec(
            kube.controller, "squeue", "-h", "-j", str(job), "-o", "%T").stdout else None, 60)
        before = {p["metadata"]["name"]: p["metadata"]["uid"]
                  for p in release.pods(kube.layout, NAMESPACE, WORKER_SELECTOR)}
        started = time.monotonic()
        done = release.helm(kube.layout, kube.chart, "upgrade", RELEASE, str(kube.chart.path), "-n", NAMESPACE,
                            *session_values(kube.flavor), f"--set=nodesets.workers.slurmd.image.tag={new_tag}")
        assert done.returncode == 0, done.stderr

        def rolled() -> bool | None:
            pods = release.pods(kube.layout, NAMESPACE, WORKER_SELECTOR)
            new = [p for p in pods if p["spec"]["containers"][0]["image"] == f"slurmpod/worker:{new_tag}"
                   and release.is_ready(p) and before.get(p["metadata"]["name"]) != p["metadata"]["uid"]]
            return True if len(new) == WORKERS else None
        _, roll_s = wait_for("both workers replaced with the new image and Ready", rolled, ROLL_BOUND_S, poll=1.0)
        note(f"helm upgrade -> both workers rolled and Ready in {roll_s:.1f}s")

        def all_done() -> str | None:
            out = kube.exec(kube.controller, "scontrol", "show", "job", str(job), "-o").stdout
            states = [w.split("=", 1)[1] for line in out.splitlines() for w in line.split()
                      if w.startswith("JobState=")]
            return out if len(states) == TASKS and set(states) == {"COMPLETED"} else None
        wait_for(f"all {TASKS} array tasks COMPLETED", all_done, JOBS_BOUND_S, poll=1.0)
        note(f"all {TASKS} tasks completed {time.monotonic() - started:.1f}s after the upgrade began")
    finally:
        subprocess.run(["docker", "rmi", f"slurmpod/worker:{new_tag}"], capture_output=True, timeout=60, check=False)
