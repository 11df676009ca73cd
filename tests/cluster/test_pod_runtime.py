"""Each role's pod at run time, seen through testinfra's docker backend: what supervisord runs,
the munge key it installed, and an sshd that refuses passwords and root."""

from __future__ import annotations

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


@pytest.mark.parametrize("role", ["worker", "login"])
def test_sshd_refuses_root_and_passwords(session: Session, role: str) -> None:
    target = _pod(session, role)
    client = _host(session, "login" if role == "worker" else "worker")
    base = "ssh -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o ConnectTimeout=5 -o BatchMode=yes"
    root = client.run(f"{base} root@{target} true")
    assert root.rc == 255 and "Permission denied" in root.stderr, root.stderr
    # The server offers public keys only: no password or keyboard-interactive method at all.
    probe = client.run(f"{base} -o PreferredAuthentications=password,keyboard-interactive "
                       f"{wk.DEMO_USER}@{target} true")
    assert probe.rc == 255 and "Permission denied (publickey)" in probe.stderr, probe.stderr


def test_worker_sshd_uses_pam_slurm_adopt(session: Session) -> None:
    pam = _host(session, "worker").file("/etc/pam.d/sshd").content_string.splitlines()
    # Deny what it cannot decide on, too: a session it cannot contain is refused, never let through.
    assert ("account required pam_slurm_adopt.so action_no_jobs=deny action_adopt_failure=deny "
            "action_generic_failure=deny") in pam


def _host_key_seen_from_worker(session: Session) -> str:
    """The host key the login pod's sshd offers, as a client sees it (ssh-keyscan from a worker)."""
    scan = _host(session, "worker").run(f"ssh-keyscan -t ed25519 -T 5 {session.cluster.login}")
    assert scan.rc == 0 and "ssh-ed25519" in scan.stdout, scan.stderr
    return next(line.split()[-1] for line in scan.stdout.splitlines() if "ssh-ed25519" in line)


def test_login_pod_keeps_its_ssh_host_key_across_a_restart(session: Session) -> None:
    """The key comes from the ssh-host-keys Secret, so users' known_hosts stay valid."""
    before = _host_key_seen_from_worker(session)
    restore_pod(session, session.cluster.login)  # delete with preStop, recreate from the template
    assert _host_key_seen_from_worker(session) == before
    key = _host(session, "login").file(wk.SSH_HOST_KEY)
    assert (key.user, key.mode) == ("root", 0o400)
