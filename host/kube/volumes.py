"""PersistentVolumes for a chart's claims: this cluster has no provisioner, so each claim gets a hostPath
volume made for it and bound to it in advance (claimRef).

Pure ``claims``/``volume`` read the rendered manifests; ``ensure`` applies them. A claim a StatefulSet
makes from a volumeClaimTemplate is named ``<template>-<statefulset>-<ordinal>``.
Ref: https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/#stable-storage
Ref: https://kubernetes.io/docs/concepts/storage/persistent-volumes/#reserving-a-persistentvolume
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurmpod_host.kube import api
from slurmpod_host.kube.layout import Layout

LABEL = "slurmpod.io/k8s-volume"  # on every PersistentVolume made here


@dataclass(frozen=True, slots=True)
class Claim:
    namespace: str
    name: str
    size: str
    access_modes: tuple[str, ...]


def claims(docs: Iterable[Mapping[str, Any]], namespace: str) -> list[Claim]:
    out: list[Claim] = []
    for doc in docs:
        kind = doc.get("kind")
        meta = doc.get("metadata") or {}
        ns = meta.get("namespace") or namespace
        if kind == "PersistentVolumeClaim":
            out.append(_claim(ns, meta["name"], doc["spec"]))
        elif kind == "StatefulSet":
            for template in doc["spec"].get("volumeClaimTemplates") or []:
                for ordinal in range(int(doc["spec"].get("replicas", 1))):
                    name = f"{template['metadata']['name']}-{meta['name']}-{ordinal}"
                    out.append(_claim(ns, name, template["spec"]))
    return out


def _claim(namespace: str, name: str, spec: Mapping[str, Any]) -> Claim:
    return Claim(namespace, name, str(spec["resources"]["requests"]["storage"]), tuple(spec["accessModes"]))


def volume_name(claim: Claim) -> str:
    digest = hashlib.sha256(f"{claim.namespace}/{claim.name}".encode()).hexdigest()[:8]
    return f"{claim.namespace}-{claim.name}"[:50].rstrip("-") + f"-{digest}"


def volume(claim: Claim, root: Path) -> dict[str, Any]:
    name = volume_name(claim)
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {LABEL: "true"}},
        "spec": {
            "capacity": {"storage": claim.size},
            "accessModes": list(claim.access_modes),
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": {"namespace": claim.namespace, "name": claim.name},
            # Ref: https://kubernetes.io/docs/concepts/storage/volumes/#hostpath
            "hostPath": {"path": str(root / name), "type": "DirectoryOrCreate"},
        },
    }


def ensure(layout: Layout, wanted: Iterable[Claim]) -> list[str]:
    """Create the volumes that are missing; a Released one (its claim deleted) is made anew, empty."""
    existing = {v["metadata"]["name"]: v for v in
                api.kubectl_json(layout, "get", "pv", "-l", LABEL)["items"]}
    made: list[str] = []
    for claim in wanted:
        name = volume_name(claim)
        phase = ((existing.get(name) or {}).get("status") or {}).get("phase")
        if phase in ("Bound", "Available", "Pending"):
            continue
        if phase is not None:
            api.kubectl(layout, "delete", "pv", name, "--wait=true", timeout=60)
        api.kubectl(layout, "apply", "-f", "-", stdin=json.dumps(volume(claim, layout.volumes)))
        made.append(name)
    return made
