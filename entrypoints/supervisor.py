"""Ask this pod's supervisord (PID 1) to stop or start one of its programs."""

from __future__ import annotations

import os
import subprocess

from slurmpod import well_known as wk


def control(action: str, program: str, timeout: float) -> bool:
    """`supervisorctl ACTION PROGRAM`; True when supervisorctl exits 0. Ref: http://supervisord.org/running.html"""
    conf = os.path.join(os.environ.get(wk.ENV_RUN_DIR, wk.RUN_DIR), wk.SUPERVISORD_CONF)
    try:
        proc = subprocess.run([wk.SUPERVISORCTL, "-c", conf, action, program], capture_output=True,
                              timeout=timeout, check=False)
    except (subprocess.TimeoutExpired, OSError):
        return False
    return proc.returncode == 0
