"""The chart and the real helm binary (fetched by scripts/bootstrap-host.sh), for the deploy tests."""

from __future__ import annotations

import subprocess
from typing import Any

import paths
import yaml

CHART = paths.REPO / "deploy" / "helm" / "slurmpod"
HELM = paths.REPO / ".tools" / "bin" / "helm"


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    assert HELM.is_file(), f"{HELM} missing: run scripts/bootstrap-host.sh"
    return subprocess.run([str(HELM), *args], capture_output=True, text=True, timeout=60, check=False)


def template(*args: str) -> list[dict[str, Any]]:
    """The chart rendered as release and namespace `slurmpod`, one dict per object."""
    done = helm("template", "slurmpod", str(CHART), "--namespace", "slurmpod", *args)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]
