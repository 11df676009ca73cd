"""Jobs as the researcher on the login pod, through the real Services and pod DNS."""

from __future__ import annotations

from kubekit import Kube
from waiting import wait_for


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


def test_pod_names_resolve_through_the_headless_service(kube: Kube) -> None:
    for name in [kube.controller, *kube.workers]:
        got, _ = wait_for(f"{name} resolves on the login pod",
                          lambda n=name: kube.exec(kube.login, "getent", "hosts", n).stdout or None, 10)
        assert got.split()[0].startswith("10.244."), got
