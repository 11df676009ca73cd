"""The users' way in: ssh from outside the cluster through the login Service.

The emulator publishes the chart's login Service at 127.0.0.1:PORT on the host (services.py, publish.py),
as kube-proxy makes a Service reachable from its node; these tests ssh there from the host as a user would
from a laptop, with the host key the ssh-host-keys Secret holds pinned in known_hosts.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from clusterkit import Session, restore_pod

from slurmpod import well_known as wk
from slurmpod_host.cluster import cli
from slurmpod_host.cluster import well_known as host_wk
from slurmpod_host.cluster.services import LOOPBACK, Published

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

SSH_TIMEOUT_S = 60  # ConnectTimeout 10 s plus a login on a loaded 2-core host


def _published(session: Session) -> Published:
    (login,) = [p for p in cli.published(session.cluster.name) if p.key == host_wk.LOGIN_SSH]
    return login


@pytest.fixture(scope="module")
def client_files(session: Session, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(the user's authorized key, a key nobody authorized, known_hosts holding the login host key)."""
    tmp = tmp_path_factory.mktemp("ssh-client")
    for name in ("authorized", "stranger"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / name)], check=True,
                       timeout=30)
    public = (tmp / "authorized.pub").read_text(encoding="ascii").strip()
    added = session.as_researcher("sh", "-c", "mkdir -p -m 700 ~/.ssh && "
                                  f"{{ grep -qxF '{public}' ~/.ssh/authorized_keys 2>/dev/null || "
                                  f"echo '{public}' >> ~/.ssh/authorized_keys; }} && chmod 600 ~/.ssh/authorized_keys")
    assert added.code == 0, added.stderr
    host_key = session.root_in(session.cluster.login, "ssh-keygen", "-y", "-f", wk.SSH_HOST_KEY)
    assert host_key.code == 0, host_key.stderr
    port = _published(session).host_port
    known = tmp / "known_hosts"
    known.write_text(f"[{LOOPBACK}]:{port} {' '.join(host_key.stdout.split()[:2])}\n", encoding="ascii")
    return tmp / "authorized", tmp / "stranger", known


def _ssh(session: Session, key: Path, known: Path, command: str) -> subprocess.CompletedProcess[str]:
    port = _published(session).host_port
    return subprocess.run(["ssh", "-p", str(port), "-i", str(key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
                           "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={known}",
                           "-o", "ConnectTimeout=10", f"{wk.DEMO_USER}@{LOOPBACK}", command],
                          capture_output=True, text=True, timeout=SSH_TIMEOUT_S, check=False)


@pytest.mark.smoke
def test_a_user_sshs_in_through_the_login_service_and_a_stranger_s_key_is_refused(
        session: Session, client_files: tuple[Path, Path, Path]) -> None:
    authorized, stranger, known = client_files
    uid = session.as_researcher("id", "-u").stdout.strip()
    inside = _ssh(session, authorized, known, "id -u; hostname; squeue -h -o %i >/dev/null && echo slurm")
    assert inside.returncode == 0, inside.stderr
    assert inside.stdout.split() == [uid, session.cluster.login, "slurm"], inside.stdout
    refused = _ssh(session, stranger, known, "true")
    assert refused.returncode == 255 and "Permission denied (publickey)" in refused.stderr, refused.stderr


def test_the_login_service_keeps_its_port_and_host_key_across_a_login_pod_restart(
        session: Session, client_files: tuple[Path, Path, Path]) -> None:
    authorized, _, known = client_files
    before = _published(session)
    restore_pod(session, session.cluster.login)  # delete with preStop, recreate from the template
    assert _published(session).host_port == before.host_port
    again = _ssh(session, authorized, known, "hostname")  # StrictHostKeyChecking: the same host key
    assert again.returncode == 0 and again.stdout.strip() == session.cluster.login, again.stderr
