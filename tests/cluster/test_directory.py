"""Users from the organisation's directory on a whole cluster: slapd in its own pod, SSSD on every role.

This module runs its own cluster (`spdir`, two workers) from the chart rendered with `sssd.enabled`, plus a
directory pod: Debian's slapd (tests/slapd, built from the images' root file system), seeded before it
serves with alice (uid 5001, groups ml and inference) and bob (uid 5002), each with an ssh public key.
The site's sssd.conf is the Secret the chart names; NetworkPolicies are enforced, so SSSD reaches slapd only
through the chart's directory egress. alice and bob exist only in slapd. Every researcher action goes
through ssh from the host to the login Service, as from a laptop; the cluster is removed at the end.
Ref: sssd.conf(5), sssd-ldap(5), https://slurm.schedmd.com/pam_slurm_adopt.html
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cgroupkit
import pytest
import slapdkit
import yaml
from clusterkit import Session, job, own_cluster, restore_pod, wait_for, wait_idle
from policyvolume import PolicyVolume

from slurmpod_host.cluster import cli
from slurmpod_host.cluster import well_known as host_wk
from slurmpod_host.cluster.services import LOOPBACK
from slurmpod_host.images import flavors

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

NAME = "spdir"
WORKERS = 2
ROOT = Path(__file__).resolve().parents[2]
HELM = ROOT / ".tools" / "bin" / "helm"
SLAPD_POD = f"{NAME}-slapd-0"
# The directory pod's name on the cluster network (<pod>.<service>, as the emulator and a headless
# Service name it). Ref: https://kubernetes.io/docs/concepts/services-networking/dns-pod-service/
SLAPD_HOST = f"{SLAPD_POD}.{NAME}-slapd"
SSH_TIMEOUT_S = 60  # ConnectTimeout 10 s plus a login on a loaded 2-core host
# sssd answers once its back end has reached slapd; a back end that started offline retries after
# offline_timeout (5 s in tests/slapd/sssd.conf, with backoff). Ref: sssd.conf(5)
DIRECTORY_UP_S = 90.0
JOB_WORST_S = 120.0  # a scheduling pass and a prolog, on a loaded host
BY_GROUP = """
tiers:
  - name: normal
    partitions: [main]
  - name: high
    partitions: [high]
    access: {groups: [inference]}
defaultTier: normal
"""
ALICE_ID = "uid=5001(alice) gid=5001(alice) groups=5001(alice),6001(ml),6002(inference)"
BOB_ID = "uid=5002(bob) gid=5002(bob) groups=5002(bob)"


@dataclass(frozen=True)
class Directory:
    s: Session
    keys: Path
    port: int  # the login Service on the host's loopback

    @property
    def pods(self) -> tuple[str, ...]:
        return (self.s.cluster.controller, *self.s.cluster.workers, self.s.cluster.login)

    def ssh(self, user: str, command: str, key: str | None = None,
            timeout: float = SSH_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """``command`` as ``user`` on the login pod, over ssh from the host through the login Service."""
        return subprocess.run(
            ["ssh", "-p", str(self.port), "-i", str(self.keys / (key or user)), "-o", "IdentitiesOnly=yes",
             "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
             "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR", f"{user}@{LOOPBACK}", command],
            capture_output=True, text=True, timeout=timeout, check=False)

    def slapd(self, cmd: str) -> tuple[int, str]:
        code, out = self.s.client.containers.get(SLAPD_POD).exec_run(["timeout", "30", "sh", "-c", cmd])
        return code, out.decode(errors="replace")


def _directory_manifests(out: Path, flavor: flavors.Flavor, keys: Path) -> Path:
    """deploy/helm/slurmpod rendered with SSSD on (egress to the directory pods only), the directory, and
    the site's sssd.conf for its Secret."""
    rendered = subprocess.run(
        [str(HELM), "template", "slurmpod", str(ROOT / "deploy" / "helm" / "slurmpod"), "--namespace", "slurmpod",
         "--set", "sssd.enabled=true", "--set", "sssd.secretName=ldap-sssd",
         "--set", "networkPolicy.directory.ports={389}",
         "--set", "networkPolicy.directory.to[0].podSelector.matchLabels.slurmpod\\.io/role=directory"],
        capture_output=True, text=True, timeout=60, check=False)
    assert rendered.returncode == 0, rendered.stderr
    (out / "slurmpod.yaml").write_text(rendered.stdout, encoding="utf-8")
    labels = {"slurmpod.io/role": "directory"}
    seed = slapdkit.seed_ldif(keys)
    directory = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "slapd-seed", "namespace": "slurmpod"},
         "data": {"seed.ldif": seed}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "slapd", "namespace": "slurmpod"},
         "spec": {"clusterIP": "None", "selector": labels, "ports": [{"name": "ldap", "port": 389}]}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "slapd", "namespace": "slurmpod"},
         "spec": {"serviceName": "slapd", "replicas": 1, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels}, "spec": {
                      "automountServiceAccountToken": False, "enableServiceLinks": False,
                      "containers": [{
                          "name": "slapd", "image": slapdkit.image_tag(flavor),
                          # Seeded offline, once, before it serves: no pod ever asks an empty directory.
                          "command": ["sh", "-c", "[ -e /var/lib/ldap/seeded ] || { slapadd -n 1 -l /seed/seed.ldif"
                                      " && chown -R openldap:openldap /var/lib/ldap && touch /var/lib/ldap/seeded; }"
                                      " && exec slapd -d 0 -u openldap -g openldap -h 'ldap:/// ldapi:///'"],
                          "volumeMounts": [{"name": "seed", "mountPath": "/seed", "readOnly": True}]}],
                      "volumes": [{"name": "seed", "configMap": {"name": "slapd-seed"}}]}}}},
    ]
    (out / "directory.yaml").write_text(yaml.safe_dump_all(directory), encoding="utf-8")
    (out / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": ["directory.yaml", "slurmpod.yaml"]}), encoding="utf-8")
    # The site's Secret, created the way docs/directory.md says (`kubectl create secret generic`).
    (out / "sssd.conf").write_text(slapdkit.sssd_conf(SLAPD_HOST), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def directory(docker_client: Any, flavor: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Directory]:
    flav = flavors.get(flavor)
    keys = slapdkit.make_keys(tmp_path_factory.mktemp("keys"))
    slapdkit.build_image(docker_client, flav)
    manifests = _directory_manifests(tmp_path_factory.mktemp("manifests"), flav, keys)
    with own_cluster(docker_client, NAME, flavor, WORKERS, tmp_path_factory.mktemp("state"),
                     "--manifests", str(manifests),
                     "--secret-file", f"ldap-sssd:sssd.conf={manifests / 'sssd.conf'}") as s:
        (login,) = [p for p in cli.published(NAME) if p.key == host_wk.LOGIN_SSH]
        d = Directory(s, keys, login.host_port)
        for pod in d.pods:
            wait_for(f"{pod}: sssd answering for alice", lambda p=pod: _passwd(d, p, "alice") or None,
                     DIRECTORY_UP_S)
        yield d


def _passwd(d: Directory, pod: str, user: str) -> str:
    r = d.s.root_in(pod, "getent", "-s", "sss", "passwd", user, timeout=30)
    return r.stdout.strip() if r.code == 0 else ""


def _id(d: Directory, pod: str, user: str) -> str:
    """`id USER` with its groups sorted (NSS lists them in no fixed order)."""
    r = d.s.root_in(pod, "id", user, timeout=30)
    if r.code != 0:
        return f"exit {r.code}: {r.stderr.strip()}"
    head, _, groups = r.stdout.strip().partition(" groups=")
    return f"{head} groups={','.join(sorted(groups.split(',')))}"


def _as(d: Directory, user: str, command: str, timeout: float = SSH_TIMEOUT_S) -> str:
    done = d.ssh(user, command, timeout=timeout)
    assert done.returncode == 0, (user, command, done.stdout, done.stderr)
    return done.stdout


def test_alice_and_bob_are_the_same_uid_and_groups_on_every_pod(directory: Directory) -> None:
    for pod in directory.pods:
        assert _passwd(directory, pod, "alice") == "alice:*:5001:5001:Alice:/home/alice:/bin/bash", pod
        assert (_id(directory, pod, "alice"), _id(directory, pod, "bob")) == (ALICE_ID, BOB_ID), pod


@pytest.mark.smoke  # each flavor's SSSD (26.05: sid's) serves sshd's AuthorizedKeysCommand
def test_alice_sshs_in_through_the_login_service_with_the_key_in_ldap(directory: Directory) -> None:
    out = _as(directory, "alice", "id -u; id -Gn | tr ' ' '\\n' | sort | xargs; hostname; stat -c '%U %a' $HOME")
    assert out.split("\n")[:4] == ["5001", "alice inference ml", directory.s.cluster.login, "alice 700"], out


@pytest.mark.parametrize(("user", "key"), [("alice", "other"), ("alice", "bob"), ("bob", "alice")],
                         ids=["a-key-in-no-entry", "another-users-key", "alices-key-for-bob"])
def test_a_key_not_stored_for_the_user_is_refused(directory: Directory, user: str, key: str) -> None:
    done = directory.ssh(user, "id", key=key)
    assert done.returncode == 255 and "Permission denied (publickey)" in done.stderr, done.stderr


def test_no_user_reads_the_sites_sssd_conf_or_sssds_cache(directory: Directory) -> None:
    """sssd.conf may hold the directory's bind password (ldap_default_authtok): root's alone, on the login
    pod and in a job on a worker, as the Secret mount and the installed copy."""
    secret = "/run/secrets/slurmpod/sssd/sssd.conf"
    probe = (f"for f in {secret} /etc/sssd/sssd.conf /var/lib/sss/db/cache_example.ldb; do "
             "if cat $f >/dev/null 2>&1; then echo READ $f; else echo refused; fi; done")
    on_login = _as(directory, "alice", probe)
    in_job = _as(directory, "alice", f"srun -w {directory.s.cluster.workers[0]} -t 1 sh -c {shlex.quote(probe)}")
    assert on_login.split() == in_job.split() == ["refused"] * 3, (on_login, in_job)
    installed = directory.s.root_in(directory.s.cluster.login, "stat", "-c", "%U %a", "/etc/sssd/sssd.conf")
    assert installed.stdout.strip() == "root 600", installed.stdout


@pytest.mark.smoke  # slurmd and slurmstepd of each Slurm release resolve the user through SSSD
def test_alices_batch_and_srun_tasks_run_as_her_on_both_workers_and_her_files_are_hers(
        directory: Directory) -> None:
    task = "echo $(hostname) $(id -u) $(id -g) $(id -Gn | tr ' ' '\\n' | sort | xargs)"
    workers = sorted(directory.s.cluster.workers)
    srun = _as(directory, "alice", f"srun -N2 --ntasks-per-node=1 -t 2 sh -c {shlex.quote(task)} | sort")
    assert srun.splitlines() == [f"{w} 5001 5001 alice inference ml" for w in workers], srun
    script = f"srun -N2 --ntasks-per-node=1 sh -c {shlex.quote(task + ' > $HOME/dir-test/$(hostname)')}"
    _as(directory, "alice", "rm -rf ~/dir-test && mkdir ~/dir-test")
    batch = _as(directory, "alice", f"sbatch --parsable --wait -N2 -t 2 -o ~/dir-test/batch.out "
                                    f"--wrap {shlex.quote(script)}", timeout=SSH_TIMEOUT_S + JOB_WORST_S)
    record = job(directory.s, batch.strip().split(";")[0])
    assert record.state == "COMPLETED", record
    listed = _as(directory, "alice", "cd ~/dir-test && for f in *; do stat -c '%n %u:%g %U' $f; cat $f; done")
    lines = listed.splitlines()
    assert lines[0] == "batch.out 5001:5001 alice", listed
    for w in workers:  # written on each worker, read on the login pod through the shared /home
        i = lines.index(f"{w} 5001:5001 alice")
        assert lines[i + 1] == f"{w} 5001 5001 alice inference ml", listed
    # On the workers too, the home and what the job wrote are alice's, and bob cannot read them.
    for w in workers:
        owned = directory.s.root_in(w, "stat", "-c", "%U:%G %a", "/home/alice", f"/home/alice/dir-test/{w}")
        home, written = owned.stdout.split("\n")[:2]
        assert (home, written.split()[0]) == ("alice:alice 700", "alice:alice"), owned.stdout
    assert directory.ssh("bob", "cat /home/alice/dir-test/batch.out").returncode != 0


@pytest.mark.smoke  # the plugin, built per Slurm version, reads directory groups on the controller
def test_the_inference_group_opens_its_tier_to_alice_and_not_to_bob(directory: Directory) -> None:
    policy = PolicyVolume(directory.s, NAME)
    policy.publish({"policy.yaml": BY_GROUP})
    try:
        held = "sbatch --parsable --hold -p high -o /dev/null --wrap true"

        def alice_in() -> str | None:
            done = directory.ssh("alice", held)
            return done.stdout.strip() if done.returncode == 0 else None
        # The plugin reloads the policy file when its mtime changes, at the next submission.
        job_id, _ = wait_for("alice's job in tier high", alice_in, 30)
        directory.s.root_in(directory.s.cluster.controller, "scancel", job_id.split(";")[0], timeout=30)
        refused = directory.ssh("bob", held)
        assert refused.returncode != 0 and "high" in refused.stderr, refused.stderr
    finally:
        policy.restore()


def test_pam_slurm_adopt_lets_alice_into_the_worker_running_her_job_and_refuses_bob(
        directory: Directory) -> None:
    """With cgroups on (PrologFlags=Contain), ssh from the login pod to a worker, with the user's own key
    pair on the shared /home, whose public half the directory holds."""
    for user in ("alice", "bob"):
        private = (directory.keys / user).read_text()
        _as(directory, user, f"umask 077; mkdir -p ~/.ssh; printf '%s' {shlex.quote(private)} > ~/.ssh/id_ed25519")
    worker = directory.s.cluster.workers[0]
    ssh = " ".join(cgroupkit.SSH)
    with cgroupkit.cgroup_cluster(directory.s):
        job_id = _as(directory, "alice", f"sbatch --parsable -w {worker} -t 3 -o /dev/null "
                                         "--wrap 'touch ~/adopt-started; sleep 170'").strip().split(";")[0]
        try:
            wait_for(f"job {job_id} running its script",
                     lambda: directory.ssh("alice", "test -e ~/adopt-started").returncode == 0 or None, JOB_WORST_S)
            inside = directory.ssh("alice", f"{ssh} {worker} 'id -u; cat /proc/self/cgroup'")
            refused = directory.ssh("bob", f"{ssh} {worker} id -u")
        finally:
            directory.s.root_in(directory.s.cluster.controller, "scancel", job_id, timeout=30)
            directory.ssh("alice", "rm -f ~/adopt-started")
            wait_idle(directory.s, worker, cgroupkit.JOB_DONE_WORST_S)
    assert inside.returncode == 0, inside.stderr
    assert inside.stdout.splitlines()[0] == "5001", inside.stdout
    assert f"/job_{job_id}/step_extern" in inside.stdout, inside.stdout
    assert refused.returncode == 255, (refused.stdout, refused.stderr)


def test_a_user_added_to_slapd_appears_on_every_pod_once_the_cache_expires(directory: Directory) -> None:
    for pod in directory.pods:  # looked up before carol exists: cached as absent
        assert _id(directory, pod, "carol").startswith("exit ")
    code, out = directory.slapd(f"printf '%s' {shlex.quote(slapdkit.user_ldif('carol', 5003, 5001))} | "
                                f"ldapadd {' '.join(slapdkit.ADMIN)}")
    assert code == 0, out
    for pod in directory.pods:
        wait_for(f"{pod}: carol", lambda p=pod: _id(directory, p, "carol").startswith("uid=") or None,
                 slapdkit.NEW_USER_BOUND_S)
        assert _id(directory, pod, "carol").startswith("uid=5003(carol) gid=5001(alice)"), pod


@pytest.mark.smoke  # each flavor's SSSD has its own cache and offline behaviour
def test_with_slapd_stopped_cached_users_keep_working_and_a_worker_pod_still_starts(
        directory: Directory) -> None:
    for pod in directory.pods:
        assert _id(directory, pod, "alice") == ALICE_ID  # in every cache
    slapd = directory.s.client.containers.get(SLAPD_POD)
    slapd.stop(timeout=5)
    try:
        for pod in directory.pods:
            started = time.monotonic()
            assert _id(directory, pod, "alice") == ALICE_ID, pod
            assert time.monotonic() - started < 30, pod  # from the cache, not after network timeouts
        assert _as(directory, "alice", "id -u").split("\n")[0] == "5001"
        worker = directory.s.cluster.workers[1]
        restore_pod(directory.s, worker)  # a new pod, its SSSD cache empty, the directory down: IDLE within bounds
        srun = _as(directory, "alice", f"srun -w {directory.s.cluster.workers[0]} -t 1 id -u")
        assert srun.strip() == "5001", srun
    finally:
        slapd.start()
