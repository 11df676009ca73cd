"""`cluster up --auth munge|slurm`: the same manifests, only the applied data differs.

The cluster ConfigMap's ``auth`` key (SLURMPOD_AUTH in every pod, through configMapKeyRef) and its
cluster.yaml's ``auth:`` (read by the controller) are both set to the choice. The Secret of the chosen
auth type keeps its key (an empty value is then generated, as for any Secret); the other Secret is
left without data, so its optional volume mounts as an empty directory and no unused key exists.
Ref: https://slurm.schedmd.com/authentication.html
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from slurmpod import well_known as wk
from slurmpod.errors import BadInput
from slurmpod_host.cluster.manifests import Bundle, Document

# auth type -> (Secret name, data key) in deploy/kubernetes/secret.yaml
SECRETS: Mapping[str, tuple[str, str]] = {
    wk.AUTH_MUNGE: (wk.SECRET_MUNGE, "munge.key"),
    wk.AUTH_SLURM: (wk.SECRET_SLURM_KEY, "slurm.key"),
}
_AUTH_LINE = re.compile(r"^auth:[^\n]*$", re.MULTILINE)


def _check(auth: str) -> None:
    if auth not in wk.AUTH_TYPES:
        raise BadInput.one("--auth", auth, f"must be one of {', '.join(wk.AUTH_TYPES)}")


def set_spec_auth(text: str, auth: str) -> str:
    """cluster.yaml with its top-level ``auth:`` set to ``auth`` (added when absent); comments are kept."""
    _check(auth)
    line = f"auth: {auth}"
    new = _AUTH_LINE.sub(line, text, count=1) if _AUTH_LINE.search(text) else text.rstrip("\n") + f"\n{line}\n"
    try:
        doc = yaml.safe_load(new)
    except yaml.YAMLError as exc:
        raise BadInput.one(wk.CONFIG_MAP_KEY_SPEC, text[:60], f"not YAML: {exc}") from None
    if not isinstance(doc, dict) or doc.get("auth") != auth:
        raise BadInput.one(wk.CONFIG_MAP_KEY_SPEC, text[:60], "cannot set its top-level `auth:` line")
    return new


def spec_auth(bundle: Bundle) -> str:
    """The auth type the applied cluster uses (the ConfigMap's ``auth`` key; munge when absent)."""
    doc = bundle.find("ConfigMap", wk.CONFIG_MAP_CLUSTER)
    data = (doc.body.get("data") or {}) if doc is not None else {}
    return str(data.get(wk.CONFIG_MAP_KEY_AUTH, wk.AUTH_MUNGE))


def _config_map(doc: Document, auth: str) -> Document:
    data = {str(k): str(v) for k, v in (doc.body.get("data") or {}).items()}
    if wk.CONFIG_MAP_KEY_SPEC not in data:
        raise BadInput.one(f"{doc.where}.data", ",".join(data), f"has no {wk.CONFIG_MAP_KEY_SPEC}")
    data[wk.CONFIG_MAP_KEY_SPEC] = set_spec_auth(data[wk.CONFIG_MAP_KEY_SPEC], auth)
    data[wk.CONFIG_MAP_KEY_AUTH] = auth
    return Document(doc.source, {**doc.body, "data": data})


def _secret(doc: Document, auth: str) -> Document:
    for kind, (name, key) in SECRETS.items():
        if doc.name != name:
            continue
        body: dict[str, Any] = {k: v for k, v in doc.body.items() if k not in {"data", "stringData"}}
        if kind != auth:
            return Document(doc.source, {**body, "data": {}})
        if key not in (doc.body.get("data") or {}) and key not in (doc.body.get("stringData") or {}):
            raise BadInput.one(f"{doc.where}.data", key, f"missing: auth {auth} needs it")
        return doc
    return doc


def configure(bundle: Bundle, auth: str) -> Bundle:
    """``bundle`` set up for ``auth``; BadInput when the manifests lack the objects it needs."""
    _check(auth)
    for kind in (("ConfigMap", wk.CONFIG_MAP_CLUSTER), ("Secret", SECRETS[auth][0])):
        if bundle.find(*kind) is None:
            raise BadInput.one("manifests", f"{kind[0]}/{kind[1]}", f"missing: auth {auth} needs it")
    docs = []
    for doc in bundle.documents:
        if doc.kind == "ConfigMap" and doc.name == wk.CONFIG_MAP_CLUSTER:
            docs.append(_config_map(doc, auth))
        elif doc.kind == "Secret":
            docs.append(_secret(doc, auth))
        else:
            docs.append(doc)
    return Bundle(bundle.namespace, tuple(docs))
