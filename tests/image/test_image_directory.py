"""Users from a real directory: Debian's slapd seeded with alice and bob, and the login, worker, controller
and restapi images started with their real entrypoints and the site's sssd.conf, on a network of their own.

The pods' other inputs (downward-API files, munge key, cluster spec) are podkit's, written on the host and
bind-mounted at the same path, so pod start runs unchanged: it validates sssd.conf, installs it, and
supervisord runs sssd before the daemons. No slurmctld is reachable from the login, worker and restapi
containers; what is under test is what they know of users. The test users exist only in slapd.
Ref: sssd.conf(5), sssd-ldap(5), sss_ssh_authorizedkeys(1)
"""

from __future__ import annotations

import json
import shlex
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import podkit
import pytest
import slapdkit
from imagekit import CONTAINER_PREFIX
from slapdkit import ADMIN, NEW_USER_BOUND_S

from slurmpod import well_known as wk
from slurmpod_host.images.flavors import Flavor

ROLES = ("login", "worker", "controller", "restapi")
SSH = ("-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
       "-o", "ConnectTimeout=10")
# sssd makes its nss pipe within seconds of its start; pod start waits for it at most SSSD_WAIT_SECONDS.
UP_BOUND_S = 60.0


@dataclass(frozen=True)
class Directory:
    network: str
    slapd: Any
    pods: dict[str, Any]
    keys: Path  # alice, bob, other: ssh key pairs (other is in no directory entry)


def _run(container: Any, cmd: str, timeout: float = 60) -> tuple[int, str]:
    """A shell command in the container, bounded by ``timeout`` (coreutils' timeout inside)."""
    code, out = container.exec_run(["timeout", str(int(timeout)), "sh", "-c", cmd])
    return code, out.decode(errors="replace")


def _wait(what: str, check: Any, bound_s: float) -> Any:
    deadline = time.monotonic() + bound_s
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last[0]:
            return last[1]
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {bound_s:.0f}s; last: {last}")


def _start_pod(client: Any, image: str, role: str, root: Path, *, network: str, ldap_host: str) -> Any:
    """One pod of ``role``, started as the chart starts it (the image's entrypoint), with sssd.conf mounted."""
    pod = podkit.make_pod(root, role)
    text = slapdkit.sssd_conf(ldap_host)
    if role in ("controller", "restapi"):
        text = text.replace("services = nss, ssh", "services = nss")
    pod.sssd_conf.parent.mkdir(parents=True, exist_ok=True)
    pod.sssd_conf.write_text(text)
    pod.sssd_conf.chmod(0o400)
    env = pod.env(role, **{wk.ENV_SSSD_MKHOMEDIR: "true", "PATH": None, "SLURMPOD_SSSD_BINARY": None})
    name = f"{CONTAINER_PREFIX}dir-{role}-{uuid.uuid4().hex[:8]}"
    return client.containers.run(image, name=name, hostname=f"{role}-0", detach=True, network=network,
                                 environment=env, volumes={str(root): {"bind": str(root), "mode": "rw"}})


def _nss_up(pod: Any) -> tuple[bool, str]:
    code, out = _run(pod, f"test -S {wk.SSSD_NSS_PIPE} && getent -s sss passwd alice", 15)
    return code == 0, out


@pytest.fixture(scope="module")
def directory(docker_client: Any, images: dict[str, Any], flavor: Flavor, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[Directory]:
    keys = slapdkit.make_keys(tmp_path_factory.mktemp("keys"))
    tag = slapdkit.build_image(docker_client, flavor)
    network = docker_client.networks.create(f"{CONTAINER_PREFIX}dir-{uuid.uuid4().hex[:8]}", internal=True)
    started: list[Any] = []
    try:
        slapd = docker_client.containers.run(tag, name=f"{CONTAINER_PREFIX}slapd-{uuid.uuid4().hex[:8]}",
                                             detach=True, network=network.name)
        started.append(slapd)
        slapd_name = slapd.name
        ldif = shlex.quote(slapdkit.seed_ldif(keys))
        _wait("slapd seeded", lambda: (_run(slapd, f"printf '%s\\n' {ldif} | ldapadd {' '.join(ADMIN)}")[0] == 0,
                                        None), 30)
        pods = {}
        for role in ROLES:
            pods[role] = _start_pod(docker_client, images[role].id, role, tmp_path_factory.mktemp(role),
                                    network=network.name, ldap_host=slapd_name)
            started.append(pods[role])
        for role, pod in pods.items():
            _wait(f"{role}: sssd answering for alice", lambda p=pod: _nss_up(p), UP_BOUND_S)
        yield Directory(network.name, slapd, pods, keys)
    finally:
        for c in started:
            c.remove(force=True)
        network.remove()


def _found(done: tuple[int, str]) -> tuple[bool, str]:
    return done[0] == 0, done[1]


def test_pod_start_refuses_an_sssd_conf_others_may_read(docker_client: Any, images: dict[str, Any],
                                                         tmp_path: Path) -> None:
    """Exit 2 and a message naming the file, the container stopped, nothing written: a group-readable
    sssd.conf, which sssd itself would refuse. The pod never starts without the users it was asked for."""
    pod = podkit.make_pod(tmp_path, "login")
    pod.sssd_conf.parent.mkdir(parents=True, exist_ok=True)
    pod.sssd_conf.write_text(slapdkit.sssd_conf("ldap"))
    pod.sssd_conf.chmod(0o440)
    env = pod.env("login", **{"PATH": None, "SLURMPOD_SSSD_BINARY": None})
    name = f"{CONTAINER_PREFIX}dir-bad-{uuid.uuid4().hex[:8]}"
    container = docker_client.containers.run(images["login"].id, name=name, detach=True, network_disabled=True,
                                             environment=env,
                                             volumes={str(tmp_path): {"bind": str(tmp_path), "mode": "rw"}})
    try:
        assert container.wait(timeout=60)["StatusCode"] == 2
        logs = container.logs().decode(errors="replace")
        assert "sssd.conf secret" in logs, logs
        assert "sssd.conf secret mode" in logs, logs
        assert list(pod.run_dir.iterdir()) == []
    finally:
        container.remove(force=True)


def _passwd_and_id(pod: Any, user: str) -> tuple[str, str]:
    code, passwd = _run(pod, f"getent -s sss passwd {user}", 15)
    assert code == 0, passwd
    code, ids = _run(pod, f"id {user}", 15)
    assert code == 0, ids
    return passwd.strip(), ids.strip()


def test_alice_is_the_same_uid_and_groups_on_every_pod(directory: Directory) -> None:
    seen = {role: _passwd_and_id(pod, "alice") for role, pod in directory.pods.items()}
    assert {passwd for passwd, _ in seen.values()} == {"alice:*:5001:5001:Alice:/home/alice:/bin/bash"}
    for role, (_, ids) in seen.items():
        groups = ids.split(" groups=")[1].split(",")
        assert ids.startswith("uid=5001(alice) gid=5001(alice)") and \
            sorted(groups) == ["5001(alice)", "6001(ml)", "6002(inference)"], (role, ids)
    assert {_passwd_and_id(pod, "bob")[1] for pod in directory.pods.values()} == {
        "uid=5002(bob) gid=5002(bob) groups=5002(bob)"}


def test_the_local_users_stay_as_they_were(directory: Directory) -> None:
    for role, pod in directory.pods.items():
        code, out = _run(pod, f"getent -s files passwd {wk.DEMO_USER} && ! getent -s files passwd alice", 15)
        assert code == 0 and out.startswith(f"{wk.DEMO_USER}:x:{wk.DEMO_UID}:"), (role, out)


def test_the_policy_sees_alices_directory_groups_on_the_controller(directory: Directory) -> None:
    """What the job_submit plugin asks NSS for a job's owner (slurm_plugins/bridge.system_identity)."""
    code, out = _run(directory.pods["controller"], "/opt/slurmpod/bin/python -c 'import json; from "
                     "slurmpod.slurm_plugins import bridge; print(json.dumps(bridge.system_identity(5001)))'", 30)
    assert code == 0, out
    assert json.loads(out.strip().splitlines()[-1]) == ["alice", ["alice", "inference", "ml"]]


def _ssh(directory: Directory, pod: str, user: str, key: str, command: str) -> tuple[int, str]:
    login = directory.pods[pod]
    private = (directory.keys / key).read_text()
    script = (f"umask 077; printf '%s' {shlex.quote(private)} > /tmp/{key}.key; "
              f"ssh {' '.join(SSH)} -i /tmp/{key}.key {user}@127.0.0.1 {shlex.quote(command)}")
    return _run(login, script, 60)


def test_alice_sshs_in_with_the_key_in_the_directory_and_gets_her_home(directory: Directory) -> None:
    code, out = _ssh(directory, "login", "alice", "alice", "id -u; id -Gn; stat -c '%U %a' $HOME")
    assert code == 0, out
    assert out.strip().splitlines()[-3:] == ["5001", "alice ml inference", "alice 700"], out


@pytest.mark.parametrize(("user", "key"), [("alice", "other"), ("alice", "bob"), ("bob", "alice")],
                         ids=["a-key-in-no-entry", "another-users-key", "alices-key-for-bob"])
def test_a_key_not_stored_for_the_user_is_refused(directory: Directory, user: str, key: str) -> None:
    code, out = _ssh(directory, "login", user, key, "id")
    assert code == 255 and "Permission denied (publickey)" in out, out


def test_a_user_added_to_the_directory_shows_on_every_pod_once_the_cache_expires(directory: Directory) -> None:
    for pod in directory.pods.values():  # looked up before they exist: cached as absent
        assert _run(pod, "id carol", 15)[0] != 0
    entry = slapdkit.user_ldif("carol", 5003, 5001)
    code, out = _run(directory.slapd, f"printf '%s' {shlex.quote(entry)} | ldapadd {' '.join(ADMIN)}", 30)
    assert code == 0, out
    for role, pod in directory.pods.items():
        ids = _wait(f"{role}: carol", lambda p=pod: _found(_run(p, "id carol", 15)), NEW_USER_BOUND_S)
        assert ids.startswith("uid=5003(carol)"), (role, ids)


def test_with_slapd_stopped_cached_users_still_resolve_and_a_new_pod_starts(
        directory: Directory, docker_client: Any, images: dict[str, Any], tmp_path: Path) -> None:
    for pod in directory.pods.values():
        _passwd_and_id(pod, "alice")  # in every cache
    directory.slapd.stop(timeout=5)
    try:
        for role, pod in directory.pods.items():
            started = time.monotonic()
            _, ids = _passwd_and_id(pod, "alice")
            assert ids.startswith("uid=5001(alice)"), (role, ids)
            assert time.monotonic() - started < 30, role  # answered from the cache, not after timeouts
        code, out = _ssh(directory, "login", "alice", "alice", "id -u")
        assert code == 0 and out.strip().splitlines()[-1] == "5001", out
        fresh = _start_pod(docker_client, images["login"].id, "login", tmp_path, network=directory.network,
                           ldap_host=directory.slapd.name)
        try:
            # sshd up within sssd's bounded wait, with the directory unreachable; the image's users work.
            _wait("a login pod started without its directory: sshd listening",
                  lambda: (_run(fresh, "ss -Hltn 'sport = :22' | grep -q LISTEN")[0] == 0, None), UP_BOUND_S)
            assert _run(fresh, f"id {wk.DEMO_USER}", 15)[0] == 0
        finally:
            fresh.remove(force=True)
    finally:
        directory.slapd.start()
