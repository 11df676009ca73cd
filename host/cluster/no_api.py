"""The emulator runs no Kubernetes API server, so k8s-sync is turned off in the applied spec.

k8s-sync (cluster.yaml `k8sSync`, on in the chart's defaults) watches Nodes and writes pod labels; with
no API it would only fail and restart. The controller's ServiceAccount, there for k8s-sync alone, is
dropped with it. What k8s-sync does is tested on the real local Kubernetes (tests/k8s), never here.
A spec whose topology reads the API (`topology.source: api`) keeps its ServiceAccount, and the planner
refuses it as not emulated: that daemon has no stand-in here.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from slurmpod import well_known as wk
from slurmpod.errors import BadInput
from slurmpod_host.cluster.manifests import Bundle, Document


def spec_without_api(text: str) -> str:
    """cluster.yaml with ``k8sSync.enabled: false``; unchanged when it asks for no k8s-sync."""
    try:
        doc: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise BadInput.one(wk.CONFIG_MAP_KEY_SPEC, text[:60], f"not YAML: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("k8sSync"), dict) or not doc["k8sSync"].get("enabled"):
        return text
    doc["k8sSync"]["enabled"] = False
    return yaml.safe_dump(doc, sort_keys=False)


def _reads_api(bundle: Bundle) -> bool:
    doc = bundle.find("ConfigMap", wk.CONFIG_MAP_CLUSTER)
    text = str(((doc.body.get("data") or {}) if doc is not None else {}).get(wk.CONFIG_MAP_KEY_SPEC, ""))
    try:
        spec: Any = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    topology = spec.get("topology") if isinstance(spec, dict) else None
    return isinstance(topology, dict) and topology.get("source") == "api"


def _without_api(doc: Document, keep_account: bool) -> Document:
    if (doc.kind, doc.name) == ("ConfigMap", wk.CONFIG_MAP_CLUSTER):
        data = {str(k): str(v) for k, v in (doc.body.get("data") or {}).items()}
        if wk.CONFIG_MAP_KEY_SPEC in data:
            data[wk.CONFIG_MAP_KEY_SPEC] = spec_without_api(data[wk.CONFIG_MAP_KEY_SPEC])
        return Document(doc.source, {**doc.body, "data": data})
    if doc.kind == "StatefulSet":
        pod = ((doc.body.get("spec") or {}).get("template") or {}).get("spec") or {}
        if "serviceAccountName" in pod and not keep_account:  # no API server: no ServiceAccount, no token
            body = copy.deepcopy(doc.body)
            spec = body["spec"]["template"]["spec"]
            del spec["serviceAccountName"]
            spec["automountServiceAccountToken"] = False
            return Document(doc.source, body)
    return doc


def configure(bundle: Bundle) -> Bundle:
    keep = _reads_api(bundle)
    return Bundle(bundle.namespace, tuple(_without_api(d, keep) for d in bundle.documents))
