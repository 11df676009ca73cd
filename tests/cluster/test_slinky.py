"""Slinky's worker contract end to end: our worker image started the way SchedMD's slurm-operator starts
slurmd registers with the right CPUs, memory and features, and runs a job.

The extra pod keeps our worker template's image, entrypoint and volumes, and gets what the operator
would give it instead of ours: its args (`-Z --conf-server ... --conf '<sorted Key=Val>'`), only
POD_CPUS, POD_MEMORY and SLINKY_TOPOLOGY in the env, the shared slurm.key at /etc/slurm/slurm.key and
no downward-API files. Ref: SlinkyProject/slurm-operator internal/builder/workerbuilder/worker_app.go.
The cluster (`spslinky`, one ordinary worker, auth/slurm) is removed at the end, also on failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from clusterkit import Session, auth_slurm_cluster, host_memtotal_mib, node, node_json, wait_idle

from slurmpod import well_known as wk
from slurmpod_host.cluster import lifecycle, runtime

pytestmark = [pytest.mark.docker, pytest.mark.cluster, pytest.mark.smoke]

NAME = "spslinky"
POD_MEMORY_MIB = 1024
# Slinky's chart puts a NodeSet in partitions as `NodeSet=<name> Feature=<name>`, as ours does: this pod
# joins our `workers` NodeSet, with one more feature and a Weight from the NodeSet's ExtraConf.
NODESET = "workers"
EXTRA_FEATURE = "slinky-extra"
WEIGHT = 5
REGISTER_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def spslinky(docker_client: Any, flavor: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with auth_slurm_cluster(docker_client, NAME, flavor, 1, tmp_path_factory.mktemp("spslinky-state")) as s:
        yield s


def _slinky_patch(controller: str) -> lifecycle.PodPatch:
    # slurmdConfArgs: sorted Key=Val, wrapped in single quotes, Topology referring to the env by name.
    conf = f"'Features={EXTRA_FEATURE},{NODESET} Topology='\"$SLINKY_TOPOLOGY\"' Weight={WEIGHT}'"
    return lifecycle.PodPatch(
        args=("-Z", "--conf-server", f"{controller}:{wk.SLURMCTLD_PORT}", "--conf", conf),
        env={"SLINKY_TOPOLOGY": "", "POD_CPUS": "1", "POD_MEMORY": str(POD_MEMORY_MIB)},
        env_exact=True,
        image_entrypoint=True,  # the operator sets no command: our image's ENTRYPOINT takes the args
        move_mounts={"/run/secrets/slurmpod/slurm": wk.SLURM_ETC, wk.PODINFO_DIR: None},
        read_only_mounts=(wk.SLURM_ETC,),
    )


def test_slinky_style_worker_registers_and_runs_a_job(spslinky: Session) -> None:
    s = spslinky
    name, client = s.cluster.name, s.client
    plan = lifecycle.plan_pod(client, name, "worker", len(s.cluster.workers), _slinky_patch(s.cluster.controller))
    pod = plan.name
    try:
        lifecycle.start_pod(client, name, plan)
        env = client.api.inspect_container(pod)["Config"]["Env"]  # the pod spec's env and the image's
        assert not any(e.startswith("SLURMPOD_") for e in env), env
        wait_idle(s, pod, REGISTER_TIMEOUT_S)
        n, raw = node(s, pod), node_json(s, pod)
        assert n is not None
        assert n.cpus == (os.cpu_count() or 1)  # the host's shape, as slurmd -C sees it
        # POD_CPUS=1: one core for jobs (rounded up to whole cores), the others CoreSpecCount.
        assert 1 <= n.cpus - n.specialized_cores * raw["threads"] <= raw["threads"], raw
        # POD_MEMORY: jobs get that much; the rest of the host's memory is MemSpecLimit.
        assert n.real_memory == host_memtotal_mib()
        assert n.specialized_memory == host_memtotal_mib() - POD_MEMORY_MIB
        assert n.features == (EXTRA_FEATURE, NODESET)
        assert raw["weight"] == WEIGHT
        result = s.as_researcher("srun", "-w", pod, "hostname", timeout=120)
        assert result.code == 0, result.stderr
        assert result.stdout.strip() == pod
    finally:
        if pod in {c.name for c in runtime.find(client, name).containers}:
            logs = runtime.logs_tail(client, pod, 60)
            print(logs)
            lifecycle.delete_pod(client, name, pod, run_prestop=False, grace_s=0)
