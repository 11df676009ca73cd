"""PersistentVolumes for a release's claims (slurmpod_host.kube.volumes)."""

from __future__ import annotations

from pathlib import Path

from slurmpod_host.kube import volumes

DOCS = [
    {"kind": "PersistentVolumeClaim", "metadata": {"name": "r-home", "namespace": "ns"},
     "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "10Gi"}}}},
    {"kind": "StatefulSet", "metadata": {"name": "r-controller"},
     "spec": {"replicas": 2, "volumeClaimTemplates": [
         {"metadata": {"name": "statesave"},
          "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}},
    {"kind": "Service", "metadata": {"name": "r-slurm"}},
]


def test_claims_of_pvcs_and_volume_claim_templates() -> None:
    assert volumes.claims(DOCS, "ns") == [
        volumes.Claim("ns", "r-home", "10Gi", ("ReadWriteMany",)),
        volumes.Claim("ns", "statesave-r-controller-0", "1Gi", ("ReadWriteOnce",)),
        volumes.Claim("ns", "statesave-r-controller-1", "1Gi", ("ReadWriteOnce",)),
    ]


def test_volume_is_prebound_hostpath_without_a_class() -> None:
    claim = volumes.Claim("ns", "r-home", "10Gi", ("ReadWriteMany",))
    pv = volumes.volume(claim, Path("/state/volumes"))
    name = pv["metadata"]["name"]
    assert name.startswith("ns-r-home-") and len(name) <= 63
    assert pv["spec"]["claimRef"] == {"namespace": "ns", "name": "r-home"}
    assert pv["spec"]["storageClassName"] == ""
    assert pv["spec"]["hostPath"]["path"] == f"/state/volumes/{name}"
    assert pv["spec"]["capacity"] == {"storage": "10Gi"} and pv["spec"]["accessModes"] == ["ReadWriteMany"]
    assert volumes.volume_name(volumes.Claim("ns2", "r-home", "1Gi", ())) != name
