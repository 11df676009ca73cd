"""A real Slurm cluster from deploy/kubernetes, run as Docker pods: pods, jobs, the demo."""

from __future__ import annotations

import re

import pytest
from clusterkit import NAME, WORKERS, Session

from slurmpod import well_known as wk
from slurmpod_host.cluster import demo

pytestmark = [pytest.mark.docker, pytest.mark.cluster]


@pytest.mark.smoke
def test_every_pod_running_and_ready(session: Session) -> None:
    status = session.slurmpod("cluster", "status", "--name", NAME, timeout=120)
    assert status.returncode == 0, status.stderr
    rows = {line.split()[0]: line.split() for line in status.stdout.splitlines()
            if line.startswith(f"{NAME}-")}
    expected = {f"{NAME}-controller-0", f"{NAME}-login-0", *(f"{NAME}-worker-{i}" for i in range(WORKERS))}
    assert set(rows) == expected
    assert all(r[1] == "running" and r[2] == "healthy" for r in rows.values()), status.stdout
    assert re.search(rf"idle\s+{NAME}-worker-\[0-{WORKERS - 1}\]", status.stdout), status.stdout


@pytest.mark.smoke
def test_srun_runs_on_two_worker_pods(session: Session) -> None:
    result = session.as_researcher("srun", "-N2", "hostname")
    assert result.code == 0, result.stderr
    hosts = result.stdout.split()
    assert len(hosts) == 2
    assert len(set(hosts)) == 2
    assert set(hosts) <= set(session.cluster.workers)


@pytest.mark.parametrize("pod_role", ["controller", "worker", "login"])
def test_pod_sees_what_kubelet_gives(session: Session, pod_role: str) -> None:
    pod = {"controller": session.cluster.controller, "login": session.cluster.login,
           "worker": session.cluster.workers[0]}[pod_role]
    env = session.root_in(pod, "sh", "-c", "echo $POD_NAME $POD_IP $SLURMPOD_CONTROLLER; hostname")
    name, ip, controller, hostname = env.stdout.split()
    assert (name, hostname, controller) == (pod, pod, f"{NAME}-controller-0")
    inspect = session.client.api.inspect_container(pod)
    assert inspect["NetworkSettings"]["Networks"][f"{NAME}-net"]["IPAddress"] == ip
    labels = session.root_in(pod, "cat", f"{wk.PODINFO_DIR}/{wk.PODINFO_LABELS}").stdout
    assert f'{wk.LABEL_INSTANCE}="{NAME}"' in labels.splitlines()
    assert f'{wk.LABEL_ROLE}="{pod_role}"' in labels.splitlines()
    key = session.root_in(pod, "stat", "-L", "-c", "%a %s %U", wk.MUNGE_KEY_SECRET).stdout.split()
    assert key == ["400", "1024", "root"]
    assert session.root_in(pod, "test", "-f", wk.TERMINATION_LOG).code == 0
    assert session.root_in(pod, "getent", "hosts", f"{NAME}-controller-0").code == 0


def test_array_job_outputs_visible_from_login(session: Session) -> None:
    out_dir = f"/home/{wk.DEMO_USER}/sptest-array"
    assert session.as_researcher("mkdir", "-p", out_dir).code == 0
    submit = session.as_researcher("sbatch", "--parsable", "--wait", "--array=0-19",
                                   f"--output={out_dir}/a-%A_%a.out", f"--wrap={demo.TASK_WRAP}", timeout=300)
    assert submit.code == 0, submit.stderr  # --wait: the highest exit code of the tasks
    job = submit.stdout.strip().split(";")[0]
    pattern = f"{out_dir}/a-{job}_*.out"
    listing = session.as_researcher("sh", "-c", f"ls {pattern} | wc -l; cat {pattern}")
    count, _, text = listing.stdout.partition("\n")
    assert int(count) == 20
    tasks = demo.parse_tasks(text)
    assert sorted(t.task for t in tasks) == list(range(20))
    assert {(t.job, t.count) for t in tasks} == {(job, 20)}  # SLURM_ARRAY_TASK_COUNT, not the job id
    assert {t.host for t in tasks} <= set(session.cluster.workers)
    owner = session.as_researcher("stat", "-c", "%u", f"{out_dir}/a-{job}_0.out")
    assert owner.stdout.strip() == str(wk.DEMO_UID)


def test_demo_command(session: Session) -> None:
    result = session.slurmpod("demo", "--name", NAME, "--flavor", session.flavor)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "reusing running cluster" in out
    srun_block = out.split("$ srun -N2 hostname", 1)[1].split("$ sbatch", 1)[0]
    hosts = {line.strip() for line in srun_block.splitlines()[1:] if line.strip()}
    assert hosts == set(session.cluster.workers)
    printed = re.findall(r"^task (\d+) of (\d+) ran on (\S+)$", out, re.MULTILINE)
    assert sorted(int(t) for t, _, _ in printed) == list(range(20))
    assert {count for _, count, _ in printed} == {"20"}
    assert {host for _, _, host in printed} <= set(session.cluster.workers)
    assert f"docker exec -it {NAME}-login-0 su - {wk.DEMO_USER}" in out
    assert f"slurmpod cluster down --name {NAME}" in out
