"""The chart's values.schema.json: a misspelt key fails `helm template` (and install, upgrade, lint) naming
it, the keys the user names (nodesets, environment, resources, annotations) pass, and the committed
schema is what values.yaml gives."""

from __future__ import annotations

import helmkit
import pytest

from slurmpod_host import chart_schema

SCHEMA = helmkit.CHART / "values.schema.json"


def test_the_committed_schema_is_what_values_yaml_gives() -> None:
    """Fails when values.yaml and the schema drift: run `make manifests` and commit."""
    assert SCHEMA.read_text(encoding="utf-8") == chart_schema.render()


def _new_nodeset(name: str) -> list[str]:
    return [f"--set=nodesets.{name}.enabled=true", f"--set=nodesets.{name}.replicas=1",
            f"--set=nodesets.{name}.priorityClass=inference", f"--set=nodesets.{name}.terminationGracePeriodSeconds=60",
            f"--set=nodesets.{name}.slurmd.image.repository=slurmpod/worker",
            f"--set=nodesets.{name}.slurmd.image.tag=24.11", f"--set=nodesets.{name}.disruptionBudget.enabled=false"]


@pytest.mark.parametrize(("args", "key"), [
    (["--set=nodesets.workers.sharedMemroy.sizeLimit=8Gi"], "sharedMemroy"),
    (["--set=cluster.mpidefault=pmix"], "mpidefault"),
    (["--set=metrics.servicemonitor.enabled=true"], "servicemonitor"),
    (["--set=policy.topology.plugn=tree"], "plugn"),
    ([*_new_nodeset("gpu"), "--set=nodesets.gpu.slurmd.imag.tag=x"], "imag"),
    (["--set=loginsets.login.service.nodeport=30022"], "nodeport"),
    (["--set=k8sSync.remediation.restartpod=true"], "restartpod"),
    (["--set=topology.apiaccess=true"], "apiaccess"),
    (["--set=secrets.munge.key=munge.key"], "key"),
], ids=["nodeset-key", "cluster-key", "metrics-key", "policy-key", "new-nodeset-key", "loginset-key",
        "remediation-key", "top-level-section-key", "secret-key"])
def test_a_misspelt_key_fails_naming_it(args: list[str], key: str) -> None:
    done = helmkit.helm("template", "slurmpod", str(helmkit.CHART), *args)
    assert done.returncode != 0, done.stdout[-400:]
    assert "schema" in done.stderr and key in done.stderr, done.stderr


@pytest.mark.parametrize("args", [
    [*_new_nodeset("gpu"), "--set=nodesets.gpu.slurmd.resources.limits.nvidia\\.com/gpu=8",
     "--set=nodesets.gpu.slurmd.env.NCCL_DEBUG=INFO", "--set=nodesets.gpu.sharedMemory.sizeLimit=64Gi"],
    ["--set=metrics.service.annotations.prometheus\\.io/scrape=true",
     "--set=metrics.serviceMonitor.labels.release=prometheus",
     "--set=loginsets.login.service.annotations.service\\.beta\\.kubernetes\\.io/aws-load-balancer-type=nlb"],
    ["--set=cluster.topology.source=api", "--set=topology.apiAccess=true", "--set=cluster.topologyPlugin=tree"],
    ["--set=policy.acceptUnverifiedAccounts=true", "--set=policy.topology.optOut.users={alice}"],
    ["--set=controller.slurmctld.resources.limits.ephemeral-storage=1Gi"],
], ids=["a-new-nodeset-with-its-own-resources-and-env", "annotations-and-labels", "topology-settings",
        "policy-keys-beyond-the-defaults", "any-resource-name"])
def test_the_keys_users_name_pass(args: list[str]) -> None:
    helmkit.template(*args)  # asserts it renders
