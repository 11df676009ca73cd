"""`slurmpod render node|slurm-conf`: what a pod would get, printed, with no side effects."""

from __future__ import annotations

import logging
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import paths
import podkit
import pytest
from podkit import Machine

from slurmpod import __version__, cli
from slurmpod import well_known as wk

SLURMPOD = Path(sys.executable).with_name("slurmpod")
GOLDEN = paths.UNIT / "golden"


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """cli.main() points slurmpod's logger at this test's captured stderr; put it back afterwards."""
    logger = logging.getLogger("slurmpod")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved


def _env_file(pod: podkit.Pod, **extra: str) -> Path:
    lines = {
        wk.ENV_POD_NAME: podkit.POD,
        wk.ENV_CONTROLLER: podkit.CONTROLLER,
        "SLURMPOD_HW_ROOT": str(pod.hw),
        wk.ENV_SLURM_VERSION: "24.11",
        **extra,
    }
    path = pod.root / "pod.env"
    path.write_text("# pod env for render\n" + "".join(f"{k}={v}\n" for k, v in lines.items()))
    return path


def test_render_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pod = podkit.make_pod(tmp_path, "worker", Machine(sockets=2, cores_per_socket=2, threads_per_core=2, mem_mib=16384))
    env_file = _env_file(pod, SLURMPOD_CPU_LIMIT="2000", SLURMPOD_MEMORY_LIMIT="8192")
    assert cli.main(["render", "node", "--podinfo", str(pod.podinfo), "--env-file", str(env_file)]) == 0
    out = capsys.readouterr().out
    argv = shlex.split(out)
    assert argv == [
        "/usr/sbin/slurmd",
        "-D",
        "-Z",
        "--conf-server",
        f"{podkit.CONTROLLER}:6817",
        "--conf",
        "CPUs=8 Boards=1 SocketsPerBoard=2 CoresPerSocket=2 ThreadsPerCore=2 RealMemory=16384 CoreSpecCount=3 "
        "MemSpecLimit=8192 Features=workers",
    ]
    assert list(pod.run_dir.iterdir()) == []
    # exactly what the worker's run script execs, built by the same plan pod start uses
    env = {**pod.env("worker"), "SLURMPOD_CPU_LIMIT": "2000", "SLURMPOD_MEMORY_LIMIT": "8192"}
    plan = podkit.plan("worker", env)
    slurmd = next(p for p in plan.programs if p.name == "slurmd")
    assert f"exec {out.strip()}" == slurmd.script.rstrip("\n").splitlines()[-1]


def test_render_node_static(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pod = podkit.make_pod(tmp_path, "worker", Machine(cores_per_socket=2, mem_mib=4096))
    env_file = _env_file(pod, SLURMPOD_SLURM_VERSION="25.05", SLINKY_TOPOLOGY="blk:b1")
    assert cli.main(["render", "node", "--static", "--podinfo", str(pod.podinfo), "--env-file", str(env_file)]) == 0
    assert capsys.readouterr().out == (
        f"NodeName={podkit.POD} CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 "
        "RealMemory=4096 Features=workers Topology=blk:b1 State=UNKNOWN\n"
    )


def test_render_node_from_process_env(tmp_path: Path) -> None:
    """Without --env-file the pod's own environment is used (as in a running pod)."""
    pod = podkit.make_pod(tmp_path)
    proc = subprocess.run(
        [str(SLURMPOD), "render", "node"],
        env=pod.env(SLURMPOD_PODINFO=str(pod.podinfo)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert shlex.split(proc.stdout)[-1].startswith("CPUs=2 Boards=1 ")


def test_render_slurm_conf_matches_golden(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pod = podkit.make_pod(tmp_path, "controller")
    env_file = _env_file(pod, POD_NAME=podkit.CONTROLLER)
    assert (
        cli.main(
            [
                "render",
                "slurm-conf",
                "--cluster-spec",
                str(pod.spec),
                "--podinfo",
                str(pod.podinfo),
                "--env-file",
                str(env_file),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out.replace(f"slurmpod {__version__} ", "slurmpod VERSION ")
    assert out == (GOLDEN / "slurm.conf.basic").read_text()


def test_render_bad_input_exits_2_in_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pod = podkit.make_pod(tmp_path)
    env_file = _env_file(pod, SLURMPOD_MEMORY_LIMIT="-5")
    assert cli.main(["render", "node", "--podinfo", str(pod.podinfo), "--env-file", str(env_file)]) == 2
    err = capsys.readouterr().err
    assert "slurmpod: bad input: SLURMPOD_MEMORY_LIMIT='-5': out of range" in err
