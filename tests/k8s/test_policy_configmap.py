"""An edit of the policy ConfigMap reaches slurmctld's job_submit plugin through the kubelet's update of
the mounted volume, and the next submission follows the new policy, within the kubelet's sync period
(templates/kubelet.yaml syncFrequency) plus its jitter and the ConfigMap watch's propagation.
Ref: https://kubernetes.io/docs/concepts/configuration/configmap/#mounted-configmaps-are-updated-automatically
"""

from __future__ import annotations

import json
import time

import yaml
from kubekit import Kube, note
from waiting import wait_for

from slurmpod_host.kube.lifecycle import SYNC_FREQUENCY_S

CONFIG_MAP = "slurmpod-policy"
# The kubelet requeues each pod's sync after syncFrequency with up to 50% jitter; the watch-based
# ConfigMap cache adds about a second (workerResyncIntervalJitterFactor).
# Ref: https://github.com/kubernetes/kubernetes/blob/v1.20.2/pkg/kubelet/kubelet.go
UPDATE_BOUND_S = SYNC_FREQUENCY_S * 1.5 + 10
PROBE_JOB = "sbatch --parsable --hold -p main --time=30 --wrap true"


def _policy(kube: Kube) -> dict[str, object]:
    cm = kube.get("configmap", CONFIG_MAP)
    doc: dict[str, object] = yaml.safe_load(cm["data"]["policy.yaml"])
    return doc


def _set_policy(kube: Kube, policy: dict[str, object]) -> None:
    patch = {"data": {"policy.yaml": yaml.safe_dump(policy, sort_keys=False)}}
    kube.kubectl("-n", "slurmpod", "patch", "configmap", CONFIG_MAP, "--type=merge", "-p", json.dumps(patch))


def _submit(kube: Kube) -> tuple[bool, str]:
    done = kube.as_researcher(PROBE_JOB)
    if done.returncode == 0:
        kube.as_researcher(f"scancel {done.stdout.strip()}")
    return done.returncode == 0, done.stderr


def _rejection(kube: Kube) -> str | None:
    accepted, err = _submit(kube)
    return None if accepted else err


def test_a_policy_configmap_edit_reaches_the_next_submission(kube: Kube) -> None:
    shipped = _policy(kube)
    accepted, err = _submit(kube)
    assert accepted, err  # 30 minutes in the normal tier: no limit in the shipped policy
    strict = json.loads(json.dumps(shipped))
    (normal,) = [t for t in strict["tiers"] if t["name"] == "normal"]  # type: ignore[union-attr,index]
    normal.update({"maxTimeMinutes": 10, "overTime": "reject"})
    started = time.monotonic()
    _set_policy(kube, strict)
    try:
        message, waited = wait_for("the edited policy rejects a 30-minute job", lambda: _rejection(kube),
                                   UPDATE_BOUND_S, poll=1.0)
        note(f"ConfigMap edit -> new policy in force after {waited:.1f}s (bound {UPDATE_BOUND_S:.0f}s)")
        assert "10" in message, message  # the rejection tells the user the tier's limit
        mounted = kube.exec(kube.controller, "cat", "/etc/slurmpod-policy/policy.yaml").stdout
        assert yaml.safe_load(mounted) == strict
    finally:
        _set_policy(kube, shipped)
    wait_for("the shipped policy is back", lambda: True if _submit(kube)[0] else None, UPDATE_BOUND_S, poll=1.0)
    note(f"restored after {time.monotonic() - started:.1f}s in all")
