"""Fast requeue: from a health fault injected on a job's node to that job running again on a healthy node,
with slurmpod's `requeue.fast` (the shipped spec) beside Slurm's default hold, paired per round.

Two clusters of two workers run side by side, one with the shipped spec and one with `requeue.fast: false`
(Slurm's hold: cred_expire, 120 s), and each round measures one job in each at the same time, so both
figures of a round see the same host load. One default-hold job per round, not five at once: a worker here
has 2 CPUs, so five one-CPU jobs cannot all start on the faulty node to be requeued together.

One measurement: the healthy worker is drained (an admin's reason) so the job lands on the other; the
fault is the node's GPU library gone (`expected_gpus: 8` in the health config of a worker without
libnvidia-ml), injected as the held job is released; its prolog fails, drains the node and slurmctld
requeues the job; the healthy worker is returned as soon as the requeue is seen; the clock stops when the
job is RUNNING there. Ref: https://slurm.schedmd.com/prolog_epilog.html#failure_handling
"""

from __future__ import annotations

import contextlib
import json
import shlex
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from slurmpod import well_known as wk
from slurmpod.errors import PermanentError
from slurmpod_host.bench.report import Figure, Report, median
from slurmpod_host.cluster import cli as cluster_cli
from slurmpod_host.cluster import jobs, lifecycle, runtime
from slurmpod_host.cluster.cli import Cluster
from slurmpod_host.cluster.jobs import JobRecord

FAST_LINE = ("fast: true", "fast: false")  # the shipped ConfigMap's `requeue.fast`
ADMIN_REASON = "bench: kept free until the job is requeued"
# Bounds: the prolog's deadline and drain, Slurm's default hold (121 s), a backfill pass (30 s), the launch.
REQUEUE_WORST_S = 90.0
RUN_AGAIN_WORST_S = 121.0 + 30.0 + 30.0
IDLE_WORST_S = 120.0
POLL_S = 0.25


@dataclass(frozen=True, slots=True)
class Bench:
    client: Any
    cluster: Cluster

    def run(self, argv: list[str], *, user: str | None = None, timeout_s: float = 30) -> str:
        pod = self.cluster.login if user else self.cluster.controller
        home = f"/home/{wk.DEMO_USER}"
        env = {"HOME": home, "USER": wk.DEMO_USER} if user else None
        done = runtime.exec_in(self.client, pod, argv, timeout_s=timeout_s, user=user, workdir=home if user else None,
                               env=env)
        if done.code != 0:
            raise PermanentError(f"{self.cluster.name}: {' '.join(argv)}: {done.stdout[-500:]}{done.stderr[-500:]}")
        return done.stdout

    def scontrol(self, *args: str) -> None:
        self.run(["scontrol", *args])

    def job(self, job_id: int) -> JobRecord:
        return jobs.one(self.run(jobs.argv(job_id)), job_id)

    def health_config(self, pod: str) -> str:
        done = runtime.exec_in(self.client, pod, ["cat", wk.HEALTH_CONFIG], timeout_s=20)
        if done.code != 0:
            raise PermanentError(f"{pod}: no {wk.HEALTH_CONFIG}: {done.stderr}")
        return done.stdout

    def write_health_config(self, pod: str, text: str) -> None:
        """Replace the file at once (a hook reads the old file or the new one)."""
        new = f"{wk.HEALTH_CONFIG}.new"
        script = f"printf '%s' {shlex.quote(text)} > {new} && mv {new} {wk.HEALTH_CONFIG}"
        done = runtime.exec_in(self.client, pod, ["sh", "-c", script], timeout_s=20)
        if done.code != 0:
            raise PermanentError(f"{pod}: could not write {wk.HEALTH_CONFIG}: {done.stderr}")

    def wait(self, what: str, test: Any, bound: float) -> Any:
        deadline = time.monotonic() + bound
        while time.monotonic() < deadline:
            got = test()
            if got:
                return got
            time.sleep(POLL_S)
        raise PermanentError(f"{self.cluster.name}: {what}: not within {bound:.0f} s")

    def idle(self, node: str) -> bool:
        out = self.run(["sinfo", "-h", "-n", node, "-t", "idle", "-o", "%n"])
        return out.strip() == node


def _faulty(text: str) -> str:
    """The health config with the fault: 8 GPUs expected on a pod that has no libnvidia-ml."""
    doc = json.loads("\n".join(x for x in text.splitlines() if not x.startswith("#")))
    return json.dumps({**doc, "expected_gpus": 8}, sort_keys=True) + "\n"


def fault_to_running_again(b: Bench) -> float:
    """Seconds from the fault on worker 0 to the job RUNNING on worker 1 (see the module docstring)."""
    faulty, healthy = b.cluster.workers[0], b.cluster.workers[1]
    good = b.health_config(faulty)
    b.scontrol("update", f"nodename={healthy}", "state=drain", f"reason={ADMIN_REASON}")
    job_id = 0
    try:
        out = b.run(["sbatch", "--parsable", "-H", "-o", "/dev/null", "--wrap", "sleep 600"], user=wk.DEMO_USER)
        job_id = int(out.strip().split(";")[0])
        b.write_health_config(faulty, _faulty(good))
        started = time.monotonic()
        b.scontrol("release", str(job_id))
        b.wait(f"job {job_id} requeued", lambda: (st := b.job(job_id)).state == "PENDING" and st.restarts >= 1,
               REQUEUE_WORST_S)
        b.scontrol("update", f"nodename={healthy}", "state=resume")
        b.wait(f"job {job_id} running on {healthy}",
               lambda: (st := b.job(job_id)).state == "RUNNING" and st.batch_host == healthy, RUN_AGAIN_WORST_S)
        return time.monotonic() - started
    finally:
        if job_id:
            b.run(["scancel", str(job_id)])
        b.write_health_config(faulty, good)
        for node in (faulty, healthy):
            with contextlib.suppress(PermanentError):  # not drained: Slurm refuses RESUME
                b.scontrol("update", f"nodename={node}", "state=resume")
        for node in (faulty, healthy):
            b.wait(f"{node} IDLE", lambda n=node: b.idle(n), IDLE_WORST_S)


def _default_hold(b: Bench) -> None:
    """The cluster's spec with `requeue.fast: false`, the controller restarted on it, workers IDLE."""
    name, controller = b.cluster.name, b.cluster.controller
    old = lifecycle.set_config_map(name, "cluster", {})
    spec = old["cluster.yaml"]
    if FAST_LINE[0] not in spec:
        lifecycle.set_config_map(name, "cluster", old)
        raise PermanentError(f"the cluster spec has no `{FAST_LINE[0]}` to turn off")
    lifecycle.set_config_map(name, "cluster", {**old, "cluster.yaml": spec.replace(*FAST_LINE)})
    lifecycle.replace_pod(b.client, name, controller)
    b.wait(f"{controller} ready", lambda: runtime.exec_in(b.client, controller, ["slurmpod", "probe", "ready"],
                                                          timeout_s=20).code == 0, IDLE_WORST_S)
    b.scontrol("reconfigure")
    for node in b.cluster.workers:
        b.wait(f"{node} IDLE", lambda n=node: b.idle(n), IDLE_WORST_S)


def requeue_latency(report: Report, flavor: str, trials: int, *, fast_name: str, hold_name: str) -> None:
    """Both clusters up (``hold_name`` turned to Slurm's hold), ``trials`` paired rounds, both down."""
    cluster_cli.down(fast_name)
    cluster_cli.down(hold_name)
    try:
        fast = Bench(runtime.connect(), cluster_cli.up(fast_name, flavor, workers=2, timeout_s=300))
        hold = Bench(runtime.connect(), cluster_cli.up(hold_name, flavor, workers=2, timeout_s=300))
        _default_hold(hold)
        fast_s: list[float] = []
        hold_s: list[float] = []
        with ThreadPoolExecutor(max_workers=2) as pool:
            for i in range(trials):
                a = pool.submit(fault_to_running_again, fast)
                h = pool.submit(fault_to_running_again, hold)
                fast_s.append(a.result())
                hold_s.append(h.result())
                print(f"bench: requeue round {i + 1} ({flavor}): fast {fast_s[-1]:.1f} s, "
                      f"Slurm's hold {hold_s[-1]:.1f} s", flush=True)
    finally:
        cluster_cli.down(fast_name)
        cluster_cli.down(hold_name)
    saved = [h - f for f, h in zip(fast_s, hold_s, strict=True)]
    report.add(Figure(f"health fault to the requeued job running on the healthy worker ({flavor}, median of "
                      f"{trials})", "s", median(fast_s), median(hold_s), "requeue.fast false, same rounds",
                      samples=tuple(fast_s), baseline_samples=tuple(hold_s)))
    report.notes.append(f"requeue ({flavor}): seconds saved per round (paired) "
                        + ", ".join(f"{x:.1f}" for x in saved) + f"; median {median(saved):.1f}")
