"""`cluster up --auth munge|slurm`: the same manifests, only the applied data differs.

The cluster ConfigMap's ``auth`` key (SLURMPOD_AUTH in every pod, through configMapKeyRef) and its
cluster.yaml's ``auth:`` (read by the controller) are both set to the choice.

The manifests ship no Secret: `kubectl apply -k` must never replace a real key with an empty one. A user
creates the Secrets once per cluster (README, "Secrets you create"); ``configure`` does the same here:
the key Secret of the chosen auth type (its empty value is generated, 1024 random bytes) and the login
pods' ssh host key Secret. The other auth type's Secret is not created, so its optional volume mounts
as an empty directory and no unused key exists.
Ref: https://slurm.schedmd.com/authentication.html
"""

from __future__ import annotations

import base64
import re
import secrets
from collections.abc import Mapping
from typing import Any

import yaml

from slurmpod import well_known as wk
from slurmpod.errors import BadInput
from slurmpod_host.cluster import secret_files
from slurmpod_host.cluster.manifests import Bundle, Document

# auth type -> (Secret name, data key) of the Secret a user creates (README, "Secrets you create")
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


USER_CREATED = "(created by the user)"  # Document.source of the Secrets `configure` adds


def user_secret(name: str, data: Mapping[str, str]) -> Document:
    """A Secret as `kubectl create secret generic NAME --from-file=...` makes it (base64 data)."""
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                            "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "slurmpod"}},
                            "data": dict(data)}
    return Document(USER_CREATED, body)


def _referenced_secrets(bundle: Bundle) -> set[str]:
    """Names of the Secrets the StatefulSets' volumes refer to."""
    names: set[str] = set()
    for doc in bundle.of_kind("StatefulSet"):
        pod = ((doc.body.get("spec") or {}).get("template") or {}).get("spec") or {}
        for volume in pod.get("volumes") or []:
            secret = volume.get("secret") or {}
            if secret.get("secretName"):
                names.add(str(secret["secretName"]))
    return names


# Ref: https://slurm.schedmd.com/jwt.html (a random HS256 key); 1024 bytes, generated when applied.
JWT_KEY_DATA = "jwt_hs256.key"
DB_PASSWORD_DATA = "password"  # noqa: S105 - the data key's name, not a password


def configure(bundle: Bundle, auth: str, ssh_host_key: bytes | None = None,
              db_password: str | None = None,
              from_files: Mapping[str, Mapping[str, bytes]] | None = None) -> Bundle:
    """``bundle`` set up for ``auth``, with the Secrets a user creates; BadInput when the manifests lack the
    cluster ConfigMap or ship a Secret themselves (applying it would overwrite the user's key).
    ``from_files``: the site's own Secrets (name -> key -> bytes), from `cluster up --secret-file`."""
    _check(auth)
    if bundle.find("ConfigMap", wk.CONFIG_MAP_CLUSTER) is None:
        raise BadInput.one("manifests", f"ConfigMap/{wk.CONFIG_MAP_CLUSTER}", f"missing: auth {auth} needs it")
    shipped = bundle.of_kind("Secret")
    if shipped:
        raise BadInput.one(shipped[0].where, "Secret", "manifests must not ship Secrets: `kubectl apply -k` "
                           "would replace the key a user created with this one")
    docs = [_config_map(d, auth) if (d.kind, d.name) == ("ConfigMap", wk.CONFIG_MAP_CLUSTER) else d
            for d in bundle.documents]
    name, key = SECRETS[auth]
    docs.append(user_secret(name, {key: ""}))  # empty: generated when applied, once per cluster
    if ssh_host_key is not None:
        docs.append(user_secret(wk.SECRET_SSH_HOST_KEYS,
                                {wk.SSH_HOST_KEY_FILE: base64.b64encode(ssh_host_key).decode()}))
    # Accounting and REST (deploy/kubernetes/accounting): the Secrets a user creates for them, made only
    # when the manifests mount them. The password is text (it goes into slurmdbd.conf), not random bytes.
    wanted = _referenced_secrets(bundle)
    if wk.SECRET_JWT_KEY in wanted:
        docs.append(user_secret(wk.SECRET_JWT_KEY, {JWT_KEY_DATA: ""}))
    if wk.SECRET_DB_PASSWORD in wanted:
        password = db_password or secrets.token_urlsafe(24)
        docs.append(user_secret(wk.SECRET_DB_PASSWORD,
                                {DB_PASSWORD_DATA: base64.b64encode(password.encode()).decode()}))
    made = {str(d.name) for d in docs if d.kind == "Secret"}
    secret_files.check_free(from_files or {}, made)
    for name, data in sorted((from_files or {}).items()):
        docs.append(user_secret(name, {k: base64.b64encode(v).decode() for k, v in sorted(data.items())}))
    return Bundle(bundle.namespace, tuple(docs))
