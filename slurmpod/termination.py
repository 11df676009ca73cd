"""Kubernetes termination messages: why a pod failed, shown by `kubectl describe pod`."""

from __future__ import annotations

import os
from pathlib import Path

from slurmpod import well_known

# Ref: https://kubernetes.io/docs/tasks/debug/debug-application/determine-reason-pod-failure/
# kubelet reads at most 4096 bytes of the message.
MAX_BYTES = 4096


def write(message: str) -> bool:
    """Write ``message`` to the termination log if that file exists; never create it."""
    path = Path(os.environ.get(well_known.ENV_TERMINATION_LOG, well_known.TERMINATION_LOG))
    if not path.exists():
        return False
    try:
        with path.open("w", encoding="utf-8") as fh:
            fh.write(message.encode("utf-8")[:MAX_BYTES].decode("utf-8", "ignore"))
    except OSError:
        return False
    return True
