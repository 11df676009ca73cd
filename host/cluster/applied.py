"""What `cluster up` applied, kept as an API server keeps objects, so later pod operations re-plan.

`up` saves the ClusterParams and the manifests' objects (Secrets with their generated values filled
in, as the Secret object would hold them) to ``<state dir>/applied.json``, mode 0600 (it holds the
munge key, like the per-pod secret files beside it). slurmpod_host.cluster.lifecycle reads it back, so a
recreated pod gets the same key, subnet and templates, not whatever deploy/ says today.
"""

from __future__ import annotations

import base64
import dataclasses
import ipaddress
import json
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from slurmpod.errors import BadInput, PermanentError
from slurmpod.problems import Problems
from slurmpod_host.cluster.manifests import Bundle, Document
from slurmpod_host.cluster.podspec import ClusterParams
from slurmpod_host.cluster.services import Published
from slurmpod_host.cluster.volumes import resolve_secret

FILE = "applied.json"
VERSION = 1


@dataclass(frozen=True, slots=True)
class Applied:
    params: ClusterParams
    bundle: Bundle


def resolve_secrets(bundle: Bundle, generate: Callable[[int], bytes]) -> Bundle:
    """``bundle`` with each Secret's values resolved (empty ones generated) into base64 ``data``."""
    problems = Problems()
    docs = []
    for doc in bundle.documents:
        if doc.kind != "Secret":
            docs.append(doc)
            continue
        data = resolve_secret(doc.body, doc.where, generate, problems)
        body = {k: v for k, v in doc.body.items() if k != "stringData"}
        body["data"] = {k: base64.b64encode(v).decode("ascii") for k, v in sorted(data.items())}
        docs.append(Document(doc.source, body))
    problems.raise_if_any()
    return Bundle(bundle.namespace, tuple(docs))


def to_json(applied: Applied) -> str:
    p = applied.params
    doc: dict[str, Any] = {
        "version": VERSION,
        "params": {"name": p.name, "subnet": str(p.subnet), "clusterUid": str(p.cluster_uid),
                   "created": p.created.isoformat(), "nodeCpu": str(p.node_cpu),
                   "nodeMemory": str(p.node_memory), "flavor": p.flavor, "workers": p.workers,
                   "nodeName": p.node_name, "enforceNetworkPolicy": p.enforce_network_policy,
                   "published": [dataclasses.asdict(x) for x in p.published]},
        "namespace": applied.bundle.namespace,
        "documents": [{"source": d.source, "body": d.body} for d in applied.bundle.documents],
    }
    return json.dumps(doc, indent=1, sort_keys=True, default=str)


def from_json(text: str, where: str = FILE) -> Applied:
    try:
        doc = json.loads(text)
        if doc.get("version") != VERSION:
            raise BadInput.one(f"{where}.version", doc.get("version"), f"expected {VERSION}")
        p = doc["params"]
        params = ClusterParams(
            name=str(p["name"]), subnet=ipaddress.IPv4Network(p["subnet"]),
            cluster_uid=uuid.UUID(p["clusterUid"]),
            created=datetime.fromisoformat(p["created"]), node_cpu=Fraction(p["nodeCpu"]),
            node_memory=Fraction(p["nodeMemory"]), flavor=p["flavor"], workers=p["workers"],
            node_name=str(p["nodeName"]), enforce_network_policy=bool(p.get("enforceNetworkPolicy", False)),
            published=tuple(Published(**x) for x in p.get("published", ())))
        docs = tuple(Document(str(d["source"]), d["body"]) for d in doc["documents"])
        return Applied(params, Bundle(str(doc["namespace"]), docs))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadInput.one(where, text[:60], f"not a saved cluster: {exc}") from None


def save(root: Path, applied: Applied) -> None:
    path = root / FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, to_json(applied).encode("utf-8"))
    finally:
        os.close(fd)


def load(root: Path) -> Applied:
    path = root / FILE
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PermanentError(f"{path}: {exc.strerror}; was the cluster made by `slurmpod cluster up`?"
                             ) from None
    return from_json(text, str(path))
