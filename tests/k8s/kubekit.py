"""Helpers for the k8s suite: the session's cluster and release, and how to run things in its pods."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from waiting import wait_for

from slurmpod import well_known as wk
from slurmpod_host.kube import api, release
from slurmpod_host.kube.layout import Layout

T = TypeVar("T")
NAMESPACE = "slurmpod"
RELEASE = "slurmpod"
WORKERS = 2
POD_COUNT = 1 + WORKERS + 1  # controller, workers, login
# helm install -> every pod Ready: measured about 15 s here; the bound allows a loaded 2-core CI host.
READY_TIMEOUT_S = 240.0
# The chart's readiness probe (templates/_helpers.tpl slurmpod.probes): the kubelet marks a pod NotReady
# after failureThreshold failures periodSeconds apart, each taking up to timeoutSeconds.
# Ref: https://kubernetes.io/docs/tasks/configure-pod-container/configure-liveness-readiness-startup-probes/#configure-probes
PROBE_PERIOD_S, PROBE_TIMEOUT_S, PROBE_FAILURES = 10, 8, 3
NOT_READY_BOUND_S = PROBE_PERIOD_S * PROBE_FAILURES + PROBE_TIMEOUT_S
WORKER_SELECTOR = f"{wk.LABEL_ROLE}=worker"
# A deleted pod's object stays until the kubelet has removed its dead containers. Kubelet 1.20 removes
# them when it sees the last one die with the pod already terminating, and otherwise at its next
# container garbage collection, once a minute (ContainerGCPeriod, pkg/kubelet/kubelet.go); the status
# manager then deletes the object at its next sync, every 10 s (syncPeriod, pkg/kubelet/status).
# Ref: https://kubernetes.io/docs/concepts/architecture/garbage-collection/#containers-images
KUBELET_REMOVAL_S = 60 + 10 + 10  # the two periods, and 10 s for a loaded 2-core host
# The session release's k8s-sync: short waits, so the NotReady test takes the node controller's grace
# (40 s, kube-controller-manager --node-monitor-grace-period) and little more.
K8S_SYNC_INTERVAL_S, NOT_READY_GRACE_S, READY_SETTLE_S = 2, 5, 5
SESSION_VALUES = [f"--set=k8sSync.intervalSeconds={K8S_SYNC_INTERVAL_S}",
                  f"--set=k8sSync.notReadyGraceSeconds={NOT_READY_GRACE_S}",
                  f"--set=k8sSync.readySettleSeconds={READY_SETTLE_S}",
                  # Both remediations on: their RBAC is the one a real API server must accept.
                  "--set=k8sSync.remediation.restartPod=true", "--set=k8sSync.remediation.replaceNode=true"]


# The autoscaled nodeset `burst` (test_autoscale.py): its values file, and the exporter polling often.
BURST_VALUES = Path(__file__).resolve().parent / "burst-values.yaml"
METRICS_POLL_S = 5


def session_values(flavor: str) -> list[str]:
    return [*release.flavor_values(flavor), *SESSION_VALUES, f"--values={BURST_VALUES}",
            f"--set=nodesets.burst.slurmd.image.tag={flavor}", f"--set=metrics.pollSeconds={METRICS_POLL_S}"]


@dataclass(frozen=True, slots=True)
class Kube:
    layout: Layout
    chart: release.Chart
    flavor: str

    @property
    def controller(self) -> str:
        return f"{RELEASE}-controller-0"

    @property
    def login(self) -> str:
        return f"{RELEASE}-login-0"

    @property
    def workers(self) -> list[str]:
        return [f"{RELEASE}-worker-{i}" for i in range(WORKERS)]

    def kubectl(self, *args: str, timeout: float = 120, check: bool = True,
                stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return api.kubectl(self.layout, *args, timeout=timeout, check=check, stdin=stdin)

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("-n", NAMESPACE, "get", *args, "-o", "json", timeout=30).stdout)

    def exec(self, pod: str, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return self.kubectl("-n", NAMESPACE, "exec", pod, "--", *argv, timeout=timeout, check=False)

    def as_researcher(self, script: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``script`` in bash as the researcher, in their home on the login pod."""
        return self.exec(self.login, "runuser", "-u", wk.DEMO_USER, "--", "bash", "-c",
                         f"cd ~ && {script}", timeout=timeout)

    def scontrol(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.exec(self.controller, "scontrol", *args, timeout=30)

    def direct(self, pod: str, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """``argv`` in the pod's main container through Docker, not the API server: works while the API
        server or the kubelet is stopped (dockershim names containers k8s_<container>_<pod>_<ns>_...)."""
        listed = subprocess.run(["docker", "ps", "-q", "--filter", f"label=io.kubernetes.pod.name={pod}",
                                 "--filter", f"label=io.kubernetes.pod.namespace={NAMESPACE}",
                                 "--filter", "label=io.kubernetes.docker.type=container"],
                                capture_output=True, text=True, timeout=30, check=True)
        ids = listed.stdout.split()
        assert len(ids) == 1, f"{pod}: containers {ids}"
        return subprocess.run(["docker", "exec", ids[0], *argv], capture_output=True, text=True,
                              timeout=timeout, check=False)

    def slurm_node(self, node: str) -> tuple[set[str], str]:
        """The Slurm node's state flags and reason, read in the controller through Docker."""
        done = self.direct(self.controller, "scontrol", "show", "node", node, "--json", timeout=30)
        assert done.returncode == 0, done.stderr
        (n,) = json.loads(done.stdout)["nodes"]
        return {str(s) for s in n.get("state", [])}, str(n.get("reason") or "")

    def node_state(self, node: str) -> set[str]:
        done = self.exec(self.controller, "scontrol", "show", "node", node, "--json", timeout=30)
        if done.returncode != 0:
            return set()
        nodes = json.loads(done.stdout).get("nodes") or []
        return {str(s) for s in nodes[0].get("state", [])} if nodes else set()

    def job(self, job_id: int) -> dict[str, Any]:
        done = self.exec(self.controller, "scontrol", "show", "job", str(job_id), "--json", timeout=30)
        assert done.returncode == 0, done.stderr
        jobs: list[dict[str, Any]] = json.loads(done.stdout)["jobs"]
        return jobs[0]

    def pod_ready(self, pod: str) -> bool | None:
        done = self.kubectl("-n", NAMESPACE, "get", "pod", pod, "-o", "json", timeout=30, check=False)
        if done.returncode != 0:
            return None
        return release.is_ready(json.loads(done.stdout))

    def submit(self, script: str, *sbatch_args: str) -> int:
        """sbatch ``script`` (a bash body) as the researcher; the job id."""
        body = "#!/bin/bash\n" + script + "\n"
        done = self.as_researcher(f"sbatch --parsable {' '.join(shlex.quote(a) for a in sbatch_args)} "
                                  f"<<'EOF'\n{body}EOF")
        assert done.returncode == 0, done.stdout + done.stderr
        return int(done.stdout.strip().split(";")[0])


@dataclass(frozen=True, slots=True)
class PodEnd:
    """One deleted pod: when its container died (as the Docker engine under the kubelet saw it) and when
    its object left the API server; seconds since the delete was sent."""

    died_s: float | None
    exit_code: int | None  # 137 when the kubelet had to SIGKILL it at the grace period's end
    removed_s: float | None
    events: tuple[str, ...]  # the kubelet's events for the pod (Killing, FailedPreStopHook, ...)

    def describe(self) -> str:
        return (f"container died at {self.died_s}s (exit {self.exit_code}), object removed at "
                f"{self.removed_s}s; events: {'; '.join(self.events) or '-'}")


def delete_and_watch(kube: Kube, docker_client: Any, pod: str, grace_s: float) -> PodEnd:
    """``kubectl delete pod`` without waiting; the main container's `die` event from Docker (the API
    server's copy of the pod may never show the container terminated: kubelet 1.20 can delete the object
    before it writes that status), then the object's removal (by uid: a StatefulSet's replacement has
    the same name). Waits at most the grace period for the death and KUBELET_REMOVAL_S after it."""
    uid = kube.get("pod", pod)["metadata"]["uid"]
    listed = docker_client.containers.list(filters={"label": [f"io.kubernetes.pod.uid={uid}",
                                                              "io.kubernetes.docker.type=container"]})
    assert len(listed) == 1, f"{pod}: containers {listed}"
    started = time.time()
    kube.kubectl("-n", NAMESPACE, "delete", "pod", pod, "--wait=false")
    died_s: float | None = None
    exit_code: int | None = None
    for event in docker_client.events(since=int(started) - 1, until=int(started + grace_s) + 2, decode=True,
                                      filters={"container": listed[0].id, "event": "die"}):
        died_s = round(event["timeNano"] / 1e9 - started, 1)
        exit_code = int(event["Actor"]["Attributes"]["exitCode"])
        break
    def removed() -> bool | None:
        done = kube.kubectl("-n", NAMESPACE, "get", "pod", pod, "-o", "jsonpath={.metadata.uid}", timeout=30,
                            check=False)
        return True if (done.returncode == 0 and done.stdout.strip() != uid) or "NotFound" in done.stderr else None
    removed_s: float | None = None
    try:
        wait_for(f"{pod}'s object removed", removed, KUBELET_REMOVAL_S, poll=0.5)
        removed_s = round(time.time() - started, 1)
    except AssertionError:
        pass  # left None: the caller's assertion reports it with the rest
    found = kube.kubectl("-n", NAMESPACE, "get", "events", f"--field-selector=involvedObject.uid={uid}",
                         "-o", "json", timeout=30, check=False)
    items = json.loads(found.stdout).get("items", []) if found.returncode == 0 else []
    events = tuple(f"{e.get('reason')}: {str(e.get('message') or '')[:300]}" for e in items
                   if e.get("reason") in ("Killing", "FailedPreStopHook", "FailedKillPod", "ExceededGracePeriod"))
    return PodEnd(died_s, exit_code, removed_s, events)


def note(text: str) -> None:
    sys.stderr.write(f"[k8s] {text}\n")
