"""auth/slurm end to end: `slurmpod cluster up --auth slurm`, no munged anywhere, jobs through sackd.

This module runs its own cluster (`spauth`, two workers) from the same manifests as every other
cluster test, with only the applied data changed by `--auth slurm`; it is removed at the end, also
when a test fails. Ref: https://slurm.schedmd.com/authentication.html#slurm
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from clusterkit import Session, auth_slurm_cluster

from slurmpod import well_known as wk
from slurmpod_host.cluster import jobs, runtime

pytestmark = [pytest.mark.docker, pytest.mark.cluster, pytest.mark.smoke]

NAME = "spauth"
WORKERS = 2
# Flavors whose Slurm runs auth/slurm configless with sackd on the login pod (checked on both images;
# auth/slurm and sackd exist since 23.11).
AUTH_SLURM_FLAVORS = ("24.11", "26.05")


@pytest.fixture(scope="module")
def auth_flavor(flavor: str) -> str:
    """The session's flavor where auth/slurm works, else the 26.05 images."""
    return flavor if flavor in AUTH_SLURM_FLAVORS else "26.05"


@pytest.fixture(scope="module")
def spauth(docker_client: Any, auth_flavor: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with auth_slurm_cluster(docker_client, NAME, auth_flavor, WORKERS, tmp_path_factory.mktemp("spauth-state")) as s:
        yield s


def _pods(s: Session) -> list[str]:
    return [s.cluster.controller, *s.cluster.workers, s.cluster.login]


def test_no_munged_and_a_private_slurm_key_in_every_pod(spauth: Session) -> None:
    for pod in _pods(spauth):
        assert spauth.root_in(pod, "pgrep", "-x", "munged").code == 1, f"munged runs in {pod}"
        assert spauth.root_in(pod, "test", "-e", wk.MUNGE_KEY).code == 1, f"a munge key in {pod}"
        assert spauth.root_in(pod, "test", "-e", wk.MUNGE_KEY_SECRET).code == 1, f"munge Secret data in {pod}"
        key = spauth.root_in(pod, "stat", "-c", "%a %U %G %s", wk.SLURM_KEY).stdout.split()
        assert key == ["400", "slurm", "slurm", "1024"], pod
    keys = {spauth.root_in(pod, "sha256sum", wk.SLURM_KEY).stdout.split()[0] for pod in _pods(spauth)}
    assert len(keys) == 1  # one key per cluster
    unreadable = spauth.as_researcher("cat", wk.SLURM_KEY)
    assert unreadable.code != 0
    assert "Permission denied" in unreadable.stderr


def test_sackd_serves_the_login_pod(spauth: Session) -> None:
    """sackd on the login pod; slurmd and slurmctld run SACK themselves (no sackd there)."""
    login = spauth.cluster.login
    assert spauth.root_in(login, "ps", "-o", "user=", "-C", "sackd").stdout.split() == ["slurm"]  # SlurmUser
    socket = spauth.root_in(login, "stat", "-c", "%F %U", f"{wk.SLURM_RUN_DIR}/sack.socket").stdout.split()
    assert socket == ["socket", "slurm"]
    logs = runtime.logs_tail(spauth.client, login, 200)
    assert "running as root" not in logs
    assert "owned by" not in logs  # sackd checks its runtime directory's owner
    for pod in (spauth.cluster.controller, *spauth.cluster.workers):
        assert spauth.root_in(pod, "pgrep", "-x", "sackd").code == 1, pod


def test_auth_type_is_auth_slurm(spauth: Session) -> None:
    result = spauth.as_researcher("scontrol", "show", "config")  # an ordinary user, through sackd
    assert result.code == 0, result.stderr
    settings = {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in result.stdout.splitlines())}
    assert settings["AuthType"] == "auth/slurm"
    assert settings["CredType"] == "cred/slurm"


def test_srun_runs_on_two_worker_pods(spauth: Session) -> None:
    result = spauth.as_researcher("srun", "-N2", "hostname")
    assert result.code == 0, result.stderr
    hosts = result.stdout.split()
    assert sorted(hosts) == sorted(spauth.cluster.workers)


def test_sbatch_job_completes(spauth: Session) -> None:
    out = f"/home/{wk.DEMO_USER}/spauth-%j.out"
    submit = spauth.as_researcher("sbatch", "--parsable", "--wait", f"--output={out}",
                                  "--wrap=echo ran on $(hostname) as $(id -un)", timeout=180)
    assert submit.code == 0, submit.stderr  # --wait: the job's exit code
    job_id = submit.stdout.strip().split(";")[0]
    text = spauth.as_researcher("cat", out.replace("%j", job_id)).stdout.split()
    assert text[:2] == ["ran", "on"]
    assert text[2] in spauth.cluster.workers
    assert text[3:] == ["as", wk.DEMO_USER]
    state = spauth.as_researcher(*jobs.argv(job_id))  # kept MinJobAge (300 s) after it ends
    assert state.code == 0, state.stderr
    assert jobs.one(state.stdout, job_id).state == "COMPLETED", state.stdout
