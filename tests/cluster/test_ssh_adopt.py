"""ssh into allocations with pam_slurm_adopt.

Every worker's sshd ends its PAM account stack with pam_slurm_adopt (images/dockerfiles/worker.Dockerfile):
a user with a job on the worker gets in and the session joins that job's extern step, which PrologFlags=
Contain makes (slurmpod adds it whenever `cgroups: true`); a user with no job there is refused, and so is
one with a job that cannot be contained (no Contain: action_adopt_failure=deny).
Ref: https://slurm.schedmd.com/pam_slurm_adopt.html
Root never logs in over ssh (test_pod_runtime.py); operators use `kubectl exec`, which PAM never sees.
"""

from __future__ import annotations

from collections.abc import Iterator

import cgroupkit
import pytest
from clusterkit import Session, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

# The user's own key pair on the shared /home, authorized for the user's own logins (what a site's
# home-directory setup or the user does once).
KEYGEN = ("mkdir -p -m 700 ~/.ssh && { [ -s ~/.ssh/id_ed25519 ] || ssh-keygen -q -t ed25519 -N '' "
          "-f ~/.ssh/id_ed25519; } && { grep -qxF \"$(cat ~/.ssh/id_ed25519.pub)\" ~/.ssh/authorized_keys "
          "2>/dev/null || cat ~/.ssh/id_ed25519.pub >> ~/.ssh/authorized_keys; } && chmod 600 ~/.ssh/authorized_keys")
# pam_slurm_adopt tells the user through PAM's conversation and syslog (no syslog daemon in a pod);
# sshd -e logs the account stack's refusal to the pod's output.
DENIALS = ("pam_slurm_adopt", "by PAM account configuration")


@pytest.fixture(scope="module")
def keys(session: Session) -> None:
    made = session.as_researcher("sh", "-c", KEYGEN)
    assert made.code == 0, made.stderr


@pytest.fixture(scope="module")
def adopt(session: Session, keys: None) -> Iterator[None]:
    with cgroupkit.cgroup_cluster(session):
        yield


def test_ssh_to_a_job_without_contain_is_refused(session: Session, keys: None) -> None:
    """The shipped cluster (`cgroups: false`): no PrologFlags=Contain, so no extern step to adopt into.
    action_adopt_failure=deny refuses the session that would otherwise outlive the job. First in the
    module: `adopt` switches the cluster to cgroups until the module ends."""
    worker = session.cluster.workers[0]
    marker = cgroupkit.home("no-contain-started")
    session.as_researcher("rm", "-f", marker)
    job = cgroupkit.sbatch(session, "-w", worker, "--time=3", "--output=/dev/null", "--wrap",
                           f"touch {marker}; sleep 170")
    try:
        cgroupkit.wait_running(session, job, worker)
        wait_for(f"job {job}'s batch script to start",
                 lambda: True if session.as_researcher("test", "-e", marker).code == 0 else None,
                 cgroupkit.JOB_RUNNING_WORST_S)
        refused = session.as_researcher(*cgroupkit.SSH, worker, "true", timeout=60)
    finally:
        cgroupkit.cancel(session, worker, job)
    print(f"job {job}: exit {refused.code}\n{refused.stdout}{refused.stderr}")
    assert refused.code == 255, (refused.code, refused.stdout, refused.stderr)
    logs = session.client.containers.get(worker).logs(tail=200).decode("utf-8", "replace")
    assert any(d in refused.stderr or d in logs for d in DENIALS), (refused.stderr, logs[-3000:])


@pytest.mark.smoke
def test_ssh_with_a_job_lands_in_its_cgroup_without_one_is_refused(session: Session, adopt: None) -> None:
    with_job, without = session.cluster.workers[0], session.cluster.workers[1]
    marker = cgroupkit.home("adopt-started")
    session.as_researcher("rm", "-f", marker)
    job = cgroupkit.sbatch(session, "-w", with_job, "--time=3", "--mem=64M", "--output=/dev/null",
                           "--wrap", f"touch {marker}; sleep 170")
    try:
        cgroupkit.wait_running(session, job, with_job)
        # RUNNING in slurmctld comes before slurmstepd has made the job's steps on the node; once the batch
        # script runs, the extern step (made first, PrologFlags=Contain) is there for pam_slurm_adopt to find.
        wait_for(f"job {job}'s batch script to start",
                 lambda: True if session.as_researcher("test", "-e", marker).code == 0 else None,
                 cgroupkit.JOB_RUNNING_WORST_S)
        inside = session.as_researcher(*cgroupkit.SSH, with_job, "cat", "/proc/self/cgroup", timeout=60)
        refused = session.as_researcher(*cgroupkit.SSH, without, "cat", "/proc/self/cgroup", timeout=60)
    finally:
        cgroupkit.cancel(session, with_job, job)
    print(f"with job {job}: exit {inside.code}\n{inside.stdout}{inside.stderr}\n"
          f"without: exit {refused.code}\n{refused.stdout}{refused.stderr}")
    assert inside.code == 0, inside.stderr
    paths = cgroupkit.cgroup_paths(inside.stdout)
    # The session runs in the job's extern step (cgroup v1: one line per hierarchy).
    assert any(f"/job_{job}/step_extern" in p for p in paths), inside.stdout
    assert refused.code != 0, refused.stdout
    logs = session.client.containers.get(without).logs(tail=200).decode("utf-8", "replace")
    assert any(d in refused.stderr or d in logs for d in DENIALS), (refused.stderr, logs[-3000:])
