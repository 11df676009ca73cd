"""Kubernetes node and pod documents for the topology tests, one small cluster per provider.

Label names come from each provider's published docs (cited per provider below); the values are shaped
like the examples on those pages. `kubectl get nodes -o json` prints a NodeList of this shape.
"""

from __future__ import annotations

from typing import Any

from slurmpod import well_known as wk


def node(name: str, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": {}, "status": {}}


def node_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "NodeList", "items": items, "metadata": {"resourceVersion": "1"}}


def pod(name: str, node_name: str | None, role: str = "worker") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "slurmd", "image": "slurmpod/worker"}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "spec": spec,
            "metadata": {"name": name, "namespace": "slurm", "labels": {wk.LABEL_ROLE: role}}}


def pod_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PodList", "items": items, "metadata": {"resourceVersion": "1"}}


def _gke() -> list[dict[str, Any]]:
    # Ref: https://cloud.google.com/kubernetes-engine/docs/how-to/gpu-topology
    # (cloud.google.com/gce-topology-block, -subblock, -host; values are opaque IDs)
    out = []
    for i in range(8):
        block, sub = ("a1f3", "c2d4")[i // 4], f"{('a1f3', 'c2d4')[i // 4]}-s{i // 2}"
        out.append(node(f"gke-a3-pool-{i}", {wk.LABEL_GKE_BLOCK: block, wk.LABEL_GKE_SUBBLOCK: sub,
                                            wk.LABEL_GKE_HOST: f"h{i:02d}e9"}))
    out.append(node("gke-default-pool-0"))  # a system node: no placement
    return out


def _eks() -> list[dict[str, Any]]:
    # Ref: https://docs.aws.amazon.com/eks/latest/userguide/ (labels topology.k8s.aws/network-node-layer-1..3,
    # values nn-<17 hex>, as in https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/how-ec2-instance-topology-works.html)
    out = []
    for i in range(6):
        layers = ["nn-1a00000000000001", f"nn-2b0000000000000{i // 4}", f"nn-3c0000000000000{i // 2}"]
        labels = {f"{wk.LABEL_EKS_LAYER_PREFIX}{n + 1}": v for n, v in enumerate(layers)}
        out.append(node(f"ip-10-0-{i}-7.ec2.internal", labels))
    return out


def _coreweave() -> list[dict[str, Any]]:
    # Ref: https://docs.coreweave.com/products/networking/hpc-interconnect/infiniband-roce-labels
    # (backend.coreweave.cloud/fabric, backend.coreweave.cloud/leafgroup: a compact identifier, e.g. a number)
    return [node(f"g{i:03d}", {wk.LABEL_COREWEAVE_FABRIC: "us-east-04a-ib1",
                               wk.LABEL_COREWEAVE_LEAFGROUP: str(i // 4 + 1),
                               "backend.coreweave.cloud/flavor": "infiniband"}) for i in range(8)]


def _topograph() -> list[dict[str, Any]]:
    # Ref: https://github.com/NVIDIA/topograph/blob/main/docs/k8s.md
    # (network.topology.nvidia.com/accelerator: nvl1, block: s1, spine: s2, datacenter: s3)
    out = []
    for i in range(8):
        labels = {wk.LABEL_TOPOGRAPH_DATACENTER: "s3", wk.LABEL_TOPOGRAPH_SPINE: "s2",
                  wk.LABEL_TOPOGRAPH_BLOCK: f"s1-{i // 4}"}
        if i < 4:  # an NVLink domain on the first four only
            labels[wk.LABEL_TOPOGRAPH_ACCELERATOR] = "nvl1"
        out.append(node(f"node-{i}", labels))
    return out


def _nebius() -> list[dict[str, Any]]:
    # Ref: https://docs.nebius.com/kubernetes/gpu/topology-aware-scheduling
    # (topology.nebius.com/gpu-cluster-id, tier-2 spine, tier-1 rack-level block; tier-0 NVLink where present)
    return [node(f"computeinstance-e00{i}", {wk.LABEL_NEBIUS_CLUSTER: "computegpucluster-e00x7",
                                           f"{wk.LABEL_NEBIUS_TIER_PREFIX}2": "t2-a",
                                           f"{wk.LABEL_NEBIUS_TIER_PREFIX}1": f"t1-{i // 3}"}) for i in range(6)]


def _slinky() -> list[dict[str, Any]]:
    # Ref: https://github.com/SlinkyProject/slurm-operator/blob/main/docs/usage/topology.md
    # (annotation topology.slinky.slurm.net/spec: "topo-switch:s1,topo-block:b1")
    return [node(f"worker-{i}", annotations={wk.ANNOTATION_SLINKY_TOPOLOGY: f"topo-block:b{i // 2 + 1},topo-switch:s1"})
            for i in range(4)]


def _generic() -> list[dict[str, Any]]:
    # slurmpod's own label (slurmpod/well_known.py LABEL_TOPOLOGY): "block1/host3", levels then host.
    return [node(f"n{i}", {wk.LABEL_TOPOLOGY: f"spine1/block{i // 2 + 1}/host{i}"}) for i in range(4)] + [
        node("n9", {wk.LABEL_TOPOLOGY: "spine2/block9/host9"})]


CLUSTERS = {
    "gke": _gke,
    "eks": _eks,
    "coreweave": _coreweave,
    "topograph": _topograph,
    "nebius": _nebius,
    "slinky": _slinky,
    "generic": _generic,
}


def nodes_doc(provider: str) -> dict[str, Any]:
    return node_list(CLUSTERS[provider]())
