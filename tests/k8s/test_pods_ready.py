"""Every pod of the release becomes Ready through the kubelet's own probes."""

from __future__ import annotations

from kubekit import NAMESPACE, POD_COUNT, Kube

from slurmpod_host.kube import release


def test_every_pod_is_ready_through_the_kubelets_probes(kube: Kube) -> None:
    pods = release.pods(kube.layout, NAMESPACE)
    assert len(pods) == POD_COUNT
    for pod in pods:
        name = pod["metadata"]["name"]
        assert release.is_ready(pod), f"{name}: {pod['status'].get('conditions')}"
        (container,) = pod["spec"]["containers"]
        # Ready comes from the chart's exec probe, run by the kubelet (no other way to become Ready).
        assert container["readinessProbe"]["exec"]["command"] == ["slurmpod", "probe", "ready"], name
        (status,) = pod["status"]["containerStatuses"]
        assert status["ready"] and status["restartCount"] == 0, f"{name}: {status}"
        assert pod["spec"]["nodeName"] == "slurmpod-k8s", name


def test_every_worker_is_an_idle_slurm_node(kube: Kube) -> None:
    for worker in kube.workers:
        assert "IDLE" in kube.node_state(worker), worker
