"""`slurmpod demo`: build images if missing, bring a cluster up, run jobs as a researcher.

From the login pod, as user researcher (uid 2000): `srun -N2 hostname`, then a 20-task
`sbatch --array` job writing one file per task to the shared /home; prints outputs and sinfo.
Then a drain: the pod running a batch job is deleted the way kubectl would (its preStop hook drains
the node and requeues the job, then SIGTERM); the job finishes on another pod and the StatefulSet's
replacement pod rejoins IDLE.
Last, the job_submit policy (the chart's `policy` ConfigMap, run by slurmctld's job_submit/slurmpod plugin)
answers three held submissions: one accepted unchanged, one modified (the preemptible tier turns requeue on
and adds its grace signal; `scontrol show job` shows it), one rejected with the policy's message.
Then the health check: a worker whose health config requires a mount it lacks is drained with the failing
check's reason (`slurmpod: mounts: ...`) and returned to service after clean runs once the fault is gone.
Ref: https://slurm.schedmd.com/job_array.html (%A = array job id, %a = task id in --output)
"""

from __future__ import annotations

import argparse
import io
import json
import re
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from slurmpod import well_known as wk
from slurmpod.errors import PermanentError
from slurmpod.policy.decision import Verdict
from slurmpod_host.cluster import cli, jobs, runtime, services
from slurmpod_host.cluster import well_known as host_wk
from slurmpod_host.images import build

ARRAY_TASKS = 20
HOME = f"/home/{wk.DEMO_USER}"
OUT_DIR = f"{HOME}/slurmpod-demo"
BUILD_TIMEOUT_S = 3600
JOB_TIMEOUT_S = 300
SRUN_TIMEOUT_S = 120
# What each array task prints: its index, the number of tasks, the array's job id and its host.
# Ref: https://slurm.schedmd.com/sbatch.html#SECTION_OUTPUT-ENVIRONMENT-VARIABLES (SLURM_ARRAY_*)
TASK_WRAP = ('echo "task ${SLURM_ARRAY_TASK_ID} of ${SLURM_ARRAY_TASK_COUNT} in array job ${SLURM_ARRAY_JOB_ID} '
              'ran on $(hostname)"')
_TASK_LINE = re.compile(r"task (?P<task>\d+) of (?P<count>\d+) in array job (?P<job>\d+) ran on (?P<host>\S+)")


@dataclass(frozen=True, slots=True)
class DemoResult:
    srun_hosts: tuple[str, ...]
    job_id: str
    tasks: tuple[tuple[int, str], ...]  # (task id, worker pod), sorted by task id


def ensure_images(flavor: str, out: TextIO) -> None:
    """Build the flavor's images with `slurmpod images build` when any role image is missing."""
    client = runtime.connect()
    missing = runtime.missing_images(client, [f"slurmpod/{role}:{flavor}" for role in wk.IMAGE_ROLES])
    if not missing:
        return
    print(f"images missing for {', '.join(missing)}: building flavor {flavor}", file=out, flush=True)
    # In this process, through the installed host package: never `python -m` from the checkout, whose
    # ./slurmpod folder would shadow the installed package and its mapped subpackages.
    settings, _ = build.settings_from_args(argparse.Namespace(flavor=flavor))
    build.build(settings, None, out)


def _as_researcher(client: Any, pod: str, argv: Sequence[str], timeout_s: float) -> runtime.ExecResult:
    env = {"HOME": HOME, "USER": wk.DEMO_USER, "LOGNAME": wk.DEMO_USER}
    return runtime.exec_in(client, pod, argv, timeout_s=timeout_s, user=wk.DEMO_USER, workdir=HOME, env=env)


def _check(result: runtime.ExecResult, what: str) -> str:
    if result.code != 0:
        detail = (result.stderr + result.stdout).strip()[-800:]
        raise PermanentError(f"{what} failed (exit {result.code}): {detail}")
    return result.stdout


def ensure_home(client: Any, login: str) -> None:
    """Create the researcher's home on the shared /home when the entrypoint has not."""
    script = (f"test -d {HOME} || install -d -o {wk.DEMO_UID} -g {wk.DEMO_UID} -m 0755 {HOME}")
    _check(runtime.exec_in(client, login, ["sh", "-c", script], timeout_s=30), f"creating {HOME}")


@dataclass(frozen=True, slots=True)
class TaskLine:
    """One array task's output line."""

    task: int  # SLURM_ARRAY_TASK_ID
    count: int  # SLURM_ARRAY_TASK_COUNT
    job: str  # SLURM_ARRAY_JOB_ID
    host: str


def parse_tasks(text: str) -> list[TaskLine]:
    """Every array task's output line in ``text``."""
    return [TaskLine(int(m["task"]), int(m["count"]), m["job"], m["host"]) for m in _TASK_LINE.finditer(text)]


def task_lines(tasks: Sequence[tuple[int, str]], count: int) -> list[str]:
    """What the demo prints for each task: its index of the array's task count, and where it ran."""
    return [f"task {task} of {count} ran on {host}" for task, host in tasks]


def run_jobs(client: Any, cluster: cli.Cluster, out: TextIO) -> DemoResult:
    login = cluster.login
    ensure_home(client, login)
    print(f"\n$ srun -N2 hostname        # in {login}, as {wk.DEMO_USER}", file=out, flush=True)
    srun = _check(_as_researcher(client, login, ["srun", "-N2", "hostname"], SRUN_TIMEOUT_S),
                  "srun -N2 hostname")
    print(srun.rstrip(), file=out)
    hosts = tuple(sorted(line.strip() for line in srun.splitlines() if line.strip()))
    if len(set(hosts)) != 2 or not set(hosts) <= set(cluster.workers):
        raise PermanentError(f"srun -N2 ran on {hosts}, expected two of {cluster.workers}")

    sbatch = ["sbatch", "--parsable", f"--array=0-{ARRAY_TASKS - 1}", "--job-name=slurmpod-demo",
              f"--output={OUT_DIR}/array-%A_%a.out", f"--wrap={TASK_WRAP}"]
    print(f"\n$ {shlex.join(sbatch)}", file=out, flush=True)
    _check(_as_researcher(client, login, ["mkdir", "-p", OUT_DIR], 30), f"mkdir {OUT_DIR}")
    job_id = _check(_as_researcher(client, login, sbatch, 60), "sbatch").strip().split(";")[0]
    print(f"submitted array job {job_id}", file=out, flush=True)
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while True:
        # squeue lists pending/running tasks only; empty (or the job already purged) means done.
        queued = _as_researcher(client, login, ["squeue", "-h", "-j", job_id, "-o", "%i %T"], 30)
        if queued.code != 0 or not queued.stdout.strip():
            break
        if time.monotonic() > deadline:
            raise PermanentError(f"array job {job_id} still queued after {JOB_TIMEOUT_S}s:\n{queued.stdout}")
        time.sleep(1)
    files = _check(_as_researcher(client, login, ["sh", "-c", f"cat {OUT_DIR}/array-{job_id}_*.out"], 30),
                   "reading the array outputs")
    lines = [t for t in parse_tasks(files) if t.job == job_id and t.count == ARRAY_TASKS]
    tasks = sorted((t.task, t.host) for t in lines)
    if [t for t, _ in tasks] != list(range(ARRAY_TASKS)):
        raise PermanentError(f"array job {job_id}: outputs for tasks {[t for t, _ in tasks]}, "
                             f"expected 0..{ARRAY_TASKS - 1}:\n{files}")
    print(f"\n$ cat {OUT_DIR}/array-{job_id}_*.out   # {ARRAY_TASKS} files on the shared /home", file=out)
    for line in task_lines(tasks, ARRAY_TASKS):
        print(line, file=out)
    return DemoResult(hosts, job_id, tuple(tasks))


def _job_node(client: Any, login: str, job_id: str) -> tuple[str, str]:
    out = _as_researcher(client, login, ["squeue", "-h", "-j", job_id, "-o", "%T %N"], 30).stdout.split()
    return (out[0], out[1] if len(out) > 1 else "") if out else ("DONE", "")


def _wait(what: str, check: Any, timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    raise PermanentError(f"{what}: not within {timeout_s:.0f}s")


def show_drain(client: Any, cluster: cli.Cluster, out: TextIO) -> None:
    """Delete the pod under a running batch job; the job is requeued and completes elsewhere."""
    from slurmpod_host.cluster import lifecycle  # noqa: PLC0415 - only this step needs it

    login, output = cluster.login, f"{OUT_DIR}/requeue.out"
    wrap = 'echo "run ${SLURM_RESTART_COUNT:-0} on $(hostname)"; [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ] || sleep 60'
    sbatch = ["sbatch", "--parsable", "--requeue", "--open-mode=append", f"--output={output}", f"--wrap={wrap}"]
    print(f"\n$ {shlex.join(sbatch)}", file=out, flush=True)
    _as_researcher(client, login, ["rm", "-f", output], 30)
    job_id = _check(_as_researcher(client, login, sbatch, 60), "sbatch").strip().split(";")[0]

    def running() -> str | None:
        state, node = _job_node(client, login, job_id)
        return node if state == "RUNNING" else None

    pod = _wait(f"job {job_id} running", running, 120)
    print(f"job {job_id} RUNNING on {pod}", file=out)

    print(f"\n$ kubectl delete pod {pod}   # emulated: preStop hook, then SIGTERM", file=out, flush=True)
    took = lifecycle.delete_pod(client, cluster.name, pod)
    print(f"preStop (drain '{wk.REASON_POD_TERMINATING}', requeue, stop slurmd) took {took:.1f}s", file=out)
    lifecycle.start_pod(client, cluster.name, lifecycle.plan_pod(client, cluster.name, "worker",
                                                                  int(pod.rsplit("-", 1)[1])))
    print(f"StatefulSet recreated {pod}", file=out, flush=True)
    _wait(f"job {job_id} completed", lambda: _job_node(client, login, job_id)[0] == "DONE", JOB_TIMEOUT_S)
    print(f"\n$ cat {output}", file=out)
    print(_check(_as_researcher(client, login, ["cat", output], 30), f"cat {output}").rstrip(), file=out)
    cli.wait_idle(client, cluster, cli.DEFAULT_UP_TIMEOUT_S, io.StringIO())


def _node_reason(client: Any, cluster: cli.Cluster, pod: str) -> str:
    """`sinfo -R` for one node: its drain reason, or empty when it is in service."""
    return _as_researcher(client, cluster.login, ["sinfo", "-h", "-R", "-n", pod, "-o", "%E"], 30).stdout.strip()


def show_health(client: Any, cluster: cli.Cluster, out: TextIO) -> None:
    """slurmpod's periodic health check (slurmd's HealthCheckProgram, run here by hand rather than waiting
    for HealthCheckInterval) drains a worker with the failing check's reason, and returns it to service
    after clean runs once the fault is gone. The fault: the worker's health config requires a /datasets
    mount the pod does not have."""
    pod = cluster.workers[-1]
    original = _check(runtime.exec_in(client, pod, ["cat", wk.HEALTH_CONFIG], timeout_s=30), "reading health config")
    doc = json.loads(original)
    faulty = json.dumps({**doc, "required_mounts": [*doc.get("required_mounts", []), "/datasets"]}, sort_keys=True)
    run = ["slurmpod", "check", "run", "--context", "periodic", "--act"]

    def write(text: str) -> None:
        new = f"{wk.HEALTH_CONFIG}.new"
        script = f"printf '%s\\n' {shlex.quote(text)} > {new} && mv {new} {wk.HEALTH_CONFIG}"
        _check(runtime.exec_in(client, pod, ["sh", "-c", script], timeout_s=30), "writing health config")

    print(f"\n# {pod}: its health config now requires a /datasets mount, which the pod does not have", file=out)
    write(faulty)
    try:
        print(f"$ {shlex.join(run)}   # in {pod}, what slurmd runs every HealthCheckInterval", file=out, flush=True)
        print(runtime.exec_in(client, pod, run, timeout_s=60).stdout.rstrip(), file=out)
        reason = _node_reason(client, cluster, pod)
        print(f"$ sinfo -R -n {pod}\n{reason}", file=out)
        if not reason.startswith(wk.REASON_PREFIX):
            raise PermanentError(f"health step: {pod} was not drained by the failing check (reason {reason!r})")
    finally:
        write(original.rstrip("\n"))
    print(f"\n# fault gone: slurmpod lifts its own drain after {config_clean_runs(doc)} clean runs", file=out)
    for i in range(config_clean_runs(doc) + 1):
        result = runtime.exec_in(client, pod, run, timeout_s=60)
        print(f"$ {shlex.join(run)}   # run {i + 1}: {result.stdout.strip().splitlines()[-1]}", file=out, flush=True)
        if not _node_reason(client, cluster, pod):
            # Right after RESUME sinfo showed the node as idle* (not responding; seen with 24.11.5) for a moment.
            cli.wait_idle(client, cluster, cli.DEFAULT_UP_TIMEOUT_S, io.StringIO())
            print(f"{pod} back in service", file=out)
            return
    raise PermanentError(f"health step: {pod} still drained ({_node_reason(client, cluster, pod)!r})")


def config_clean_runs(doc: dict[str, Any]) -> int:
    """clean_runs_to_undrain of a health config (prolog_epilog.config's default when unset)."""
    from slurmpod.prolog_epilog.config import CLEAN_RUNS_TO_UNDRAIN  # noqa: PLC0415 - only this step needs it

    return int(doc.get("clean_runs_to_undrain", CLEAN_RUNS_TO_UNDRAIN))


@dataclass(frozen=True, slots=True)
class PolicyCase:
    """One submission of the policy step and what the shipped policy answers."""

    title: str
    argv: tuple[str, ...]
    verdict: Verdict


# Answers of the shipped policy to the researcher (not in slurmpod-admins).
POLICY_CASES = (
    PolicyCase("accepted: a normal-tier job, unchanged", ("-p", "main", "-t", "30"), Verdict.ACCEPT),
    PolicyCase("modified: a preemptible job gets requeue and its grace signal", ("-p", "preempt", "-t", "30",
               "--no-requeue"), Verdict.MODIFY),
    PolicyCase("rejected: the high tier is for slurmpod-admins", ("-p", "high", "-t", "30"),
               Verdict.REJECT),
)


def job_summary(job: jobs.JobRecord) -> str:
    """What the policy decided about an accepted job, as `scontrol show job` names it."""
    return f"Partition={job.partition} TimeLimit={jobs.slurm_time(job.time_limit_min)} Requeue={int(job.requeue)}"


def show_policy(client: Any, cluster: cli.Cluster, out: TextIO) -> None:
    """Three held submissions through the job_submit policy: accepted, modified, rejected."""
    login = cluster.login
    for case in POLICY_CASES:
        sbatch = ["sbatch", "--parsable", "--hold", "-o", "/dev/null", *case.argv, "--wrap", "true"]
        print(f"\n$ {shlex.join(sbatch)}   # {case.title}", file=out, flush=True)
        result = _as_researcher(client, login, sbatch, 60)
        message = result.stderr.strip()
        if message:
            print(message, file=out)
        accepted = case.verdict is not Verdict.REJECT
        if (result.code == 0) != accepted:
            raise PermanentError(f"policy step: {case.title}, but sbatch exited {result.code}: {message}")
        if not accepted:
            continue
        job_id = result.stdout.strip().split(";")[0]
        shown = _check(_as_researcher(client, login, jobs.argv(job_id), 30), f"scontrol show job {job_id}")
        print(f"job {job_id}: {job_summary(jobs.one(shown, job_id))}", file=out)
        _as_researcher(client, login, ["scancel", job_id], 30)


def main(args: argparse.Namespace) -> int:
    out = sys.stdout
    ensure_images(args.flavor, out)
    client = runtime.connect()
    cluster = cli.attach(client, args.name)
    if cluster is None:
        cluster = cli.up(args.name, args.flavor, args.workers, cli.DEFAULT_UP_TIMEOUT_S, out)
        print(f"cluster {args.name!r} up in {cluster.seconds:.1f}s", file=out)
    else:
        print(f"reusing running cluster {args.name!r}", file=out)
        cli.wait_idle(client, cluster, cli.DEFAULT_UP_TIMEOUT_S, out)
    run_jobs(client, cluster, out)
    show_drain(client, cluster, out)
    show_policy(client, cluster, out)
    show_health(client, cluster, out)
    print("\n$ sinfo", file=out)
    cli.print_sinfo(cluster, out)
    print(f"\nshell in the login pod:  docker exec -it {cluster.login} su - {wk.DEMO_USER}", file=out)
    for p in cli.published(args.name):
        if p.key == host_wk.LOGIN_SSH:
            print(f"ssh, with your key in ~{wk.DEMO_USER}/.ssh/authorized_keys:  "
                  f"ssh -p {p.host_port} {wk.DEMO_USER}@{services.LOOPBACK}", file=out)
    print(f"tear down:               slurmpod cluster down --name {args.name}   (or: make clean)", file=out)
    return 0
