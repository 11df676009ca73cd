"""k8s-sync's "replace node" remediation on the real control plane, from a fake-GPU fault.

A small release of its own (one controller, one worker, no login pod; `k8sSync.remediation.replaceNode`
on) leaves the session's release as it is. Its worker runs the production worker image with the C fakes
(tests/fakes) copied in as the driver's libraries at pod start, from the release's /home volume (a
hostPath PersistentVolume this harness made, written here from the host), so NVML sees 8 GPUs. An XID 79
(GPU fallen off the bus: replace the node) under a running job: the periodic check drains the worker and
requeues the job; the node is tainted once the worker is idle, and the taint is lifted once the worker
is back in Slurm service. That no taint comes while a job still runs is a unit table
(tests/unit/entrypoints/k8s_sync/test_decide.py). The XID is raised as the driver raises it: an NVML event
for the event sets registered then, and a kernel log record (a file next to the state file, which the
worker's health config names as its kernel log), which is what the check started afterwards reads.
Ref: https://docs.nvidia.com/deploy/xid-errors/index.html
"""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import gpu_libs
from kubekit import K8S_SYNC_INTERVAL_S, Kube, note, session_values
from waiting import wait_for

from slurmpod import well_known as wk
from slurmpod_host.kube import release, volumes
from slurmpod_host.kube.layout import NODE_NAME

RELEASE = NAMESPACE = "gpu"
WORKER = f"{RELEASE}-worker-0"
CONTROLLER = f"{RELEASE}-controller-0"
GPUS = 8
FAKE_DIR = "/home/.slurmpod-fakegpu"  # in the pod; the same directory of the volume on the host
HEALTHY = f"gpus={GPUS}\nnvlinks=4\nname=NVIDIA A100-SXM4-80GB\naffinity=online\n"
SYSTEM_LIBS = "/usr/lib/x86_64-linux-gnu"
DEVICES = "for i in $(seq 0 15); do ln -sfn /dev/null /dev/nvidia$i; done"
KERNEL_LOG = f"{FAKE_DIR}/state/{WORKER}.kmsg"  # in the pod
START = (f"cp {FAKE_DIR}/lib/* {SYSTEM_LIBS}/ && ldconfig && {DEVICES} && exec slurmpod entrypoint worker")
# No worker at install: the worker's command is patched in first and the set then scaled to one, so only
# the fake-GPU pod ever starts (a patch of a running set would start, drain and stop a worker first).
VALUES = ["--set=nodesets.workers.replicas=0", "--set=loginsets.login.enabled=false",
          "--set=k8sSync.remediation.replaceNode=true",
          # The session's release holds most of the node's 2 CPUs.
          "--set=controller.slurmctld.resources.requests.cpu=50m",
          "--set=nodesets.workers.slurmd.resources.requests.cpu=50m"]
READY_S = 240.0
TAINT_BOUND_S = 3 * K8S_SYNC_INTERVAL_S + 10
# Requeue of a running job: its steps signalled, KillWait (30 s) before SIGKILL, the epilog, then PENDING.
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_KillWait
REQUEUE_BOUND_S = 30 + 60 + 10


def _in(kube: Kube, pod: str, *argv: str, timeout: float = 60) -> Any:
    return kube.kubectl("-n", NAMESPACE, "exec", pod, "--", *argv, timeout=timeout, check=False)


def _node(kube: Kube) -> tuple[set[str], str, str]:
    done = _in(kube, CONTROLLER, "scontrol", "show", "node", WORKER, "--json")
    assert done.returncode == 0, done.stderr
    (n,) = json.loads(done.stdout)["nodes"]
    return {str(s) for s in n.get("state", [])}, str(n.get("reason") or ""), str(n.get("gres") or "")


def _taints(kube: Kube) -> list[dict[str, str]]:
    node = json.loads(kube.kubectl("get", "node", NODE_NAME, "-o", "json").stdout)
    return [t for t in node["spec"].get("taints") or [] if t["key"] == wk.TAINT_HARDWARE_FAULT]


def _condition(kube: Kube) -> dict[str, str] | None:
    node = json.loads(kube.kubectl("get", "node", NODE_NAME, "-o", "json").stdout)
    found = [c for c in node["status"].get("conditions") or [] if c["type"] == wk.CONDITION_HARDWARE_FAULT]
    return found[0] if found else None


def _home(kube: Kube) -> Path:
    """The host directory behind the release's /home claim."""
    pvs = kube.kubectl("get", "pv", "-l", volumes.LABEL, "-o", "json").stdout
    (pv,) = [v for v in json.loads(pvs)["items"]
             if (v["spec"]["claimRef"]["namespace"], v["spec"]["claimRef"]["name"]) == (NAMESPACE, f"{RELEASE}-home")]
    path = Path(pv["spec"]["hostPath"]["path"])
    path.mkdir(parents=True, exist_ok=True)
    return path


def _state(home: Path, text: str) -> Path:
    return gpu_libs.write_state(home / ".slurmpod-fakegpu" / "state" / WORKER, text)


def _kernel_log(home: Path) -> Path:
    """KERNEL_LOG, seen from the host."""
    return home / ".slurmpod-fakegpu" / "state" / f"{WORKER}.kmsg"


def _point_kernel_log_at_the_volume(kube: Kube) -> None:
    """The worker's health config with its kernel log at KERNEL_LOG (replaced at once, as the pod wrote it)."""
    shown = _in(kube, WORKER, "cat", wk.HEALTH_CONFIG)
    assert shown.returncode == 0, shown.stderr
    doc = json.dumps({**json.loads(shown.stdout), "kernel_log": KERNEL_LOG}, sort_keys=True)
    wrote = _in(kube, WORKER, "sh", "-c", f"printf '%s\\n' {shlex.quote(doc)} > {wk.HEALTH_CONFIG}.new && "
                f"mv {wk.HEALTH_CONFIG}.new {wk.HEALTH_CONFIG}")
    assert wrote.returncode == 0, wrote.stderr


def _why_not_up(kube: Kube) -> str:
    """What a wait for the worker that ran out shows: pods, the namespace's last events, the node."""
    pods = kube.kubectl("-n", NAMESPACE, "get", "pods", "-o", "wide", timeout=30, check=False)
    events = kube.kubectl("-n", NAMESPACE, "get", "events", "--sort-by=.lastTimestamp", timeout=30, check=False)
    logs = kube.kubectl("-n", NAMESPACE, "logs", WORKER, "--tail=30", timeout=30, check=False)
    node = _in(kube, CONTROLLER, "scontrol", "show", "node", WORKER)
    return "\n".join([pods.stdout + pods.stderr, "\n".join(events.stdout.splitlines()[-20:]),
                      logs.stdout + logs.stderr, node.stdout + node.stderr])


@pytest.fixture(scope="module")
def gpu(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kube, Path]]:
    chart = release.Chart(kube.chart.repo, RELEASE, NAMESPACE)
    try:
        done = release.install(kube.layout, chart, [*session_values(kube.flavor), *VALUES])
        assert done.returncode == 0, done.stderr
        home = _home(kube)
        built = gpu_libs.build(tmp_path_factory.mktemp("fakegpu"), f"{FAKE_DIR}/state")
        lib = home / ".slurmpod-fakegpu" / "lib"
        lib.mkdir(parents=True, exist_ok=True)
        (home / ".slurmpod-fakegpu" / "state").mkdir(exist_ok=True)
        for f in built.iterdir():
            shutil.copy2(f, lib / f.name)
        _state(home, HEALTHY)
        patch = [{"op": "replace", "path": "/spec/template/spec/containers/0/command", "value": ["sh", "-c"]},
                 {"op": "replace", "path": "/spec/template/spec/containers/0/args", "value": [START]},
                 {"op": "replace", "path": "/spec/replicas", "value": 1}]
        kube.kubectl("-n", NAMESPACE, "patch", "statefulset", f"{RELEASE}-worker", "--type=json",
                     "-p", json.dumps(patch))

        def fake_gpus() -> bool | None:
            pods = release.pods(kube.layout, NAMESPACE, f"{wk.LABEL_ROLE}=worker")
            ok = [p for p in pods if release.is_ready(p) and p["spec"]["containers"][0]["command"] == ["sh", "-c"]]
            return True if ok and "gpu" in _node(kube)[2] else None
        try:
            _, waited = wait_for("the worker up with 8 fake GPUs", fake_gpus, READY_S, poll=1.0)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{_why_not_up(kube)}") from None
        note(f"release {RELEASE}: fake-GPU worker registered in {waited:.1f}s ({_node(kube)[2]})")
        gpu_libs.replace_file(_kernel_log(home), "")
        _point_kernel_log_at_the_volume(kube)
        yield kube, home
    finally:
        release.helm(kube.layout, chart, "uninstall", RELEASE, "-n", NAMESPACE)
        kube.kubectl("-n", NAMESPACE, "delete", "pods", "--all", "--grace-period=0", "--force", check=False)
        kube.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)
        kube.kubectl("taint", "node", NODE_NAME, f"{wk.TAINT_HARDWARE_FAULT}-", check=False)


def test_replace_node_taints_only_once_the_job_is_requeued_then_lifts(gpu: tuple[Kube, Path]) -> None:
    kube, home = gpu
    submitted = _in(kube, CONTROLLER, "runuser", "-u", wk.DEMO_USER, "--", "sbatch", "--parsable", "--requeue",
                    "-o", "/dev/null", "--wrap", "sleep 600")
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip().split(";")[0]
    wait_for(f"job {job} running", lambda: True if _in(kube, CONTROLLER, "squeue", "-h", "-j", job, "-o", "%T")
             .stdout.strip() == "RUNNING" else None, 60)
    gpu_libs.raise_xid(_state(home, HEALTHY), _kernel_log(home), 1, 79)
    # The periodic check (what slurmd's HealthCheckProgram runs) drains for a replace-node fault and
    # requeues the batch job on the node; only then, the worker idle, is the node tainted.
    _in(kube, WORKER, "slurmpod", "check", "run", "--context", "periodic", "--act")
    flags, reason, _ = _node(kube)
    assert "DRAIN" in flags and reason.startswith("slurmpod: xid: replace node: "), (flags, reason)
    # A requeued job is COMPLETING until slurmd has ended its steps on the node, then PENDING.
    states: list[str] = []

    def requeued() -> bool | None:
        states.append(_in(kube, CONTROLLER, "squeue", "-h", "-j", job, "-o", "%T %r").stdout.strip())
        return True if states[-1].startswith("PENDING") else None
    try:
        wait_for(f"job {job} requeued", requeued, REQUEUE_BOUND_S)
    except AssertionError:
        raise AssertionError(f"job {job} not requeued by the check: {sorted(set(states))}") from None
    _, waited = wait_for("the node tainted", lambda: _taints(kube) or None, TAINT_BOUND_S)
    note(f"XID 79 under job {job}: requeued by the check, node tainted {waited:.1f}s later")
    assert _taints(kube) == [{"key": wk.TAINT_HARDWARE_FAULT, "value": "xid", "effect": "NoSchedule"}]
    cond = _condition(kube)
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "Xid"), cond
    assert cond["message"].startswith(f"{NAMESPACE}/{WORKER}: slurmpod: xid: replace node: ")
    events = json.loads(kube.kubectl("get", "events", "-n", "default", "-o", "json",
                                     f"--field-selector=involvedObject.name={NODE_NAME}").stdout)["items"]
    assert any(e["reason"] == "SlurmpodReplaceNode" for e in events)
    # Repaired (here: the fault cleared and the drain lifted by hand, as after a GPU reset): lifted.
    _state(home, HEALTHY)
    gpu_libs.replace_file(_kernel_log(home), "")  # a worker started again reads its kernel log from the start
    _in(kube, CONTROLLER, "scancel", job)
    _in(kube, CONTROLLER, "scontrol", "update", f"nodename={WORKER}", "state=resume")
    wait_for("the taint lifted", lambda: True if not _taints(kube) else None, TAINT_BOUND_S)
    cond = _condition(kube)
    assert cond is not None and cond["status"] == "False", cond
