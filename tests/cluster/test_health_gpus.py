"""The GPU faults end to end on fake-GPU workers: drain with the right reason, requeue, return to service.

Both workers run the production worker image with the C fakes (tests/fakes) copied in as the driver's
libraries at pod start (healthkit.fake_gpu_patch); each reads its state file on the shared /home, which
the tests rewrite to inject a fault. One worker is faulty at a time; the other is the healthy one the
job must end on. Every wait is bounded by healthkit's worst cases and printed.

The pods start with 8 fake GPUs and register Gres=gpu:8 (the controller's gres.conf says AutoDetect=nvml;
tests/cluster/test_gres.py). The fake GPUs are an A100: no all-reduce floor for the fake NCCL's timing
on this loaded host to fall under (the fixture lowers it anyway once the pods run).

A fatal XID is latched until the GPU is reset (prolog_epilog/checks/gpu/xid.py): clean periodic runs do
not lift it, so these faults are cleared the way an operator would, by restarting the pod.
An XID is raised as the driver raises it: an NVML event (the state file's xid.SEQ line), which reaches only
event sets registered at the time, and a kernel log record, which is what a prolog or periodic check
starting later reads. Each pod's health config points its kernel log at a file next to its state file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import healthkit
import pytest
from clusterkit import IDLE_TIMEOUT_S, Session, node, restore_pod, wait_for, wait_idle
from fakes import gpu_libs
from healthkit import (
    CLEAN_RUNS,
    DRAIN_WORST_S,
    FAKE_STATE_DIR,
    JOB_WORST_S,
    SYSTEM_LIBS,
    UNDRAIN_WORST_S,
    drained_with,
)

from slurmpod.well_known import HEALTH_CONFIG

# Ten of the twelve faults fail a prolog, and slurmctld holds each requeued job for AuthInfo cred_expire
# (120 s by default) before it may start again: this module's cluster sets CRED_EXPIRE_S instead, which
# still leaves the 20 s prolog deadline room. `make test-faults` runs it (not `make test`: CI's budget).
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_cred_expire
pytestmark = [pytest.mark.docker, pytest.mark.cluster, pytest.mark.faults]

GPUS = 8
CRED_EXPIRE_S = 30
# A requeued job: the hold above, then the next main scheduling pass (sched_interval, 60 s by default) or
# backfill pass (bf_interval, 30 s), twice over for a pass that comes just before the hold ends, then its run.
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_sched_interval
REQUEUED_WORST_S = CRED_EXPIRE_S + 2 * 60.0 + 30.0
HEALTHY = f"gpus={GPUS}\nnvlinks=4\nname=NVIDIA A100-SXM4-80GB\naffinity=online\n"


@dataclass(frozen=True, slots=True)
class Fault:
    state: str  # lines added to the healthy state file ("" for faults injected otherwise)
    reason: str | None  # the drain reason's start; None: a warning, the node stays in service
    in_prolog: bool = True  # a prolog check sees it (else only the periodic run, after the job may have run)
    needs_reset: bool = False  # a fatal XID: cleared by a pod restart (a GPU reset), not by clean runs
    xid: tuple[int, int] | None = None  # (gpu, xid) raised with the fault


FAULTS = {
    "xid-48": Fault("", "slurmpod: xid: ", needs_reset=True, xid=(0, 48)),
    "xid-79": Fault("", "slurmpod: xid: ", needs_reset=True, xid=(1, 79)),
    "xid-94": Fault("", None, xid=(2, 94)),  # contained ECC error: NVIDIA's catalog says restart the app only
    "xid-119": Fault("", "slurmpod: xid: ", needs_reset=True, xid=(3, 119)),
    "ecc-uncorrectable": Fault("gpu.0.ecc.volatile.uncorrected=2\n", "slurmpod: ecc: "),
    "remap-pending": Fault("gpu.1.remap.pending=1\n", "slurmpod: remap: "),
    "remap-failure": Fault("gpu.1.remap.failure=1\n", "slurmpod: remap: "),
    "nvlink-down": Fault("gpu.2.nvlink.1.down=1\n", "slurmpod: nvlink: ", in_prolog=False),
    "gpu-missing": Fault(f"gpus={GPUS - 1}\n", "slurmpod: gpu-count: "),
    "memory-held": Fault("gpu.0.procs=4242:2147483648\ngpu.0.mem_used=2147483648\n", "slurmpod: gpu-memory: "),
    "nvml-hang": Fault("hang=nvmlDeviceGetCount\n", "slurmpod: gpu-count: "),
    "nvml-missing": Fault("", "slurmpod: gpu-count: "),  # the library moved away in the pod
}
NVML = f"{SYSTEM_LIBS}/libnvidia-ml.so.1"


def _kernel_log(pod: str) -> str:
    """The file the pod's health config reads as its kernel log (the fake driver's records)."""
    return f"{FAKE_STATE_DIR}/{pod}.kmsg"


def _state(s: Session, pod: str, text: str, xid: tuple[int, int] | None = None) -> None:
    """The pod's fake GPUs as ``text`` says, and with ``xid`` (gpu, xid) raised now: its NVML event and its
    kernel log record. Without one, the kernel log is emptied: a pod restarted next starts its reading of
    the log from the first record, and an old record there would latch the new pod again."""
    record = ""
    if xid is not None:
        seq = time.time_ns() // 1000  # grows across faults, as the kernel's record numbers do
        text += gpu_libs.xid_line(*xid, seq)
        record = gpu_libs.kmsg_record(*xid, seq)
    healthkit.write_file(s, s.cluster.login, _kernel_log(pod), record)
    healthkit.write_file(s, s.cluster.login, f"{FAKE_STATE_DIR}/{pod}", text)


def _configure(s: Session, worker: str) -> None:
    """The pod's health.json (written by its entrypoint at start) with the tests' settings."""
    doc = {**healthkit.health_config(s, worker), "expected_gpus": GPUS, "kernel_log": _kernel_log(worker)}
    # The fake NCCL's bandwidth is a nanosleep inside the check's Python loop: on this loaded host it
    # measures the loop, not a link (unit tests cover the floor). Keep it from draining healthy pods.
    healthkit.write_health_config(s, worker, {**doc, "clean_runs_to_undrain": CLEAN_RUNS,
                                              "thresholds": {"allreduce_busbw_min_gbps": 100}})


@pytest.fixture(scope="module")
def fake_gpus(session: Session, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with (healthkit.short_interval(session, cred_expire_s=CRED_EXPIRE_S),
          healthkit.fakes_installed(session, tmp_path_factory.mktemp("fakegpu"))):
        for worker in session.cluster.workers:
            _state(session, worker, HEALTHY)
            healthkit.replace_worker(session, worker, healthkit.fake_gpu_patch())
        for worker in session.cluster.workers:
            wait_idle(session, worker)
            n = node(session, worker)
            assert n is not None and healthkit.gpu_count(n.gres) == GPUS, n
            _configure(session, worker)
        try:
            yield
        finally:
            # Back to the plain template while the short interval holds and the fakes are still in place:
            # a periodic run without the fake libraries would drain the pods, and at 300 s nothing lifts it.
            for worker in session.cluster.workers:
                healthkit.resume(session, worker)  # a failed case's drain: its record would outlive the pod
                restore_pod(session, worker)


@pytest.mark.parametrize("fault", list(FAULTS.values()), ids=list(FAULTS))
def test_fault_drains_requeues_and_returns(session: Session, fake_gpus: None, fault: Fault,
                                           request: pytest.FixtureRequest) -> None:
    faulty, healthy = session.cluster.workers
    name = request.node.callspec.id
    healthkit.drain_as_admin(session, healthy, "test: jobs kept off until the fault is in")
    try:
        held = session.as_researcher("sbatch", "--parsable", "-H", "-o", "/dev/null", "--wrap", "hostname")
        assert held.code == 0, held.stderr
        job = int(held.stdout.strip().split(";")[0])
        if name == "nvml-missing":
            assert session.root_in(faulty, "sh", "-c", f"mv {NVML} {NVML}.away && ldconfig").code == 0
        else:
            _state(session, faulty, HEALTHY + fault.state, fault.xid)
        healthkit.scontrol(session, "release", str(job))
        if fault.reason is None:
            done, waited = healthkit.wait_job_done(session, job)
            print(f"{name}: job done in {waited:.1f}s (bound {JOB_WORST_S:.0f}s)")
            assert (done.state, done.batch_host) == ("COMPLETED", faulty), done
            n = node(session, faulty)
            assert n is not None and not n.drained, n
            return
        _, waited = wait_for(f"{faulty} drained ({name})", lambda: drained_with(session, faulty, fault.reason or ""),
                             DRAIN_WORST_S)
        print(f"{name}: drained in {waited:.1f}s (bound {DRAIN_WORST_S:.0f}s)")
        healthkit.resume(session, healthy)
        done, waited = healthkit.wait_job_done(session, job, REQUEUED_WORST_S)
        print(f"{name}: job done in {waited:.1f}s, restarts {done.restarts} (bound {REQUEUED_WORST_S:.0f}s)")
        assert done.state == "COMPLETED", done
        if fault.in_prolog:
            assert done.batch_host == healthy, done
    finally:
        if name == "nvml-missing":
            session.root_in(faulty, "sh", "-c", f"mv {NVML}.away {NVML} && ldconfig")
        _state(session, faulty, HEALTHY)
        healthkit.resume(session, healthy)
    if fault.needs_reset:
        # the kernel log holds no XID now, yet a periodic run still fails on the latched one
        again = session.root_in(faulty, "slurmpod", "check", "run", "--context", "periodic", "--json", timeout=60)
        xid = next(r for r in json.loads(again.stdout)["results"] if r["check"] == "xid")
        assert xid["status"] == "fail" and "latched" in xid["reason"], xid
        n = node(session, faulty)
        assert n is not None and n.drained, n
        healthkit.replace_worker(session, faulty, healthkit.fake_gpu_patch())  # the operator's GPU reset
        wait_for(f"{faulty} restarted", lambda: session.root_in(faulty, "test", "-s", HEALTH_CONFIG).code == 0 or None,
                 IDLE_TIMEOUT_S)
        _configure(session, faulty)
    # after a restart: the pod's start, then the clean runs (slurmd runs the first at its start)
    waited = wait_idle(session, faulty, UNDRAIN_WORST_S + (IDLE_TIMEOUT_S if fault.needs_reset else 0))
    print(f"{name}: back in service {waited:.1f}s after the fault was cleared")
