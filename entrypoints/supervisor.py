"""Talk to this pod's supervisord (PID 1) through supervisorctl. Ref: http://supervisord.org/running.html"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence

from slurmpod import well_known as wk


def run(args: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """`supervisorctl -c <this pod's conf> ARGS`; raises TimeoutExpired or OSError like subprocess.run."""
    conf = os.path.join(os.environ.get(wk.ENV_RUN_DIR, wk.RUN_DIR), wk.SUPERVISORD_CONF)
    return subprocess.run([wk.SUPERVISORCTL, "-c", conf, *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def control(action: str, program: str, timeout: float) -> bool:
    """`supervisorctl ACTION PROGRAM` (stop, start); True when supervisorctl exits 0."""
    try:
        return run([action, program], timeout).returncode == 0
    except (subprocess.TimeoutExpired, OSError):
        return False
