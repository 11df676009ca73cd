"""`slurmpod policy check`: the Decision as JSON on stdout; exit 0 accept/modify, 1 reject, 2 bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from policykit import default_policy_text

RAISING_RULE = "def rule(job, decision):\n    raise KeyError('quota')\n"


def _check(tmp_path: Path, job: object, policy: str | None = None, env: dict[str, str] | None = None,
           ) -> subprocess.CompletedProcess[str]:
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(default_policy_text() if policy is None else policy, encoding="utf-8")
    job_file = tmp_path / "job.json"
    job_file.write_text(job if isinstance(job, str) else json.dumps(job), encoding="utf-8")
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("SLURMPOD_")}
    run_env.update(env or {})
    return subprocess.run([sys.executable, "-P", "-m", "slurmpod.cli", "policy", "check", "--policy",
                           str(policy_file), "--job", str(job_file)],
                          capture_output=True, text=True, timeout=60, check=False, env=run_env)


@pytest.mark.parametrize(("job", "code", "verdict"), [
    ({"uid": 2000, "user": "researcher", "partition": "main", "time_limit": 10}, 0, "accept"),
    ({"uid": 2000, "user": "researcher", "partition": "preempt", "time_limit": 10}, 0, "modify"),
    ({"uid": 2000, "user": "researcher", "partition": "cpu", "tres_per_job": "gres/gpu:1"}, 1, "reject"),
], ids=["accept", "modify", "reject"])
def test_exit_code_follows_the_verdict(job: dict[str, object], code: int, verdict: str, tmp_path: Path) -> None:
    out = _check(tmp_path, job)
    assert out.returncode == code, out.stderr
    decision = json.loads(out.stdout)
    assert decision["verdict"] == verdict
    # a rejection also says what kind it is (the Slurm error code the plugin returns)
    assert set(decision) == {"verdict", "set", "message", "rules"} | ({"refusal"} if verdict == "reject" else set())
    if verdict == "modify":
        assert decision["set"] == {"requeue": True, "warn_signal": 10, "warn_time": 120, "warn_flags": 0}


@pytest.mark.parametrize(("job", "policy", "names"), [
    ('{"uid": 1', None, "--job"),
    ({"uid": 1, "user": "a", "nodes": 2}, None, "nodes="),
    ({"uid": 1, "user": "a"}, "tiers: [{name: x}]\n", "tiers[0]="),
    ({"uid": 1, "user": "a"}, "topology: {plugin: block, groupSize: zero}\n", "topology.groupSize="),
], ids=["job-not-json", "job-unknown-key", "policy-schema", "policy-type"])
def test_bad_input_exits_2_naming_it(job: object, policy: str | None, names: str, tmp_path: Path) -> None:
    out = _check(tmp_path, job, policy)
    assert out.returncode == 2
    assert names in out.stderr and out.stdout == ""


@pytest.mark.parametrize(("mode", "code", "verdict", "message"), [
    ("closed", 1, "reject", "rejected by cluster policy: rule rules.py:rule failed: KeyError: 'quota'"),
    ("open", 0, "accept", "policy error ignored (failMode: open): rule rules.py:rule failed: KeyError: 'quota'"),
], ids=["fail-closed", "fail-open"])
def test_a_policy_that_raises(mode: str, code: int, verdict: str, message: str, tmp_path: Path) -> None:
    (tmp_path / "rules.py").write_text(RAISING_RULE, encoding="utf-8")
    out = _check(tmp_path, {"uid": 1, "user": "a"}, f"failMode: {mode}\nrules: [{{file: rules.py}}]\n")
    assert out.returncode == code, out.stderr
    assert json.loads(out.stdout)["verdict"] == verdict
    assert json.loads(out.stdout)["message"] == message


def test_the_policy_path_has_an_env_twin(tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.yaml"
    other.write_text("cpuOnlyPartitions: [main]\n", encoding="utf-8")
    job = {"uid": 1, "user": "a", "partition": "main", "tres_per_node": "gres/gpu:1"}
    policy_file = tmp_path / "policy.yaml"
    job_file = tmp_path / "job.json"
    policy_file.write_text("{}\n", encoding="utf-8")
    job_file.write_text(json.dumps(job), encoding="utf-8")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SLURMPOD_")}, "SLURMPOD_POLICY": str(other),
           "SLURMPOD_POLICY_JOB": str(job_file)}
    out = subprocess.run([sys.executable, "-P", "-m", "slurmpod.cli", "policy", "check"], capture_output=True,
                         text=True, timeout=60, check=False, env=env)
    assert out.returncode == 1, out.stderr
    assert "partition main has no GPUs" in json.loads(out.stdout)["message"]
