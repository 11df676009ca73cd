"""The task environment: slurmpod's SPANK plugin sets the pod's settings in every task and gives the job a
private scratch dir, which slurmpod's epilog removes when the job ends."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from typing import TypeVar

import pytest
from clusterkit import Session, job, node, scontrol_json, usable, wait_for

from slurmpod import well_known as wk

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

# One line per task: its node, job id, the exports, and what the scratch dir is to the task's user.
SCRIPT = ('s="$SLURMPOD_SCRATCH"; touch "$s/data" && test -O "$s" && m=$(stat -c %a "$s"); '
          'echo "task node=$SLURMD_NODENAME job=$SLURM_JOB_ID if=$NCCL_SOCKET_IFNAME scratch=$s '
          'tmpdir=$TMPDIR mode=$m"')
LINE = re.compile(r"^task node=(\S+) job=(\d+) if=(\S*) scratch=(\S*) tmpdir=(\S*) mode=(\S*)$", re.MULTILINE)
GONE_TIMEOUT_S = 60.0


@pytest.mark.smoke
def test_a_job_sees_the_task_environment_and_its_scratch_goes_with_it(session: Session) -> None:
    run = session.as_researcher("srun", "-N2", "--ntasks-per-node=1", "-t", "1", "bash", "-c", SCRIPT, timeout=120)
    assert run.code == 0, run.stdout + run.stderr
    tasks = LINE.findall(run.stdout)
    assert {t[0] for t in tasks} == set(session.cluster.workers), run.stdout + run.stderr
    job = tasks[0][1]
    scratch = f"{wk.DEFAULT_SCRATCH_BASE}/job-{job}"
    for _node, _job, ifname, task_scratch, tmpdir, mode in tasks:
        assert ifname == "eth0", run.stdout  # the pod's default-route interface in the emulator
        assert (task_scratch, tmpdir, mode) == (scratch, scratch, "700"), run.stdout

    def gone() -> bool | None:
        left = [w for w in session.cluster.workers if session.root_in(w, "test", "-e", scratch).code == 0]
        return True if not left else None

    wait_for(f"the epilog to remove {scratch} on every worker", gone, GONE_TIMEOUT_S)


@pytest.mark.smoke
def test_the_plugin_sets_the_environment_over_the_jobs_own_and_srun_loads_nothing_on_login(
        session: Session) -> None:
    """No TaskProlog runs (a fork and exec per task): the worker's SPANK stack does it, over what the job
    itself says. The login pod has no stack, so its srun loads no plugin and says nothing about one."""
    conf = session.root_in(session.cluster.controller, "scontrol", "show", "config").stdout
    assert re.search(rf"^PlugStackConfig\s*=\s*{re.escape(wk.PLUGSTACK_CONF)}$", conf, re.MULTILINE), conf
    assert re.search(r"^TaskProlog\s*=\s*\(null\)$", conf, re.MULTILINE), conf
    worker = session.cluster.workers[0]
    run = session.as_researcher("srun", "--quiet", "-w", worker, "-N1", "-n1", "-t", "1",
                                "--export=ALL,SLURMPOD_SCRATCH=/tmp/elsewhere,TMPDIR=/tmp/elsewhere,"
                                "NCCL_SOCKET_IFNAME=lo", "bash", "-c", SCRIPT, timeout=120)
    assert run.code == 0 and run.stderr == "", run.stdout + run.stderr
    tasks = LINE.findall(run.stdout)
    assert len(tasks) == 1, run.stdout
    _node, job_id, ifname, scratch, tmpdir, _mode = tasks[0]
    assert (ifname, scratch, tmpdir) == ("eth0", f"{wk.DEFAULT_SCRATCH_BASE}/job-{job_id}",
                                         f"{wk.DEFAULT_SCRATCH_BASE}/job-{job_id}"), run.stdout
    assert session.root_in(session.cluster.login, "test", "-e", wk.PLUGSTACK_CONF).code != 0


# --- A job that leaves 1,000,000 files (docs/task-environment.md, "What happens to scratch after the job") ---

T = TypeVar("T")
DIRS, FILES_PER_DIR = 1000, 1000
# The job makes DIRS dirs of FILES_PER_DIR empty files in its scratch dir and says how long it took.
MILLION = (f"import os,time\nt=time.monotonic()\ns=os.environ['{wk.TASK_ENV_SCRATCH}']\n"
           f"for d in range({DIRS}):\n p=f'{{s}}/{{d}}';os.mkdir(p);fd=os.open(p,os.O_RDONLY)\n"
           f" for i in range({FILES_PER_DIR}):os.close(os.open(str(i),os.O_CREAT|os.O_WRONLY,0o600,dir_fd=fd))\n"
           " os.close(fd)\n"
           f"print(f'made {DIRS * FILES_PER_DIR} files in {{time.monotonic()-t:.1f}}s')")
# 1M empty files are 1M inodes on the worker's /tmp: the container's writable layer (overlayfs on the Docker
# host's disk; no emptyDir there). On the CI host's ext4, beside a running CI job, this script made them in
# 89 s; JOB_LIMIT_MIN leaves six times that.
INODES_NEEDED = 2 * DIRS * FILES_PER_DIR  # and as many left over for the node
JOB_LIMIT_MIN = 10
# The Epilog's bound, job end (1 s resolution) to its metrics stamp: one rename and a process start, plus
# its health checks; a removal in the Epilog itself would take tens of seconds here.
EPILOG_BOUND_S = 10.0
# The sweeper removed those 1M in 41 s (24,000 files/s) there; 400 s allows ten times slower (nice 19 on a
# loaded host), far inside its own 30-minute budget.
SWEEP_WORST_S = 400.0
IDLE_BOUND_S = 60.0


def _cpus_allowed(text: str) -> str:
    found = re.search(r"^Cpus_allowed_list:\s*(\S+)$", text, re.MULTILINE)
    assert found, text
    return found.group(1)


@pytest.mark.smoke
def test_slurmd_and_a_jobs_tasks_run_on_every_cpu_of_the_pod_not_on_its_reserved_cores(session: Session) -> None:
    """The emulated workers have a CPU limit under the host's cores, so their nodes carry CoreSpecCount.
    slurmd binds itself to those cores, and under task/none its tasks inherit that. The SPANK plugin gives
    slurmd the pod's CPUs back at its start: the job's tasks may use every CPU the pod's own init may."""
    worker = session.cluster.workers[0]
    state = node(session, worker)
    assert state is not None and state.specialized_cores > 0, state  # else this test proves nothing
    pod = _cpus_allowed(session.root_in(worker, "cat", "/proc/1/status").stdout)
    assert "-" in pod or "," in pod, pod  # more than one CPU
    slurmd = session.root_in(worker, "sh", "-c", "cat /proc/$(pidof slurmd)/status")
    assert slurmd.code == 0, slurmd.stdout + slurmd.stderr
    assert _cpus_allowed(slurmd.stdout) == pod
    run = session.as_researcher("srun", "--quiet", "-w", worker, "-N1", "-n2", "--overcommit", "-t", "1",
                                "cat", "/proc/self/status", timeout=120)
    assert run.code == 0, run.stdout + run.stderr
    tasks = re.findall(r"^Cpus_allowed_list:\s*(\S+)$", run.stdout, re.MULTILINE)
    assert tasks == [pod, pod], run.stdout


def _config_value(session: Session, name: str) -> str:
    out = session.root_in(session.cluster.controller, "scontrol", "show", "config").stdout
    found = re.search(rf"^{name}\s*=\s*(\S+)", out, re.MULTILINE)
    assert found, out
    return found.group(1)


def _end_time(session: Session, job_id: str) -> int:
    end = json.loads(scontrol_json(session, "job", job_id))["jobs"][0]["end_time"]
    return int(end["number"] if isinstance(end, dict) else end)


def _epilog_stamp(session: Session, worker: str) -> float:
    out = session.root_in(worker, "cat", f"{wk.HEALTH_METRICS_DIR}/slurmpod_health_epilog.prom").stdout
    found = re.search(r'^slurmpod_health_last_run_timestamp_seconds\{context="epilog"\} (\S+)$', out, re.MULTILINE)
    assert found, out
    return float(found.group(1))


def test_a_job_leaving_a_million_files_never_drains_its_node(session: Session) -> None:
    """The Epilog takes the scratch dir away in one rename and the sweeper empties the trash after it:
    the job completes, the Epilog ends far inside PrologEpilogTimeout, the node is never drained or down
    (watched from submission until the trash is empty), and the next job on the node runs."""
    worker = session.cluster.workers[0]
    base, trash = wk.DEFAULT_SCRATCH_BASE, f"{wk.DEFAULT_SCRATCH_BASE}/.trash"
    free = session.root_in(worker, "df", "--output=iavail", base)
    assert free.code == 0 and int(free.stdout.split()[-1]) >= INODES_NEEDED, f"inodes on {worker}:{base}: {free}"
    timeout_s = int(_config_value(session, "PrologEpilogTimeout"))
    before = node(session, worker)
    assert before is not None and before.usable and not before.held, before
    reason = before.reason
    out = f"/home/{wk.DEMO_USER}/.slurmpod-million-%j.out"
    job_id = ""

    def watched(what: str, until: Callable[[], T | None], bound: float) -> tuple[T, float]:
        def step() -> T | None:
            n = node(session, worker)
            assert n is not None and not n.held and n.reason == reason, f"{worker} while {what}: {n}"
            return until()
        return wait_for(what, step, bound)

    try:
        sub = session.as_researcher("sbatch", "--parsable", "-w", worker, "-t", str(JOB_LIMIT_MIN), "-o", out,
                                    "--wrap", f"python3 -c {shlex.quote(MILLION)}")
        assert sub.code == 0, sub.stderr
        job_id = sub.stdout.strip().split(";")[0]

        def final() -> str | None:
            state = job(session, job_id).state  # COMPLETING while the Epilog runs
            return state if state not in {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING"} else None

        state, ran = watched(f"job {job_id} to end", final, JOB_LIMIT_MIN * 60 + 60)
        made = session.root_in(session.cluster.login, "cat", out.replace("%j", job_id)).stdout.strip()
        print(f"job {job_id}: {state} after {ran:.1f}s (limit {JOB_LIMIT_MIN} min); {made}")
        assert state == "COMPLETED", made
        assert session.root_in(worker, "test", "-e", f"{base}/job-{job_id}").code != 0, "scratch dir still there"
        epilog_s = _epilog_stamp(session, worker) - _end_time(session, job_id)
        print(f"epilog: {epilog_s:.1f}s from job end to its metrics stamp (bound {EPILOG_BOUND_S:.0f}s; "
              f"PrologEpilogTimeout={timeout_s}s)")
        assert -1.0 < epilog_s < min(EPILOG_BOUND_S, timeout_s), epilog_s
        _, idle = watched(f"{worker} back to IDLE", lambda: usable(session, worker), IDLE_BOUND_S)

        def trash_empty() -> bool | None:
            left = session.root_in(worker, "sh", "-c", f"ls -A {trash} | head -n 1")
            return True if left.code == 0 and not left.stdout.strip() else None

        _, swept = watched(f"the sweeper to empty {trash}", trash_empty, SWEEP_WORST_S)
        print(f"{worker}: IDLE {idle:.1f}s after the job ended (bound {IDLE_BOUND_S:.0f}s); trash empty "
              f"{idle + swept:.1f}s after (bound {SWEEP_WORST_S:.0f}s)")
        after = session.as_researcher("srun", "-w", worker, "-t", "1", "true", timeout=120)
        assert after.code == 0, after.stdout + after.stderr
    finally:
        if job_id:
            session.root_in(session.cluster.controller, "scancel", job_id)
            session.root_in(worker, "rm", "-rf", f"{base}/job-{job_id}", timeout=300)
            session.root_in(session.cluster.login, "rm", "-f", out.replace("%j", job_id))


# --- /dev/shm (docs/task-environment.md, "Shared memory (/dev/shm)") ---

SHM = wk.JOB_SHM_DIR
WORKER_MEMORY_LIMIT = 2**30  # the manifests' worker limit (values nodesets.workers.slurmd.resources)


@pytest.mark.smoke
def test_a_job_gets_a_dev_shm_the_size_of_the_pods_memory_not_the_runtimes_64_mib(session: Session) -> None:
    """NCCL and PyTorch's DataLoader fail past 64 MiB of /dev/shm: a job writes 128 MiB there."""
    worker = session.cluster.workers[0]
    script = (f'f={SHM}/sp-big-$SLURM_JOB_ID; dd if=/dev/zero of="$f" bs=1M count=128 status=none && '
              f'echo "written=$(stat -c %s "$f") mode=$(stat -c %a {SHM}) size=$(($(stat -f -c "%b*%S" {SHM})))"; '
              'rm -f "$f"')
    run = session.as_researcher("srun", "-w", worker, "-N1", "-n1", "-t", "1", "bash", "-c", script, timeout=120)
    assert run.code == 0, run.stdout + run.stderr
    assert run.stdout.split() == [f"written={128 * 2**20}", "mode=1777", f"size={WORKER_MEMORY_LIMIT}"], run.stdout


def _epilog_done(session: Session, job_id: str, worker: str) -> None:
    def done() -> bool | None:
        ended = job(session, job_id).state not in {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING"}
        return True if ended and usable(session, worker) else None

    wait_for(f"job {job_id}'s epilog on {worker}", done, GONE_TIMEOUT_S)


def _shm_job(session: Session, worker: str) -> str:
    """A job of the researcher's that leaves a file and a directory in /dev/shm; its id."""
    script = (f'echo x > {SHM}/sp-file-$SLURM_JOB_ID && mkdir {SHM}/sp-dir-$SLURM_JOB_ID && '
              f'touch {SHM}/sp-dir-$SLURM_JOB_ID/seg && echo "job=$SLURM_JOB_ID"')
    run = session.as_researcher("srun", "-w", worker, "-N1", "-n1", "-t", "1", "bash", "-c", script, timeout=120)
    assert run.code == 0, run.stdout + run.stderr
    job_id = run.stdout.strip().removeprefix("job=")
    _epilog_done(session, job_id, worker)
    return job_id


def _shm_names(session: Session, worker: str) -> set[str]:
    listed = session.root_in(worker, "ls", "-A", SHM)
    assert listed.code == 0, listed.stderr
    return set(listed.stdout.split())


def test_what_a_users_jobs_leave_in_dev_shm_goes_after_their_last_process_on_the_worker(session: Session) -> None:
    """The epilog removes the job's user's entries once nothing of theirs runs on the worker; another
    user's and root's entries stay, and so does everything while the user still has a process there."""
    worker = session.cluster.workers[0]
    user = wk.DEMO_USER
    planted = session.root_in(worker, "sh", "-c", f"echo x > {SHM}/sp-other && chown 4999:4999 {SHM}/sp-other && "
                                                  f"echo x > {SHM}/sp-root")
    assert planted.code == 0, planted.stderr
    # Another session of the same user on the worker (what a second job or an ssh session would be).
    holder = session.root_in(worker, "sh", "-c", f'setpriv --reuid="$(id -u {user})" --regid="$(id -g {user})" '
                                                 '--clear-groups sleep 600 >/dev/null 2>&1 & echo $!')
    assert holder.code == 0 and holder.stdout.strip().isdigit(), holder.stdout + holder.stderr
    try:
        kept = _shm_job(session, worker)
        assert {f"sp-file-{kept}", f"sp-dir-{kept}", "sp-other", "sp-root"} <= _shm_names(session, worker)
        killed = session.root_in(worker, "kill", holder.stdout.strip())
        assert killed.code == 0, killed.stderr
        last = _shm_job(session, worker)
        names = _shm_names(session, worker)
        assert not {n for n in names if n.startswith(("sp-file-", "sp-dir-"))}, (kept, last, names)
        assert {"sp-other", "sp-root"} <= names
    finally:
        session.root_in(worker, "sh", "-c", f"kill {holder.stdout.strip() or 0}; rm -rf {SHM}/sp-*")
