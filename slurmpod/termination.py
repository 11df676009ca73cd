"""Kubernetes termination messages: why a pod failed, shown by `kubectl describe pod`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from slurmpod import well_known

# Ref: https://kubernetes.io/docs/tasks/debug/debug-application/determine-reason-pod-failure/
# kubelet reads at most 4096 bytes of the message.
MAX_BYTES = 4096


def path(env: Mapping[str, str]) -> Path:
    """The pod's terminationMessagePath (SLURMPOD_TERMINATION_LOG stands in for it in tests)."""
    return Path(env.get(well_known.ENV_TERMINATION_LOG, well_known.TERMINATION_LOG))


def write(message: str, path: Path) -> bool:
    """Write ``message`` to the termination log at ``path`` if that file exists; never create it."""
    if not path.exists():
        return False
    try:
        with path.open("w", encoding="utf-8") as fh:
            fh.write(message.encode("utf-8")[:MAX_BYTES].decode("utf-8", "ignore"))
    except OSError:
        return False
    return True
