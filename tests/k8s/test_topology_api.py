"""`topology.source: api` on a real API server: the controller, under the chart's controller
ServiceAccount and RBAC, reads the Node's real labels with its real token and renders topology.conf from
them; a pod under a ServiceAccount without that RBAC is refused (HTTP 403) by the API server.

A second, small release in its own namespace (one controller, one worker, no login pod) leaves the
session's release as it is. Ref: https://kubernetes.io/docs/reference/access-authn-authz/rbac/
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from kubekit import Kube, note
from waiting import wait_for

from slurmpod import well_known as wk
from slurmpod_host.kube import release
from slurmpod_host.kube.layout import NODE_NAME

RELEASE, NAMESPACE = "topo", "topo"
BLOCK = "k8sblock1"
VALUES = ["--set=cluster.topologyPlugin=tree", "--set=cluster.topology.source=api",
          "--set=cluster.topology.syncIntervalSeconds=5", "--set=topology.apiAccess=true",
          "--set=policy.topology.plugin=tree", "--set=nodesets.workers.replicas=1",
          "--set=loginsets.login.enabled=false",
          # The session's release holds 1750m of the node's 2 CPUs.
          "--set=controller.slurmctld.resources.requests.cpu=50m",
          "--set=nodesets.workers.slurmd.resources.requests.cpu=50m"]
SYNC_BOUND_S = 5 * 2 + 20  # two sync passes and a reconfigure
# The in-cluster Kubernetes seam the controller uses (slurmpod.kube), run in a pod.
READ_NODES = ("from slurmpod.kube import access, library; import os, json; "
              "print(json.dumps([n['metadata']['labels'] for n in library.LibraryKube(access.in_cluster(os.environ))"
              ".list_nodes()['items']]))")


@pytest.fixture(scope="module")
def topo(kube: Kube) -> Iterator[release.Chart]:
    kube.kubectl("label", "node", NODE_NAME, f"{wk.LABEL_TOPOLOGY}={BLOCK}", "--overwrite")
    chart = release.Chart(kube.chart.repo, RELEASE, NAMESPACE)
    try:
        done = release.install(kube.layout, chart, [*release.flavor_values(kube.flavor), *VALUES])
        assert done.returncode == 0, done.stderr
        waited = release.wait_ready(kube.layout, NAMESPACE, 2, 240)
        note(f"release {RELEASE}: controller and worker Ready in {waited:.1f}s")
        yield chart
    finally:
        # Gone at once (no preStop drains to wait for): its namespace finalizes while the suite goes on.
        release.helm(kube.layout, chart, "uninstall", RELEASE, "-n", NAMESPACE)
        kube.kubectl("-n", NAMESPACE, "delete", "pods", "--all", "--grace-period=0", "--force", check=False)
        kube.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)
        kube.kubectl("label", "node", NODE_NAME, f"{wk.LABEL_TOPOLOGY}-", check=False)


def test_the_controller_renders_topology_from_real_node_labels(kube: Kube, topo: release.Chart) -> None:
    controller, worker = f"{RELEASE}-controller-0", f"{RELEASE}-worker-0"
    pod = json.loads(kube.kubectl("-n", NAMESPACE, "get", "pod", controller, "-o", "json").stdout)
    assert pod["spec"]["serviceAccountName"] == f"{RELEASE}-controller"

    def rendered() -> str | None:
        text = kube.kubectl("-n", NAMESPACE, "exec", controller, "--", "cat", wk.TOPOLOGY_CONF, check=False).stdout
        return text if f"SwitchName={BLOCK}" in text and worker in text else None
    text, waited = wait_for(f"{wk.TOPOLOGY_CONF} places {worker} in {BLOCK}", rendered, SYNC_BOUND_S, poll=1.0)
    note(f"topology.conf from the Node's label after {waited:.1f}s:\n{text.strip()}")


def test_a_pod_without_the_rbac_is_refused(kube: Kube, topo: release.Chart) -> None:
    image = f"slurmpod/controller:{kube.flavor}"
    overrides = {"spec": {"serviceAccountName": "default", "automountServiceAccountToken": True,
                          "containers": [{"name": "probe", "image": image, "imagePullPolicy": "Never",
                                          "command": ["sleep", "600"]}]}}
    kube.kubectl("-n", NAMESPACE, "run", "no-rbac", f"--image={image}", "--restart=Never",
                 f"--overrides={json.dumps(overrides)}")
    try:
        kube.kubectl("-n", NAMESPACE, "wait", "--for=condition=Ready", "pod/no-rbac", "--timeout=60s", timeout=90)
        script = f'exec "$(head -1 "$(command -v slurmpod)" | cut -c3-)" -c "{READ_NODES}"'
        done = kube.kubectl("-n", NAMESPACE, "exec", "no-rbac", "--", "bash", "-c", script, check=False)
        assert done.returncode != 0, done.stdout
        assert "HTTP 403" in done.stderr, done.stderr
    finally:
        kube.kubectl("-n", NAMESPACE, "delete", "pod", "no-rbac", "--grace-period=0", "--force", check=False)
