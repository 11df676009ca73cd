"""Jobs as the researcher on the login pod, through the real Services and pod DNS, and ssh in through the
login Service."""

from __future__ import annotations

import subprocess
from pathlib import Path

from kubekit import RELEASE, Kube
from waiting import wait_for

from slurmpod import well_known as wk


def test_srun_on_both_workers(kube: Kube) -> None:
    done = kube.as_researcher("srun -N2 hostname | sort")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == kube.workers


def test_a_job_array_completes(kube: Kube) -> None:
    done = kube.as_researcher("sbatch --wait --array=0-5 -o 'array-%A_%a.out' --wrap 'echo task $SLURM_ARRAY_TASK_ID "
                              "on $(hostname)' && cat array-*.out | sort && rm -f array-*.out", timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("task ")]
    assert sorted(int(line.split()[1]) for line in lines) == list(range(6)), done.stdout
    assert {line.split()[-1] for line in lines} <= set(kube.workers)


def test_a_job_writes_past_the_runtimes_64_mib_into_the_kubelets_dev_shm(kube: Kube) -> None:
    """The chart's memory-backed emptyDir, mounted by the kubelet at /dev/shm: a tmpfs a job can write
    128 MiB into, which the container runtime's own /dev/shm (64 MiB) refuses."""
    done = kube.as_researcher("srun -N1 -n1 bash -c 'f=/dev/shm/k8s-$SLURM_JOB_ID; "
                              "dd if=/dev/zero of=$f bs=1M count=128 status=none && stat -c %s $f && "
                              "stat -f -c %T /dev/shm && stat -c %a /dev/shm; rm -f $f'", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.split() == [str(128 * 2**20), "tmpfs", "1777"], done.stdout


def test_pod_names_resolve_through_the_headless_service(kube: Kube) -> None:
    for name in [kube.controller, *kube.workers]:
        got, _ = wait_for(f"{name} resolves on the login pod",
                          lambda n=name: kube.exec(kube.login, "getent", "hosts", n).stdout or None, 10)
        assert got.split()[0].startswith("10.244."), got


def test_the_researcher_sshs_in_through_the_login_service(kube: Kube, tmp_path: Path) -> None:
    """kube-proxy's rules take the login Service's cluster IP to sshd from the node, as a bastion's or a
    load balancer's traffic is; the host key is the ssh-host-keys Secret's."""
    svc = kube.get("service", f"{RELEASE}-login")
    ip, port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["port"]
    key = tmp_path / "id"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=30)
    public = (tmp_path / "id.pub").read_text(encoding="ascii").strip()
    added = kube.as_researcher(f"mkdir -p -m 700 ~/.ssh && echo '{public}' >> ~/.ssh/authorized_keys && "
                               "chmod 600 ~/.ssh/authorized_keys")
    assert added.returncode == 0, added.stderr
    host_key = kube.exec(kube.login, "ssh-keygen", "-y", "-f", wk.SSH_HOST_KEY)
    assert host_key.returncode == 0, host_key.stderr
    known = tmp_path / "known_hosts"
    where = ip if port == 22 else f"[{ip}]:{port}"  # known_hosts names a non-default port in brackets, sshd(8)
    known.write_text(f"{where} {' '.join(host_key.stdout.split()[:2])}\n", encoding="ascii")
    done = subprocess.run(["ssh", "-p", str(port), "-i", str(key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
                           "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={known}",
                           "-o", "ConnectTimeout=10", f"{wk.DEMO_USER}@{ip}", "hostname; id -un"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [kube.login, wk.DEMO_USER], done.stdout

