"""The task prolog: what the worker writes at start, what each task gets, and the scratch dir's life."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ckit
import paths
import pytest

from slurmpod import well_known as wk
from slurmpod.errors import BadInput
from slurmpod.prolog_epilog import task_env
from slurmpod.prolog_epilog.task_env import TaskEnv

ROUTES = """Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t010012AC\t0003\t0\t0\t0\t00000000\t0\t0\t0
eth0\t000012AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
"""
OTHER_UID = 4321

def _from_pod(env: dict[str, str], routes: str, placement: str | None) -> TaskEnv:
    """The worker's start: its settings from the env, its Kubernetes node from the pod's NODE_NAME."""
    return task_env.from_pod(task_env.Inputs.from_env(env), env.get(wk.ENV_NODE_NAME, ""), routes, placement)



def test_pod_defaults_export_the_default_route_interface_and_a_scratch_base() -> None:
    got = _from_pod({wk.ENV_NODE_NAME: "gke-a3-pool-1"}, ROUTES, "block1/host3")
    assert got == TaskEnv(
        (("NCCL_SOCKET_IFNAME", "eth0"), (wk.TASK_ENV_TOPOLOGY, "block1/host3"),
         (wk.TASK_ENV_K8S_NODE, "gke-a3-pool-1")),
        wk.DEFAULT_SCRATCH_BASE, True, wk.JOB_SHM_DIR)


@pytest.mark.parametrize(
    ("env", "exports", "base", "tmpdir"),
    [
        ({wk.ENV_NCCL_SOCKET_IFNAME: "^lo,docker"}, [("NCCL_SOCKET_IFNAME", "^lo,docker")], wk.DEFAULT_SCRATCH_BASE,
         True),
        ({wk.ENV_NCCL_SOCKET_IFNAME: ""}, [], wk.DEFAULT_SCRATCH_BASE, True),
        ({wk.ENV_NCCL_TOPO_FILE: "/etc/nccl/topo.xml"},
         [("NCCL_SOCKET_IFNAME", "eth0"), ("NCCL_TOPO_FILE", "/etc/nccl/topo.xml")], wk.DEFAULT_SCRATCH_BASE, True),
        ({wk.ENV_SCRATCH_BASE: "", wk.ENV_SCRATCH_TMPDIR: "false"}, [("NCCL_SOCKET_IFNAME", "eth0")], None, False),
        ({wk.ENV_SCRATCH_BASE: "/scratch/jobs/"}, [("NCCL_SOCKET_IFNAME", "eth0")], "/scratch/jobs", True),
    ],
    ids=["ifname-set", "ifname-off", "topo-file", "no-scratch", "scratch-base-trailing-slash"],
)
def test_pod_settings(env: dict[str, str], exports: list[tuple[str, str]], base: str | None, tmpdir: bool) -> None:
    assert _from_pod(env, ROUTES, None) == TaskEnv(tuple(exports), base, tmpdir, wk.JOB_SHM_DIR)


def test_no_default_route_exports_no_interface() -> None:
    assert _from_pod({}, ROUTES.splitlines()[0], None).exports == ()


def test_every_bad_pod_setting_is_reported_at_once() -> None:
    env = {wk.ENV_NCCL_SOCKET_IFNAME: "eth0\nexport LD_PRELOAD=/tmp/x.so", wk.ENV_NCCL_TOPO_FILE: "topo.xml",
           wk.ENV_SCRATCH_BASE: "/tmp/a b", wk.ENV_SCRATCH_TMPDIR: "yes", wk.ENV_NODE_NAME: "node\n1"}
    with pytest.raises(BadInput) as err:
        _from_pod(env, ROUTES, "block1/host3\nexport X=1")
    fields = [p.field for p in err.value.problems]
    assert fields == [wk.ENV_NCCL_SOCKET_IFNAME, wk.ENV_NCCL_TOPO_FILE, f"annotation {wk.ANNOTATION_TOPOLOGY}",
                      wk.ENV_NODE_NAME, wk.ENV_SCRATCH_BASE, wk.ENV_SCRATCH_TMPDIR]
    assert err.value.problems[0].value == env[wk.ENV_NCCL_SOCKET_IFNAME]


def test_the_file_round_trips_and_a_hand_edited_one_cannot_add_a_line() -> None:
    te = _from_pod({}, ROUTES, "block1/host3")
    assert task_env.parse(task_env.render(te)) == te
    for bad in ('{"exports": [["X", "1\\nexport LD_PRELOAD=/x"]], "scratch_base": null, "scratch_tmpdir": true}',
                '{"exports": [["X=1 Y", "1"]], "scratch_base": null, "scratch_tmpdir": true}',
                '{"exports": [], "scratch_base": "relative", "scratch_tmpdir": true}',
                '{"exports": [], "scratch_base": null, "scratch_tmpdir": "yes"}',
                '{"exports": [], "scratch_base": null, "scratch_tmpdir": true, "shm_dir": "dev/shm"}',
                '{"exports": [], "scratch_base": null, "scratch_tmpdir": true, "shm_dir": "/dev/shm\\n/x"}',
                "not json"):
        with pytest.raises(BadInput):
            task_env.parse(bad)


def test_lines_tripwire_refuses_a_value_that_could_end_the_line() -> None:
    with pytest.raises(BadInput):
        task_env.lines(TaskEnv((("X", "a\nb"),), None), None)


def _file(tmp_path: Path, base: Path | None, tmpdir: bool = True) -> Path:
    path = tmp_path / "task-env.json"
    te = TaskEnv((("NCCL_SOCKET_IFNAME", "eth0"),), None if base is None else str(base), tmpdir)
    path.write_text(task_env.render(te), encoding="utf-8")
    return path


def test_a_task_gets_the_exports_and_its_private_scratch_dir(tmp_path: Path) -> None:
    base = tmp_path / "jobs"
    base.mkdir(mode=0o1777)
    out, notes = task_env.run({wk.ENV_SLURM_JOB_ID: "42"}, str(_file(tmp_path, base)), os.getuid())
    scratch = base / "job-42"
    assert out == ["export NCCL_SOCKET_IFNAME=eth0", f"export {wk.TASK_ENV_SCRATCH}={scratch}",
                   f"export TMPDIR={scratch}"]
    assert notes == []
    assert scratch.is_dir() and (scratch.stat().st_mode & 0o777) == 0o700
    # the job's next task on this node finds it made and uses it
    assert task_env.run({wk.ENV_SLURM_JOB_ID: "42"}, str(_file(tmp_path, base)), os.getuid())[0] == out


def test_scratch_without_tmpdir_and_without_a_job_id(tmp_path: Path) -> None:
    base = tmp_path / "jobs"
    base.mkdir()
    path = str(_file(tmp_path, base, tmpdir=False))
    assert task_env.run({wk.ENV_SLURM_JOB_ID: "7"}, path, os.getuid())[0][-1] == \
        f"export {wk.TASK_ENV_SCRATCH}={base}/job-7"
    assert task_env.run({wk.ENV_SLURM_JOB_ID: "7;rm"}, path, os.getuid())[0] == ["export NCCL_SOCKET_IFNAME=eth0"]


def _planted(tmp_path: Path, planted: str) -> Path:
    """A base with job 9's scratch path already taken: a link, a file, a dir open to all, or a private
    dir (another user's, when the test says whose it is). Returns the base."""
    base = tmp_path / "jobs"
    base.mkdir()
    scratch = base / "job-9"
    if planted == "symlink":
        scratch.symlink_to(tmp_path)
    elif planted == "file":
        scratch.write_text("", encoding="utf-8")
    else:
        scratch.mkdir(mode=0o700)
        scratch.chmod(0o777 if planted == "open-mode" else 0o700)
    return base


@pytest.mark.parametrize("planted", ["other-users-dir", "symlink", "open-mode", "file"])
def test_a_planted_scratch_dir_is_not_used(tmp_path: Path, planted: str) -> None:
    base = _planted(tmp_path, planted)
    uid = os.getuid() if planted != "other-users-dir" else OTHER_UID
    out, notes = task_env.run({wk.ENV_SLURM_JOB_ID: "9"}, str(_file(tmp_path, base)), uid)
    assert out == ["export NCCL_SOCKET_IFNAME=eth0"]
    assert len(notes) == 1 and "not a private directory" in notes[0]


def test_no_file_exports_nothing(tmp_path: Path) -> None:
    assert task_env.run({wk.ENV_SLURM_JOB_ID: "1"}, str(tmp_path / "absent.json"), os.getuid()) == ([], [])


def test_the_program_imports_little_and_exports_nothing_without_the_file() -> None:
    """TaskProlog runs before every task: no YAML, jinja2, argparse or logging on its path."""
    code = ("import sys, runpy; from slurmpod.prolog_epilog import task_env; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'yaml', 'jinja2', 'argparse', 'logging'}); "
            "print(bad)")
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
    if Path(wk.TASK_ENV_FILE).exists():
        pytest.skip(f"{wk.TASK_ENV_FILE} exists on this machine")
    prog = Path(sys.executable).parent / "slurmpod-task-prolog"
    done = subprocess.run([str(prog)], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout) == (0, "")


# --- What each task gets on a worker: images/files/slurmpod_task_env.c (in the SPANK plugin), over what
# the start rendered. Built here with the host's C compiler into a harness that prints what it sets. ---
FILES = ckit.FILES
HARNESS = paths.REPO / "tests" / "unit" / "prolog_epilog" / "task_env_harness.c"


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ckit.build(tmp_path_factory.mktemp("task-env") / "task_env_harness", f"-I{FILES}", str(HARNESS),
                      str(FILES / "slurmpod_task_env.c"), what="the task environment harness")


def _files(tmp_path: Path, base: Path | None, tmpdir: bool = True,
           exports: tuple[tuple[str, str], ...] = (("NCCL_SOCKET_IFNAME", "eth0"),)) -> tuple[Path, Path]:
    """The two files, written as the worker's start writes them (no scratch file without a base)."""
    exported, scratch = task_env.render_for_script(TaskEnv(exports, None if base is None else str(base), tmpdir))
    (tmp_path / "exports").write_text(exported, encoding="utf-8")
    if scratch is not None:
        (tmp_path / "scratch").write_text(scratch, encoding="utf-8")
    return tmp_path / "exports", tmp_path / "scratch"


def _task(harness: Path, files: tuple[Path, Path], job_id: int) -> tuple[list[str], str]:
    done = subprocess.run([str(harness), str(files[0]), str(files[1]), str(job_id)], capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines(), done.stderr


def test_a_task_gets_what_the_python_task_prolog_prints(harness: Path, tmp_path: Path) -> None:
    base = tmp_path / "jobs"
    base.mkdir(mode=0o1777)
    files = _files(tmp_path, base)
    out, err = _task(harness, files, 42)
    python = task_env.run({wk.ENV_SLURM_JOB_ID: "42"}, str(_file(tmp_path, base)), os.getuid())
    assert (out, err) == (python[0], "")
    scratch = base / "job-42"
    assert scratch.is_dir() and (scratch.stat().st_mode & 0o777) == 0o700
    assert _task(harness, files, 42) == (out, "")  # the job's next task finds it made and uses it


def test_the_scratch_dir_is_0700_whatever_the_tasks_umask(harness: Path, tmp_path: Path) -> None:
    base = tmp_path / "jobs"
    base.mkdir(mode=0o1777)
    files = _files(tmp_path, base)
    done = subprocess.run(["sh", "-c", f'umask 0777; exec "{harness}" "{files[0]}" "{files[1]}" 5'],
                          capture_output=True, text=True, timeout=30, check=True)
    assert f"export {wk.TASK_ENV_SCRATCH}={base}/job-5" in done.stdout.splitlines(), done.stderr
    assert ((base / "job-5").stat().st_mode & 0o777) == 0o700


def test_without_tmpdir_without_scratch_and_without_a_job_id(harness: Path, tmp_path: Path) -> None:
    base = tmp_path / "jobs"
    base.mkdir()
    files = _files(tmp_path, base, tmpdir=False)
    assert _task(harness, files, 7)[0] == ["export NCCL_SOCKET_IFNAME=eth0",
                                           f"export {wk.TASK_ENV_SCRATCH}={base}/job-7"]
    assert _task(harness, files, 0)[0] == ["export NCCL_SOCKET_IFNAME=eth0"]  # no job id from Slurm
    files[1].unlink()  # no scratch base configured
    assert _task(harness, files, 8)[0] == ["export NCCL_SOCKET_IFNAME=eth0"]
    assert not (base / "job-8").exists()
    files[0].unlink()  # a worker whose start wrote nothing: nothing set, nothing said
    assert _task(harness, files, 8) == ([], "")


@pytest.mark.parametrize("planted", ["other-users-dir", "symlink", "open-mode", "file"])
def test_a_task_does_not_use_a_planted_scratch_dir(harness: Path, tmp_path: Path, planted: str) -> None:
    base = _planted(tmp_path, planted)
    if planted == "other-users-dir":
        assert os.geteuid() == 0, "planting another user's directory needs root (the test suite runs as root)"
        os.chown(base / "job-9", OTHER_UID, OTHER_UID)
    out, err = _task(harness, _files(tmp_path, base), 9)
    assert out == ["export NCCL_SOCKET_IFNAME=eth0"]
    assert "no scratch directory" in err and "not a private directory" in err


@pytest.mark.parametrize("line", [
    "export lower=1", "export 1A=1", "export A=$(id)", "export A=a b", "export A='x'", "export A=",
    "export A" + "=" + "x" * 4097, "EXPORT A=1", "export =1", "A=1", "export A=1;B=2",
])
def test_an_edited_exports_file_still_sets_only_valid_names_and_values(harness: Path, tmp_path: Path,
                                                                      line: str) -> None:
    (tmp_path / "exports").write_text(line + "\n", encoding="utf-8")
    out, _ = _task(harness, (tmp_path / "exports", tmp_path / "scratch"), 3)
    assert out == [], out


@pytest.mark.parametrize("scratch", ["relative true", "/ true", "/a/../b true", "/a/ true", "/a maybe", "/a",
                                     "/a b true", "/$(id) true", "/a\ttrue"])
def test_an_edited_scratch_file_makes_no_dir(harness: Path, tmp_path: Path, scratch: str) -> None:
    (tmp_path / "exports").write_text("", encoding="utf-8")
    (tmp_path / "scratch").write_text(scratch + "\n", encoding="utf-8")
    out, _ = _task(harness, (tmp_path / "exports", tmp_path / "scratch"), 3)
    assert out == [], (scratch, out)


def test_the_files_the_script_reads_hold_only_validated_lines() -> None:
    exported, scratch = task_env.render_for_script(TaskEnv((("A", "1"), ("NCCL_TOPO_FILE", "/etc/t.xml")), "/s", False))
    assert (exported, scratch) == ("export A=1\nexport NCCL_TOPO_FILE=/etc/t.xml\n", "/s false\n")
    for bad in (TaskEnv((("A", "1\nexport B=2"),), None), TaskEnv((("A B", "1"),), None),
                TaskEnv((), "/s x\nexport B=2")):
        with pytest.raises(BadInput):
            task_env.render_for_script(bad)
