"""The two ways the host talks to the local API server: plain GETs (health, the DNS feed) and kubectl.

kubectl is the one built from the same tree (layout.Layout.kubectl); every call has a timeout.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from slurmpod.errors import PermanentError, TransientError
from slurmpod_host.kube.layout import Layout

GET_TIMEOUT_S = 10.0
KUBECTL_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class Client:
    """GETs against the API server with a bearer token, verified against our CA."""

    base_url: str
    token: str
    ca_file: Path

    @classmethod
    def from_kubeconfig(cls, path: Path) -> Client:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        cluster = doc["clusters"][0]["cluster"]
        return cls(cluster["server"], doc["users"][0]["user"]["token"], Path(cluster["certificate-authority"]))

    def get_text(self, path: str, timeout_s: float = GET_TIMEOUT_S) -> str:
        request = urllib.request.Request(  # noqa: S310 - https to our own API server
            self.base_url + path, headers={"Authorization": f"Bearer {self.token}"}, method="GET")
        context = ssl.create_default_context(cafile=str(self.ca_file))
        try:
            with urllib.request.urlopen(request, timeout=timeout_s, context=context) as response:  # noqa: S310
                return str(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            raise TransientError(f"GET {path}: HTTP {exc.code} {exc.read().decode(errors='replace')[:200]}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise TransientError(f"GET {path}: {exc}") from None

    def get(self, path: str, timeout_s: float = GET_TIMEOUT_S) -> Any:
        return json.loads(self.get_text(path, timeout_s))


def kubectl(layout: Layout, *args: str, timeout: float = KUBECTL_TIMEOUT_S, stdin: str | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    argv: Sequence[str] = [str(layout.kubectl), f"--kubeconfig={layout.kubeconfig}", *args]
    result = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
    if check and result.returncode != 0:
        raise PermanentError(f"kubectl {' '.join(args)}: exit {result.returncode}: {result.stderr.strip()[:800]}")
    return result


def kubectl_json(layout: Layout, *args: str, timeout: float = KUBECTL_TIMEOUT_S) -> Any:
    return json.loads(kubectl(layout, *args, "-o", "json", timeout=timeout).stdout)
