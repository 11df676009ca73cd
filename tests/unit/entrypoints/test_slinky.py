"""Slinky's worker contract: slurmd args and env as SchedMD's slurm-operator gives them -> our plan.

The args below are what slurm-operator's worker builder writes (internal/builder/workerbuilder/
worker_app.go slurmdArgs/slurmdConfArgs): `-Z --conf-server <svc>:6817 --conf '<sorted Key=Val>'` with
`Topology='"$SLINKY_TOPOLOGY"'`, and only POD_CPUS, POD_MEMORY and SLINKY_TOPOLOGY in the env.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import podkit
import pytest
from podkit import Machine

from slurmpod import cli
from slurmpod import well_known as wk
from slurmpod.entrypoints import nodespec, slinky, start
from slurmpod.errors import BadInput

SERVER = "slurm-controller.slurm:6817"
OPERATOR_CONF = "'Features=gpu-a Topology='\"$SLINKY_TOPOLOGY\"''"
OPERATOR_ARGS = ("-Z", "--conf-server", SERVER, "--conf", OPERATOR_CONF)
MACHINE = Machine(sockets=2, cores_per_socket=2, threads_per_core=2, mem_mib=16384)


def test_parse_the_operators_args() -> None:
    a = slinky.parse(OPERATOR_ARGS)
    assert a == slinky.SlurmdArgs(SERVER, ("gpu-a",), None, ())


def test_parse_inline_values_title_cased_keys_and_extra_conf() -> None:
    a = slinky.parse(["-Z", f"--conf-server={SERVER}",
                      "--conf='Feature=x Features=a,b Realmemory=4096 Weight=7 Gres=gpu:2 Topology=blk1'"])
    assert a.features == ("x", "a", "b")
    assert a.topology == "blk1"
    assert dict(a.overrides) == {"RealMemory": "4096", "Weight": "7", "Gres": "gpu:2"}


@pytest.mark.parametrize(("argv", "field"), [
    (["--conf-server", SERVER], "slurmd args"),  # no -Z
    (["-Z"], "--conf-server"),
    (["-Z", "--conf-server"], "slurmd args"),
    (["-Z", "--conf-server", "ctl;rm -rf /"], "--conf-server"),
    (["-Z", "--conf-server", SERVER, "-v"], "slurmd args"),
    (["-Z", "--conf-server", SERVER, "--conf", "'NodeName=x'"], "--conf NodeName"),
    (["-Z", "--conf-server", SERVER, "--conf", "'Features=a\nPartitionName=p'"], "--conf"),
    (["-Z", "--conf-server", SERVER, "--conf", "'Features=a#b'"], "--conf Features"),
    (["-Z", "--conf-server", SERVER, "--conf", "'Gres=\"x y\"'"], "--conf Gres"),
    (["-Z", "--conf-server", SERVER, "--conf", "'Topology=$OTHER'"], "--conf Topology"),
    (["-Z", "--conf-server", SERVER, "--conf", "'Weight=heavy'"], "--conf Weight"),
    (["-Z", "--conf-server", SERVER, "--conf", "'Weight=1 weight=2'"], "--conf weight"),
    (["-Z", "--conf-server", SERVER, "--conf", "'novalue'"], "--conf"),
])
def test_bad_args_name_the_field(argv: list[str], field: str) -> None:
    with pytest.raises(BadInput) as exc:
        slinky.parse(argv)
    assert exc.value.problems[0].field == field


def _slinky_env(pod: podkit.Pod, **extra: str) -> dict[str, str]:
    """Only the operator's env, plus the test's stand-ins for the pod's filesystem."""
    env = {
        "PATH": "/usr/bin:/bin",
        "POD_CPUS": "2",
        "POD_MEMORY": "4096",
        "SLINKY_TOPOLOGY": "b1/s1",
        wk.ENV_SLURM_VERSION: "26.05",
        wk.ENV_RUN_DIR: str(pod.run_dir),
        wk.ENV_PODINFO_DIR: str(pod.root / "no-podinfo"),
        "SLURMPOD_HW_ROOT": str(pod.hw),
        **extra,
    }
    return slinky.pod_env(env, slinky.parse(OPERATOR_ARGS), "slurm-worker-gpu-a-0")


def test_plan_from_the_operators_contract(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path, "worker", MACHINE)
    podkit.write_key(pod.slurm_key)
    env = _slinky_env(pod, SLURMPOD_SLURM_KEY_FILE=str(pod.slurm_key))
    p = podkit.plan("worker", env, operator=slinky.parse(OPERATOR_ARGS))
    assert p.pod.name == "slurm-worker-gpu-a-0"
    assert p.pod.controller == SERVER
    assert not any(prog.name == "munged" for prog in p.programs)  # auth/slurm
    # What pod start completed reaches the programs through supervisord.conf, not its own environment.
    assert (f'environment=POD_NAME="slurm-worker-gpu-a-0",POD_NAMESPACE="default",SLURMPOD_CONTROLLER="{SERVER}",'
            'SLURMPOD_AUTH="slurm"') in p.supervisord_conf.splitlines()
    slurmd = next(prog for prog in p.programs if prog.name == "slurmd")
    # 8 CPUs on 4 cores; POD_CPUS=2 keeps 1 core, POD_MEMORY=4096 keeps 4096 of 16384 MiB.
    assert slurmd.argv[:7] == (
        "/usr/sbin/slurmd", "-D", "-Z", "--conf-server", SERVER, "--conf",
        "CPUs=8 Boards=1 SocketsPerBoard=2 CoresPerSocket=2 ThreadsPerCore=2 RealMemory=16384 "
        "CoreSpecCount=3 MemSpecLimit=12288 Features=gpu-a Topology=default:b1",
    )


def test_the_key_where_slinky_mounts_it_is_used_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pod = podkit.make_pod(tmp_path, "worker", MACHINE)
    env = _slinky_env(pod)
    assert env["SLURMPOD_SLURM_KEY_FILE"] == wk.SLURM_KEY
    settings = start.Settings.from_env(env)
    podkit.write_key(pod.slurm_key)
    monkeypatch.setattr(start.secrets, "read_key", lambda path, field: start.secrets.Key(b"k" * 64, str(path)))
    p = podkit.plan("worker", env, settings, slinky.parse(OPERATOR_ARGS))
    assert p.keys == ()  # nothing written into Slinky's read-only /etc/slurm


def test_operator_values_replace_ours_and_drop_the_reservations_they_void() -> None:
    node = podkit_node()
    merged = slinky.merge(node, slinky.parse(["-Z", "--conf-server", SERVER, "--conf",
                                              "'Features=ns RealMemory=1000 Weight=3'"]))
    conf = merged.conf_string()
    assert "RealMemory=1000" in conf and "MemSpecLimit" not in conf and "CoreSpecCount=1" in conf
    assert "Features=ns,workers" in conf and conf.endswith("Weight=3")


def podkit_node() -> nodespec.NodeSpec:
    return nodespec.NodeSpec(
        name="w-0", cpus=4, sockets=1, cores_per_socket=4, threads_per_core=1, real_memory_mib=8192,
        core_spec_count=1, mem_spec_limit_mib=4096, features=("workers",), gpus=(), weight=None, topology=None)


def test_controller_from_env_must_match_conf_server() -> None:
    with pytest.raises(BadInput) as exc:
        slinky.pod_env({wk.ENV_CONTROLLER: "other:6817"}, slinky.parse(OPERATOR_ARGS), "w-0")
    assert exc.value.problems[0].field == wk.ENV_CONTROLLER


def test_slurmd_args_are_for_workers_only(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path, "login")
    env = pod.env("login")
    with pytest.raises(BadInput):
        podkit.plan("login", env, operator=slinky.parse(OPERATOR_ARGS))


def test_render_node_previews_the_slinky_worker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pod = podkit.make_pod(tmp_path, "worker", MACHINE)
    env_file = tmp_path / "slinky.env"
    env_file.write_text(f"POD_CPUS=2\nPOD_MEMORY=4096\nSLINKY_TOPOLOGY=b1/s1\n{wk.ENV_SLURM_VERSION}=26.05\n"
                        f"SLURMPOD_HW_ROOT={pod.hw}\n{wk.ENV_POD_NAME}=slurm-worker-gpu-a-0\n")
    rc = cli.main(["render", "node", "--podinfo", str(tmp_path / "none"), "--env-file", str(env_file),
                   "--", *OPERATOR_ARGS])
    assert rc == 0
    argv = shlex.split(capsys.readouterr().out)
    assert argv[4] == SERVER
    assert argv[6].endswith("MemSpecLimit=12288 Features=gpu-a Topology=default:b1")


def test_entrypoint_refuses_bad_args_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(["entrypoint", "worker", "-Z", "--conf-server", SERVER, "--conf", "'NodeName=evil'"])
    assert rc == 2
    assert "--conf NodeName" in capsys.readouterr().err
