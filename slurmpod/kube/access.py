"""Where the API server is and which credentials to use: the pod's service account.

Ref: https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/#without-using-a-proxy
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from slurmpod import well_known as wk
from slurmpod.errors import BadInput

CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Settings:
    base_url: str  # https://HOST:PORT (http only for a loopback test server)
    token: str
    ca_file: Path | None
    # Re-read before each request when set: kubelet rotates a projected service-account token.
    # Ref: https://kubernetes.io/docs/concepts/security/service-accounts/#bound-service-account-tokens
    token_file: Path | None = None
    connect_timeout_s: float = CONNECT_TIMEOUT_S
    read_timeout_s: float = READ_TIMEOUT_S

    def __post_init__(self) -> None:
        url = urllib.parse.urlsplit(self.base_url)
        if url.scheme != "https" and not (url.scheme == "http" and url.hostname in ("127.0.0.1", "::1")):
            raise BadInput.one("API base URL", self.base_url, "must be https (http only on loopback)")


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
    return Settings(f"https://{netloc}", token, sa_dir / "ca.crt", sa_dir / "token")
