"""The chart installed on the local cluster as a user installs it (README, "Install with Helm"): the
namespace, the key Secret a user creates, PersistentVolumes for the release's claims (no provisioner
here), then `helm install` of deploy/helm/slurmpod with the given values; and the waits for its pods.

Our images reach the kubelet straight from the engine: the chart's default imagePullPolicy
IfNotPresent with the local tags (slurmpod/<role>:<flavor>) never pulls.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from slurmpod.errors import PermanentError
from slurmpod_host.kube import api, volumes
from slurmpod_host.kube.layout import Layout

HELM_TIMEOUT_S = 300
POLL_S = 0.5


@dataclass(frozen=True, slots=True)
class Chart:
    """The chart, the helm binary and the values of one release."""

    repo: Path
    release: str = "slurmpod"
    namespace: str = "slurmpod"

    @property
    def path(self) -> Path:
        return self.repo / "deploy" / "helm" / "slurmpod"

    @property
    def helm(self) -> Path:
        return self.repo / ".tools" / "bin" / "helm"


def helm(layout: Layout, chart: Chart, *args: str, timeout: float = HELM_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(layout.kubeconfig)}
    return subprocess.run([str(chart.helm), *args], capture_output=True, text=True, timeout=timeout, env=env,
                          check=False)


def flavor_values(flavor: str) -> list[str]:
    """--set flags naming the local images of ``flavor``."""
    keys = ("controller.slurmctld.image.tag", "nodesets.workers.slurmd.image.tag", "loginsets.login.login.image.tag")
    return [f"--set={k}={flavor}" for k in keys]


def prepare(layout: Layout, chart: Chart, values: Sequence[str]) -> None:
    """Namespace, munge key Secret (README, "Secrets you create") and volumes for the rendered claims."""
    ns = chart.namespace
    if api.kubectl(layout, "get", "namespace", ns, check=False).returncode != 0:
        api.kubectl(layout, "create", "namespace", ns)
    secret = f"{chart.release}-munge"
    if api.kubectl(layout, "-n", ns, "get", "secret", secret, check=False).returncode != 0:
        key = secrets.token_bytes(1024)
        doc = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret, "namespace": ns},
               "data": {"munge.key": base64.b64encode(key).decode()}}
        api.kubectl(layout, "apply", "-f", "-", stdin=json.dumps(doc))
    rendered = helm(layout, chart, "template", chart.release, str(chart.path), "-n", ns, *values)
    if rendered.returncode != 0:
        raise PermanentError(f"helm template: {rendered.stderr.strip()}")
    docs = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    volumes.ensure(layout, volumes.claims(docs, ns))


def install(layout: Layout, chart: Chart, values: Sequence[str]) -> subprocess.CompletedProcess[str]:
    prepare(layout, chart, values)
    return helm(layout, chart, "install", chart.release, str(chart.path), "-n", chart.namespace, *values)


def pods(layout: Layout, namespace: str, selector: str = "") -> list[dict[str, Any]]:
    args = ["-n", namespace, "get", "pods"] + (["-l", selector] if selector else [])
    items: list[dict[str, Any]] = api.kubectl_json(layout, *args, timeout=30)["items"]
    return items


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) and \
        not pod["metadata"].get("deletionTimestamp")


def wait_ready(layout: Layout, namespace: str, expected: int, timeout_s: float, selector: str = "") -> float:
    """Seconds until ``expected`` pods (of ``selector``) are Ready; PermanentError with their states after."""
    started = time.monotonic()
    listed: list[dict[str, Any]] = []
    while time.monotonic() - started < timeout_s:
        listed = pods(layout, namespace, selector)
        if len([p for p in listed if is_ready(p)]) >= expected:
            return time.monotonic() - started
        time.sleep(POLL_S)
    states = {p["metadata"]["name"]: (p.get("status") or {}).get("phase") for p in listed}
    raise PermanentError(f"{expected} pods Ready in {namespace}: not after {timeout_s:.0f}s ({states})")
