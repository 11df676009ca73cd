"""The chart's topology-reader RBAC (in deploy/kubernetes/slurmpod.yaml): valid, and read-only."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import paths
import pytest
import yaml

RBAC = paths.REPO / "deploy" / "kubernetes" / "slurmpod.yaml"
READ_VERBS = {"get", "list", "watch"}


def _docs() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(RBAC.read_text(encoding="utf-8"))
            if doc and doc["metadata"]["name"] == "slurmpod-topology-reader"]


@pytest.mark.parametrize("index", range(5), ids=["serviceaccount", "clusterrole", "clusterrolebinding", "role",
                                                 "rolebinding"])
def test_validates_strictly(index: int) -> None:
    kubernetes_validate.validate(_docs()[index], kubernetes_validate.utils.latest_version(), strict=True)


def test_only_reads_nodes_and_pods() -> None:
    rules = {doc["kind"]: doc["rules"] for doc in _docs() if doc["kind"] in ("ClusterRole", "Role")}
    assert rules == {
        "ClusterRole": [{"apiGroups": [""], "resources": ["nodes"], "verbs": sorted(READ_VERBS)}],
        "Role": [{"apiGroups": [""], "resources": ["pods"], "verbs": sorted(READ_VERBS)}],
    }

