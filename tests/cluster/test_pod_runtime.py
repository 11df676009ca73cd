"""Each role's pod at run time, seen through testinfra's docker backend: what supervisord runs,
the munge key it installed, and an sshd that refuses passwords and root."""

from __future__ import annotations

import shlex
import subprocess
from typing import Any

import pytest
import testinfra
from clusterkit import Session, restore_pod

from slurmpod import well_known as wk

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

PROGRAMS = {
    "controller": {"munged", "slurmctld", "node-reaper"},
    "worker": {"munged", "slurmd", "sshd"},
    "login": {"munged", "sackd", "sshd"},
}


def _pod(session: Session, role: str) -> str:
    return {"controller": session.cluster.controller, "login": session.cluster.login,
            "worker": session.cluster.workers[0]}[role]


def _host(session: Session, role: str) -> Any:
    return testinfra.get_host(f"docker://{_pod(session, role)}")


@pytest.mark.smoke
@pytest.mark.parametrize("role", sorted(PROGRAMS))
def test_supervisord_is_pid_1_and_runs_the_roles_programs(session: Session, role: str) -> None:
    host = _host(session, role)
    # The entrypoint becomes supervisord in its own process (no second interpreter): supervisord's pid is 1.
    ctl = f"supervisorctl -c {wk.RUN_DIR}/{wk.SUPERVISORD_CONF}"
    assert host.run(f"{ctl} pid").stdout.strip() == "1"
    status = host.run(f"{ctl} status")
    running = {line.split()[0] for line in status.stdout.splitlines() if " RUNNING " in line}
    assert PROGRAMS[role] <= running, status.stdout


@pytest.mark.parametrize("role", sorted(PROGRAMS))
def test_munge_key_installed_0400_munge_owned(session: Session, role: str) -> None:
    key = _host(session, role).file(wk.MUNGE_KEY)
    assert key.is_file
    assert (key.mode, key.user, key.group) == (0o400, "munge", "munge")
    assert key.size == 1024


def _outside(session: Session, command: str) -> subprocess.CompletedProcess[str]:
    """``command`` run on the Docker host: a user's ssh from outside the cluster, as through the login
    Service (the chart's NetworkPolicies let no pod but login ssh anywhere)."""
    return subprocess.run(shlex.split(command), capture_output=True, text=True, timeout=60, check=False)


def _ip(session: Session, pod: str) -> str:
    nets = session.client.containers.get(pod).attrs["NetworkSettings"]["Networks"]
    return str(next(iter(nets.values()))["IPAddress"])


@pytest.mark.parametrize("role", ["worker", "login"])
def test_sshd_refuses_root_and_passwords(session: Session, role: str) -> None:
    base = "ssh -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o ConnectTimeout=5 -o BatchMode=yes"
    if role == "worker":  # from the login pod, the one place ssh into a worker comes from
        client, target = _host(session, "login"), _pod(session, role)
        root, probe = (client.run(f"{base} root@{target} true"),
                       client.run(f"{base} -o PreferredAuthentications=password,keyboard-interactive "
                                  f"{wk.DEMO_USER}@{target} true"))
        answers = [(root.rc, root.stderr), (probe.rc, probe.stderr)]
    else:
        target = _ip(session, _pod(session, role))
        answers = [(r.returncode, r.stderr) for r in (
            _outside(session, f"{base} root@{target} true"),
            _outside(session, f"{base} -o PreferredAuthentications=password,keyboard-interactive "
                              f"{wk.DEMO_USER}@{target} true"))]
    (root_rc, root_err), (probe_rc, probe_err) = answers
    assert root_rc == 255 and "Permission denied" in root_err, root_err
    # The server offers public keys only: no password or keyboard-interactive method at all.
    assert probe_rc == 255 and "Permission denied (publickey)" in probe_err, probe_err


def test_worker_sshd_uses_pam_slurm_adopt(session: Session) -> None:
    pam = _host(session, "worker").file("/etc/pam.d/sshd").content_string.splitlines()
    # Deny what it cannot decide on, too: a session it cannot contain is refused, never let through.
    assert ("account required pam_slurm_adopt.so action_no_jobs=deny action_adopt_failure=deny "
            "action_generic_failure=deny") in pam


def _host_key_seen_from_outside(session: Session) -> str:
    """The host key the login pod's sshd offers, as a user's client sees it (ssh-keyscan from the host)."""
    scan = _outside(session, f"ssh-keyscan -t ed25519 -T 5 {_ip(session, session.cluster.login)}")
    assert scan.returncode == 0 and "ssh-ed25519" in scan.stdout, scan.stderr
    return next(line.split()[-1] for line in scan.stdout.splitlines() if "ssh-ed25519" in line)


def test_login_pod_keeps_its_ssh_host_key_across_a_restart(session: Session) -> None:
    """The key comes from the ssh-host-keys Secret, so users' known_hosts stay valid."""
    before = _host_key_seen_from_outside(session)
    restore_pod(session, session.cluster.login)  # delete with preStop, recreate from the template
    assert _host_key_seen_from_outside(session) == before
    key = _host(session, "login").file(wk.SSH_HOST_KEY)
    assert (key.user, key.mode) == ("root", 0o400)
