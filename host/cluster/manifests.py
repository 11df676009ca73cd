"""The Kubernetes manifests in deploy/kubernetes, read the way kustomize would list them.

The emulator runs these very files: kustomization.yaml names the resources (the Helm chart's default
output, deploy/kubernetes/slurmpod.yaml). Objects carry the release name as their instance label and
as the ``<release>-`` prefix of their names and of the names they refer to; the loader strips that
prefix, so the emulator sees base names (``controller``, ``cluster``, ``munge``) and gives them the
cluster name of `slurmpod cluster up` instead. Kinds the emulator does not run (RBAC, PriorityClass,
PodDisruptionBudget; NetworkPolicy only with `cluster up --enforce-network-policy`, in netpolicy.py) are
loaded but never interpreted; tests validate them offline.
Ref: https://kubectl.docs.kubernetes.io/references/kustomize/kustomization/
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from slurmpod import well_known as wk
from slurmpod.errors import BadInput, PermanentError
from slurmpod.problems import Problems

KUSTOMIZATION = "kustomization.yaml"
DEFAULT_NAMESPACE = "default"  # what kubectl uses when neither the manifest nor kustomize sets one


@dataclass(frozen=True, slots=True)
class Document:
    """One Kubernetes object as written in a manifest file."""

    source: str  # file name, for error messages
    body: Mapping[str, Any]

    @property
    def kind(self) -> str:
        return str(self.body["kind"])

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def where(self) -> str:
        return f"{self.source}:{self.kind}/{self.name}"


@dataclass(frozen=True, slots=True)
class Bundle:
    """Every object of a kustomization, in the order of its ``resources`` list."""

    namespace: str
    documents: tuple[Document, ...]

    def of_kind(self, kind: str) -> tuple[Document, ...]:
        return tuple(d for d in self.documents if d.kind == kind)

    def find(self, kind: str, name: str) -> Document | None:
        return next((d for d in self.documents if d.kind == kind and d.name == name), None)


def default_dir() -> Path:
    """deploy/kubernetes of the source tree this package runs from (editable installs link to it)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "deploy" / "kubernetes"
        if (candidate / KUSTOMIZATION).is_file():
            return candidate
    raise PermanentError(f"deploy/kubernetes/{KUSTOMIZATION} not found above {here}; "
                         "run from a source checkout")


def _load_yaml(path: Path) -> list[Any]:
    try:
        return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    except OSError as exc:
        raise BadInput.one("manifest", str(path), f"cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise BadInput.one("manifest", str(path), f"not YAML: {exc}") from None


# Keys whose string value names another object of the release (and whose prefix the loader strips).
_REF_KEYS = frozenset({"secretName", "claimName", "serviceName", "priorityClassName", "serviceAccountName"})
# Mappings whose `name` names another object: volumes' configMap, env's configMapKeyRef/secretKeyRef.
_REF_PARENTS = frozenset({"configMap", "configMapKeyRef", "secretKeyRef"})


def _strip(value: Any, prefix: str) -> Any:
    return value[len(prefix):] if isinstance(value, str) and value.startswith(prefix) else value


def _unprefix(node: Any, prefix: str, parent: str = "") -> Any:
    """A copy of ``node`` with ``prefix`` taken off object names and references to them."""
    if isinstance(node, list):
        return [_unprefix(item, prefix, parent) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _REF_KEYS or (key == "name" and parent in _REF_PARENTS):
            out[key] = _strip(value, prefix)
        else:
            out[key] = _unprefix(value, prefix, key)
    return out


def release_of(body: Mapping[str, Any]) -> str | None:
    labels = (body.get("metadata") or {}).get("labels") or {}
    value = labels.get(wk.LABEL_INSTANCE)
    return value if isinstance(value, str) and value else None


def _base(body: dict[str, Any]) -> dict[str, Any]:
    """The object as the emulator reads it: without its release's name prefix."""
    release = release_of(body)
    if release is None:
        return body
    prefix = f"{release}-"
    out = _unprefix(body, prefix)
    out["metadata"] = {**out["metadata"], "name": _strip(body["metadata"].get("name"), prefix)}
    return out  # type: ignore[no-any-return]


def load(directory: Path) -> Bundle:
    """Read the kustomization in ``directory`` and every resource file it lists."""
    kust_docs = _load_yaml(directory / KUSTOMIZATION)
    if len(kust_docs) != 1 or not isinstance(kust_docs[0], dict):
        raise BadInput.one(KUSTOMIZATION, str(directory), "expected one Kustomization mapping")
    kust = kust_docs[0]
    resources = kust.get("resources")
    if not isinstance(resources, list) or not all(isinstance(r, str) for r in resources):
        raise BadInput.one(f"{KUSTOMIZATION}.resources", str(resources), "expected a list of file names")
    documents: list[Document] = []
    p = Problems()
    for resource in resources:
        for index, body in enumerate(_load_yaml(directory / resource)):
            where = f"{resource}[{index}]"
            if not isinstance(body, dict):
                p.add(where, str(body)[:40], "expected a mapping")
                continue
            meta = body.get("metadata")
            if not body.get("kind") or not body.get("apiVersion") or not isinstance(meta, dict):
                p.add(where, str(body.get("kind")), "needs apiVersion, kind, metadata")
                continue
            name = meta.get("name")
            if p.check(isinstance(name, str) and bool(name), f"{where}.metadata.name", str(name), "required"):
                documents.append(Document(resource, _base(body)))
    p.raise_if_any()
    # The pods' namespace: a chart may also put an object elsewhere (k8s-sync's Role for Node Events
    # lives in `default`).
    namespaces = ({d.body["metadata"].get("namespace") for d in documents if d.kind == "StatefulSet"}
                  or {d.body["metadata"].get("namespace") for d in documents}) - {None}
    namespace = kust.get("namespace") or (min(namespaces) if namespaces else DEFAULT_NAMESPACE)
    return Bundle(namespace=str(namespace), documents=tuple(documents))
