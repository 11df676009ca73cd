"""The task environment: `slurmpod task-prolog` (TaskProlog) exports the pod's settings to every task and
gives the job a private scratch dir, which slurmpod's epilog removes when the job ends."""

from __future__ import annotations

import re

import pytest
from clusterkit import Session, wait_for

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
