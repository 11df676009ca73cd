"""GPUs registered as GRES end to end under configless dynamic nodes.

One worker runs the production worker image with the C fake libnvidia-ml.so.1 (tests/fakes) as the
driver's library, showing 8 GPUs: slurmpod registers it with Gres=gpu:8 from NVML, and its slurmd finds
the same 8 through Slurm's gpu/nvml plugin (the controller's gres.conf says AutoDetect=nvml). The other
worker has no NVML at all and must keep working (gpu/generic).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import healthkit
import pytest
from clusterkit import Session, node, restore_pod, wait_idle
from healthkit import FAKE_STATE_DIR

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

GPUS = 8
# A model with no all-reduce floor: the fake NCCL's timing on this loaded host is not a link's
# (test_health_gpus.py), and the startup health check must not drain the pod over it. affinity=online:
# every GPU near all CPUs this machine has (gpu/nvml turns it into Cores=, which must fill sockets).
STATE = f"gpus={GPUS}\nname=NVIDIA A100-SXM4-80GB\naffinity=online\n"


@pytest.fixture(scope="module")
def gpu_worker(session: Session, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    worker = session.cluster.workers[0]
    with healthkit.fakes_installed(session, tmp_path_factory.mktemp("fakegpu")):
        healthkit.write_file(session, session.cluster.login, f"{FAKE_STATE_DIR}/{worker}", STATE)
        healthkit.replace_worker(session, worker, healthkit.fake_gpu_patch())
        try:
            try:
                wait_idle(session, worker)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{_show(session, worker)}") from None
            yield worker
        finally:
            try:
                restore_pod(session, worker)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{_show(session, worker)}") from None


def _show(s: Session, name: str) -> str:
    """What Slurm made of the node's GPUs, for a failure's message."""
    shown = s.root_in(s.cluster.controller, "scontrol", "-d", "show", "node", name).stdout
    logs = s.client.containers.get(name).logs(tail=400).decode("utf-8", "replace")  # slurmd logs to stdout
    ctl = s.client.containers.get(s.cluster.controller).logs(tail=400).decode("utf-8", "replace")
    wanted = ("gres", "gpu", "error", "drain", name)
    pick = [x for x in (logs + "\n" + ctl).splitlines() if any(w in x.lower() for w in wanted)]
    return shown + "\n".join(pick)[-6000:]


@pytest.mark.smoke
def test_fake_gpu_worker_registers_gpu8_and_a_2_gpu_job_sees_2(session: Session, gpu_worker: str) -> None:
    n = node(session, gpu_worker)
    assert n is not None and healthkit.gpu_count(n.gres) == GPUS, n
    result = session.as_researcher("srun", "-w", gpu_worker, "--gres=gpu:2", "sh", "-c",
                                   "echo CVD=$CUDA_VISIBLE_DEVICES")
    assert result.code == 0, (result.stderr, _show(session, gpu_worker))
    seen = re.search(r"^CVD=(\S*)$", result.stdout, re.MULTILINE)
    assert seen is not None, result.stdout
    devices = seen.group(1).split(",")
    assert len(devices) == 2 and len(set(devices)) == 2, seen.group(1)


@pytest.mark.smoke
def test_cpu_only_worker_keeps_working_beside_it(session: Session, gpu_worker: str) -> None:
    cpu = next(w for w in session.cluster.workers if w != gpu_worker)
    n = node(session, cpu)
    assert n is not None and n.usable_idle and "gpu" not in n.gres, n
    result = session.as_researcher("srun", "-w", cpu, "hostname")
    assert (result.code, result.stdout.strip()) == (0, cpu), result.stderr
    # a GPU job is refused on it, not run without GPUs
    refused = session.as_researcher("srun", "-w", cpu, "--gres=gpu:1", "--immediate=5", "true")
    assert refused.code != 0, refused.stdout
