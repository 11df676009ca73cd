"""Malformed pod input through the real `slurmpod entrypoint ROLE` (not --dry-run) and `slurmpod render`.

Each case of corpus/malformed.yaml must end with exit 2, a one-line message naming the field and the
offending value on stderr, the same message in the termination log, and nothing written: the run dir
stays empty and supervisord is never started.

Safety: a case that turned out valid would make the real entrypoint write /etc/munge and exec
supervisord on this host, so every entrypoint case is first planned in-process (``start.plan``, the very
code the command runs before writing anything) and the command only runs when that plan refuses it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paths
import podkit
import pytest
import yaml

from slurmpod import well_known as wk
from slurmpod.errors import BadInput

CORPUS_FILE = paths.UNIT / "corpus" / "malformed.yaml"
CASES: list[dict[str, Any]] = yaml.safe_load(CORPUS_FILE.read_text(encoding="utf-8"))
SLURMPOD = Path(sys.executable).with_name("slurmpod")
MESSAGE_PREFIX = "slurmpod: bad input: "
CASE_KEYS = {"id", "argv", "env", "labels", "annotations", "key", "spec", "env_file", "expect"}


@dataclass(frozen=True, slots=True)
class Outcome:
    pod: podkit.Pod
    refused_in_process: str  # "" when start.plan did not raise BadInput (the command is then not run)
    returncode: int | None = None
    stderr: str = ""


def _argv(case: dict[str, Any]) -> list[str]:
    return [str(a) for a in case.get("argv", ["entrypoint", "worker"])]


def _fill(text: str, pod: podkit.Pod) -> str:
    return text.replace("{pod}", str(pod.root))


def _prepare(case: dict[str, Any], root: Path) -> tuple[podkit.Pod, list[str], dict[str, str]]:
    argv = _argv(case)
    role = argv[1] if argv[0] == "entrypoint" and argv[1] in wk.ROLES else "worker"
    if argv[:2] == ["render", "slurm-conf"]:
        role = "controller"
    pod = podkit.make_pod(root, role)
    env = pod.env(role)
    for key, value in (case.get("env") or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = _fill(str(value), pod)
    if "labels" in case:
        (pod.podinfo / wk.PODINFO_LABELS).write_text(case["labels"], encoding="utf-8")
    if "annotations" in case:
        (pod.podinfo / wk.PODINFO_ANNOTATIONS).write_text(case["annotations"], encoding="utf-8")
    if "spec" in case:
        pod.spec.write_text(case["spec"], encoding="utf-8")
    if "env_file" in case:
        (pod.root / "pod.env").write_text(_fill(case["env_file"], pod), encoding="utf-8")
    key = case.get("key") or {}
    if "mode" in key:
        pod.key.chmod(int(key["mode"], 8))
    if "size" in key:
        podkit.write_key(pod.key, size=int(key["size"]))
    if key.get("dir"):
        pod.key.unlink()
        pod.key.mkdir()
    if key.get("missing"):
        pod.key.unlink()
    return pod, [_fill(a, pod) for a in argv], env


def _run(case: dict[str, Any], root: Path) -> Outcome:
    pod, argv, env = _prepare(case, root)
    if argv[0] == "entrypoint":
        try:
            podkit.plan(argv[1], env)
        except BadInput:
            pass
        except Exception as exc:
            return Outcome(pod, f"start.plan raised {exc!r}, not BadInput")
        else:
            return Outcome(pod, "start.plan accepted this input; the real command was not run")
    proc = subprocess.run([str(SLURMPOD), *argv], env=env, capture_output=True, text=True, timeout=60, check=False)
    return Outcome(pod, "", proc.returncode, proc.stderr)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Every case, run concurrently (each command is a fresh Python process; this keeps the suite fast)."""
    roots = {case["id"]: tmp_path_factory.mktemp(case["id"]) for case in CASES}
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = {case["id"]: pool.submit(_run, case, roots[case["id"]]) for case in CASES}
        return {cid: f.result() for cid, f in futures.items()}


def test_corpus_is_large_and_well_formed() -> None:
    ids = [c["id"] for c in CASES]
    assert len(ids) >= 30
    assert len(set(ids)) == len(ids), "duplicate case ids"
    for case in CASES:
        assert set(case) <= CASE_KEYS, f"{case['id']}: unknown keys {set(case) - CASE_KEYS}"
        assert case.get("expect"), f"{case['id']}: says nothing about the message"
    covered = {_argv(c)[0] + " " + _argv(c)[1] for c in CASES}
    assert covered >= {
        "entrypoint worker",
        "entrypoint controller",
        "entrypoint login",
        "render node",
        "render slurm-conf",
    }


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_malformed_input_exits_2_and_writes_nothing(case: dict[str, Any], outcomes: dict[str, Outcome]) -> None:
    out = outcomes[case["id"]]
    assert not out.refused_in_process, out.refused_in_process
    assert out.returncode == 2, f"exit {out.returncode}, stderr:\n{out.stderr}"
    messages = [line for line in out.stderr.splitlines() if line.startswith(MESSAGE_PREFIX)]
    assert len(messages) == 1, out.stderr
    message = messages[0]
    for expected in case["expect"]:
        assert expected in message, f"{expected!r} not in {message!r}"
    assert "Traceback" not in out.stderr
    # kubelet shows this file as the container's termination message.
    assert out.pod.tlog.read_text(encoding="utf-8") == message
    assert list(out.pod.run_dir.iterdir()) == [], "bad input wrote into the run dir"
    assert "starting supervisord" not in out.stderr
