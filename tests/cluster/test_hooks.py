"""The cluster spec's hooks reach Slurm: Prolog, Epilog and HealthCheckProgram run on the workers."""

from __future__ import annotations

import pytest
from clusterkit import Session, all_idle, restore_pod, scontrol, wait_for, wait_ready

from slurmpod_host.cluster import lifecycle

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

# Hook scripts live on the shared /home so every worker sees them; each leaves a mark in its pod's /tmp.
HOOKS = {
    "/home/.slurmpod-test-prolog": 'touch "/tmp/prolog-ran-$SLURM_JOB_ID"',
    "/home/.slurmpod-test-epilog": 'touch "/tmp/epilog-ran-$SLURM_JOB_ID"',
    "/home/.slurmpod-test-healthcheck": "touch /tmp/healthcheck-ran",
}
SPEC_HOOKS = """
hooks:
  prolog: /home/.slurmpod-test-prolog
  epilog: /home/.slurmpod-test-epilog
  prologFlags: [Alloc]
  healthCheckProgram: /home/.slurmpod-test-healthcheck
  healthCheckInterval: 5
  healthCheckNodeState: [ANY]
"""


def _marked(session: Session, path: str) -> bool | None:
    return True if any(session.root_in(w, "test", "-e", path).code == 0 for w in session.cluster.workers) else None


def test_prolog_epilog_and_health_check_run_on_the_workers(session: Session) -> None:
    name, controller, login = session.cluster.name, session.cluster.controller, session.cluster.login
    for path, body in HOOKS.items():
        script = f"printf '#!/bin/sh\\n%s\\n' '{body}' > {path} && chmod 0755 {path}"
        assert session.root_in(login, "sh", "-c", script).code == 0
    old = lifecycle.set_config_map(name, "cluster", {})
    lifecycle.set_config_map(name, "cluster", {**old, "cluster.yaml": old["cluster.yaml"].rstrip("\n") + SPEC_HOOKS})
    try:
        lifecycle.replace_pod(session.client, name, controller)
        wait_ready(session, controller)
        scontrol(session, "reconfigure")  # configless workers fetch the new slurm.conf
        config = session.root_in(controller, "scontrol", "show", "config").stdout
        assert "/home/.slurmpod-test-prolog" in config and "HealthCheckInterval     = 5 sec" in config, config
        all_idle(session)
        job = session.as_researcher("sbatch", "--parsable", "--wait", "-o", "/dev/null", "--wrap", "true")
        assert job.code == 0, job.stderr
        job_id = job.stdout.strip().split(";")[0]
        wait_for("prolog ran", lambda: _marked(session, f"/tmp/prolog-ran-{job_id}"), 30)
        wait_for("epilog ran", lambda: _marked(session, f"/tmp/epilog-ran-{job_id}"), 30)
        wait_for("health check ran", lambda: _marked(session, "/tmp/healthcheck-ran"), 60)
    finally:
        lifecycle.set_config_map(name, "cluster", old)
        restore_pod(session, controller)
        scontrol(session, "reconfigure")
        session.root_in(login, "rm", "-f", *HOOKS)
        all_idle(session)
