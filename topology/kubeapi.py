"""A read-only Kubernetes API reader: the nodes, and the worker pods of one namespace.

GET only, with the pod's service-account token and the cluster CA, every request with a timeout.
What it returns is the same document `kubectl get ... -o json` prints, so slurmpod.topology.kube parses
both. The RBAC it needs is the chart's topology-reader RBAC (deploy/helm/slurmpod) (nodes: get, list, watch).
Ref: https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/#without-using-a-proxy
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurmpod import well_known as wk
from slurmpod.errors import BadInput, PermanentError, TransientError

DEFAULT_TIMEOUT_S = 10.0
WORKER_SELECTOR = f"{wk.LABEL_ROLE}=worker"
# Statuses worth retrying: throttled, or the API server briefly unavailable.
# Ref: https://kubernetes.io/docs/reference/using-api/api-concepts/#response-codes
_TRANSIENT = {429, 500, 502, 503, 504}


@dataclass(frozen=True, slots=True)
class Settings:
    base_url: str  # https://HOST:PORT (http only for a loopback test server)
    token: str
    ca_file: Path | None
    timeout_s: float = DEFAULT_TIMEOUT_S


def in_cluster(env: Mapping[str, str], sa_dir: Path = Path(wk.SERVICE_ACCOUNT_DIR)) -> Settings:
    """Settings from kubelet's env and the mounted service account; BadInput naming what is missing."""
    host = env.get(wk.ENV_KUBERNETES_SERVICE_HOST, "")
    port = env.get(wk.ENV_KUBERNETES_SERVICE_PORT, "")
    if not host or not port.isdigit():
        raise BadInput.one(f"{wk.ENV_KUBERNETES_SERVICE_HOST}/{wk.ENV_KUBERNETES_SERVICE_PORT}",
                           f"{host}:{port}", "not running in a pod with API access")
    try:
        token = (sa_dir / "token").read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise BadInput.one(str(sa_dir / "token"), "", f"service account token unreadable: {exc.strerror}") from None
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return Settings(f"https://{netloc}", token, sa_dir / "ca.crt")


class Reader:
    """GET /api/v1/nodes and /api/v1/namespaces/NS/pods?labelSelector=..., nothing else."""

    def __init__(self, settings: Settings) -> None:
        url = urllib.parse.urlsplit(settings.base_url)
        if url.scheme != "https" and not (url.scheme == "http" and url.hostname in ("127.0.0.1", "::1")):
            raise BadInput.one("API base URL", settings.base_url, "must be https (http only on loopback)")
        self._settings = settings
        self._context = ssl.create_default_context(cafile=str(settings.ca_file)) if url.scheme == "https" else None

    def nodes(self) -> Any:
        return self._get("/api/v1/nodes")

    def worker_pods(self, namespace: str, selector: str = WORKER_SELECTOR) -> Any:
        ns = urllib.parse.quote(namespace, safe="")
        return self._get(f"/api/v1/namespaces/{ns}/pods?" + urllib.parse.urlencode({"labelSelector": selector}))

    def _get(self, path: str) -> Any:
        request = urllib.request.Request(  # noqa: S310 - the scheme is checked in __init__
            self._settings.base_url.rstrip("/") + path,
            headers={"Authorization": f"Bearer {self._settings.token}", "Accept": "application/json"},
            method="GET",
        )
        try:
            with urllib.request.urlopen(request, timeout=self._settings.timeout_s,  # noqa: S310
                                        context=self._context) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            kind = TransientError if exc.code in _TRANSIENT else PermanentError
            raise kind(f"Kubernetes API GET {path}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise TransientError(f"Kubernetes API GET {path}: {exc}") from None
        try:
            return json.loads(body)
        except ValueError:
            raise PermanentError(f"Kubernetes API GET {path}: response is not JSON") from None
