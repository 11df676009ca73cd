"""A bad value fails `helm install` against the real API server, naming the key, and installs nothing."""

from __future__ import annotations

import pytest
from kubekit import NAMESPACE, Kube

from slurmpod_host.kube import release

BAD = [
    ("--set=nodesets.workers.priorityClass=urgent", "nodesets.workers.priorityClass"),
    ("--set=nodesets.workers.cgroup.access=privileged", "nodesets.workers.cgroup.access"),
    # hostV1 is node-root-equivalent: refused unless the values accept that
    ("--set=nodesets.workers.cgroup.access=hostV1", "nodesets.workers.cgroup.acceptNodeRootEquivalent"),
    ("--set=controller.slurmctld.image.digest=sha256:nothex", "controller.slurmctld.image.digest"),
    # a misspelt key: values.schema.json names it and where it is
    ("--set=nodesets.workers.sharedMemroy.sizeLimit=8Gi", "'/nodesets/workers': additional properties 'sharedMemroy'"),
]


@pytest.mark.parametrize(("flag", "key"), BAD, ids=[k for _, k in BAD])
def test_a_bad_value_fails_helm_install_naming_the_key(kube: Kube, flag: str, key: str) -> None:
    done = release.helm(kube.layout, kube.chart, "install", "bad", str(kube.chart.path), "-n", NAMESPACE, flag)
    assert done.returncode != 0 and key in done.stderr, done.stdout + done.stderr
    listed = release.helm(kube.layout, kube.chart, "list", "-n", NAMESPACE, "-q", "--all")
    assert "bad" not in listed.stdout.split()
