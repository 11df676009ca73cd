"""The Epilog's /dev/shm tidy: the job's user's entries go once neither a process nor another job of the
user is left on the worker, nobody else's ever do, nothing is followed, an unanswered slurmctld removes
nothing, and the work per Epilog is bounded. Files are owned by other uids with chown (the tests run as
root, as the Epilog does); processes are real; slurmctld is the fake client."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fakes.slurm_client import FakeSlurm

from slurmpod import well_known as wk
from slurmpod.errors import TransientError
from slurmpod.prolog_epilog import job_shm, main, scratch, task_env
from slurmpod.prolog_epilog.task_env import TaskEnv

USER = 4321
OTHER = 4322
NODE = "w-0"
JOB = 12
NAME = "alice"


def _none() -> bool | None:
    return False


@pytest.fixture
def shm(tmp_path: Path) -> Path:
    d = tmp_path / "shm"
    d.mkdir()
    d.chmod(0o1777)
    return d


def _own(path: Path, uid: int) -> Path:
    os.chown(path, uid, uid, follow_symlinks=False)
    return path


def _file(d: Path, name: str, uid: int) -> Path:
    p = d / name
    p.write_bytes(b"x" * 4096)
    return _own(p, uid)


def _dir(d: Path, name: str, uid: int) -> Path:
    p = d / name
    p.mkdir()
    return _own(p, uid)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A real process of USER in this PID namespace, as a process that escaped a job would be."""
    proc = subprocess.Popen(["sleep", "60"], user=USER, group=USER)
    yield proc
    proc.kill()
    proc.wait()


def test_the_users_entries_go_and_nobody_elses(shm: Path) -> None:
    _file(shm, "psm_shm.1", USER)
    _file(shm, "nccl-abc", USER)
    _file(_dir(shm, "torch_1234", USER), "segment", USER)
    os.symlink(_file(shm, "theirs", OTHER), shm / "link-to-theirs")  # the user's link to another's file
    _own(shm / "link-to-theirs", USER)
    _file(shm, "daemon", 0)

    assert job_shm.release(str(shm), USER, _none) == job_shm.Released(USER, 4, None)

    assert sorted(p.name for p in shm.iterdir() if p.name != scratch.TRASH) == ["daemon", "theirs"]
    assert (shm / "theirs").read_bytes() == b"x" * 4096  # the link went, never what it named
    assert scratch.pending(str(shm))  # the directory went into root's trash, for the sweeper
    assert scratch.sweep(scratch.trash_of(str(shm))) == 0
    assert not scratch.pending(str(shm))


def test_nothing_goes_while_the_user_still_has_a_process(shm: Path, sleeper: subprocess.Popen[bytes]) -> None:
    _file(shm, "nccl-abc", USER)
    assert job_shm.user_has_processes(USER)
    assert job_shm.release(str(shm), USER, _none) == job_shm.Released(USER, 0, job_shm.PROCESSES)
    assert (shm / "nccl-abc").exists()
    sleeper.kill()
    sleeper.wait()
    assert not job_shm.user_has_processes(USER)
    assert job_shm.release(str(shm), USER, _none).removed == 1


def test_a_process_counts_by_any_of_its_uids(tmp_path: Path) -> None:
    """A setuid program runs with the user's real uid and root's effective one: still the user's."""
    proc = tmp_path / "proc"
    (proc / "7").mkdir(parents=True)
    (proc / "self").mkdir()
    (proc / "7" / "status").write_text(f"Name:\tx\nUid:\t{USER}\t0\t0\t0\nGid:\t0\t0\t0\t0\n")
    assert job_shm.user_has_processes(USER, str(proc))
    assert not job_shm.user_has_processes(OTHER, str(proc))


@pytest.mark.parametrize(("answer", "kept"), [(True, job_shm.OTHER_JOB), (None, job_shm.UNKNOWN)],
                         ids=["another-job", "no-answer"])
def test_nothing_goes_while_slurmctld_names_another_job_of_the_user_or_does_not_answer(
        shm: Path, answer: bool | None, kept: str) -> None:
    """A job between two steps runs nothing on its other nodes and may have left segments there."""
    _file(shm, "nccl-abc", USER)
    assert job_shm.release(str(shm), USER, lambda: answer) == job_shm.Released(USER, 0, kept)
    assert (shm / "nccl-abc").exists()


def test_a_user_with_nothing_there_costs_no_question(shm: Path) -> None:
    """Most jobs leave nothing: the Epilog then asks slurmctld nothing and reads no /proc."""
    _file(shm, "theirs", OTHER)

    def ask() -> bool | None:
        raise AssertionError("slurmctld asked although the user has no entry")

    assert job_shm.release(str(shm), USER, ask, proc="/nonexistent") == job_shm.Released(USER, 0, None)


def test_root_is_never_tidied(shm: Path) -> None:
    _file(shm, "munge", 0)
    assert job_shm.release(str(shm), 0, _none) == job_shm.Released(0, 0, "root")
    assert (shm / "munge").exists()


def test_the_work_per_epilog_is_bounded_and_the_next_takes_the_rest(shm: Path) -> None:
    for i in range(5):
        _file(shm, f"f{i}", USER)
    assert job_shm.release(str(shm), USER, _none, max_entries=3) == job_shm.Released(USER, 3, job_shm.MORE)
    assert job_shm.release(str(shm), USER, _none, max_entries=3) == job_shm.Released(USER, 2, None)
    assert list(shm.iterdir()) == []


def test_another_users_many_entries_cost_an_epilog_no_more_than_the_bound(shm: Path) -> None:
    """One user's leftovers cannot make every other job's Epilog on the worker slow."""
    for i in range(5):
        _file(shm, f"f{i}", OTHER)

    def ask() -> bool | None:
        raise AssertionError("slurmctld asked although none of the user's entries was seen")

    assert job_shm.release(str(shm), USER, ask, max_entries=3) == job_shm.Released(USER, 0, job_shm.MORE)


def test_the_time_per_epilog_is_bounded(shm: Path) -> None:
    for i in range(3):
        _file(shm, f"f{i}", USER)
    ticks = iter([0.0] * 4 + [5.0] * 10)  # the deadline and the listing of 3 in time, then the budget is spent
    done = job_shm.release(str(shm), USER, _none, budget_s=2.0, clock=lambda: next(ticks))
    assert done == job_shm.Released(USER, 0, job_shm.MORE)
    assert len(list(shm.iterdir())) == 3


def test_a_directory_goes_in_one_rename_whatever_it_holds(shm: Path) -> None:
    d = _dir(shm, "big", USER)
    for i in range(2000):
        (d / str(i)).write_bytes(b"")
    assert job_shm.release(str(shm), USER, _none).removed == 1
    (moved,) = Path(scratch.trash_of(str(shm))).iterdir()
    assert len(list(moved.iterdir())) == 2000  # untouched: the sweeper empties it, not the Epilog


def test_a_trash_the_user_planted_is_swept_not_kept(shm: Path) -> None:
    planted = _dir(shm, scratch.TRASH, USER)
    _file(planted, "hog", USER)
    job_shm.release(str(shm), USER, _none)
    trash = Path(scratch.trash_of(str(shm)))
    assert trash.lstat().st_uid == 0 and (trash.lstat().st_mode & 0o777) == 0o700
    assert scratch.sweep(str(trash)) == 0
    assert [p.name for p in shm.iterdir()] == [scratch.TRASH] and not list(trash.iterdir())


# --- Through the Epilog's own path: the worker's task environment names the directory ---

def _env_file(tmp_path: Path, shm: Path | None) -> str:
    path = tmp_path / "task-env.json"
    path.write_text(task_env.render(TaskEnv((), None, True, None if shm is None else str(shm))), encoding="utf-8")
    return str(path)


def _epilog(tmp_path: Path, shm: Path | None, slurm: FakeSlurm | None, *, uid: str = str(USER),
            sweep: Callable[[str], object] | None = None, job: bool = True) -> None:
    env = {wk.ENV_SLURM_JOB_ID: str(JOB), wk.ENV_SLURM_JOB_UID: uid}
    main._tidy_scratch(env, job=job, err=sys.stderr, path=_env_file(tmp_path, shm), sweep=sweep, slurm=slurm,
                       node=NODE)


def _slurm(*others: tuple[int, str]) -> FakeSlurm:
    slurm = FakeSlurm()
    slurm.add_job(JOB, NODE, state="COMPLETING", completing=True, user=NAME)  # the job whose Epilog this is
    for job_id, user in others:
        slurm.add_job(job_id, NODE, user=user)
    return slurm


def test_the_epilog_tidies_the_jobs_user_when_slurmctld_lists_no_other_job_of_theirs(tmp_path: Path,
                                                                                    shm: Path) -> None:
    _file(shm, "nccl-abc", USER)
    _file(shm, "nccl-def", OTHER)
    slurm = _slurm((13, "bob"))  # another user's job on the node does not hold the tidy back
    sweeps: list[str] = []
    _epilog(tmp_path, shm, slurm, sweep=sweeps.append)
    assert [p.name for p in shm.iterdir()] == ["nccl-def"]
    assert slurm.called("jobs_on_node") == [(NODE,)]
    assert sweeps == []  # files are unlinked at once; only directories wait for a sweeper


@pytest.mark.parametrize("slurm", [_slurm((14, NAME)), None, "down"], ids=["another-job", "no-client", "down"])
def test_the_epilog_keeps_everything_while_slurmctld_lists_another_job_of_the_user_or_cannot_say(
        tmp_path: Path, shm: Path, slurm: FakeSlurm | str | None) -> None:
    if slurm == "down":
        slurm = FakeSlurm(fail={"jobs_on_node": TransientError("Unable to contact slurm controller")})
    assert not isinstance(slurm, str)
    _file(shm, "nccl-abc", USER)
    _epilog(tmp_path, shm, slurm)
    assert (shm / "nccl-abc").exists()


@pytest.mark.parametrize("uid", ["", "abc", "12 34", "1\n2", "99999999999", "\u0664\u0663\u0662\u0661"])
def test_no_tidy_without_a_job_uid_slurm_could_have_set(tmp_path: Path, shm: Path, uid: str) -> None:
    _file(shm, "nccl-abc", USER)
    slurm = _slurm()
    _epilog(tmp_path, shm, slurm, uid=uid)
    assert (shm / "nccl-abc").exists()
    assert slurm.calls == []


def test_no_tidy_where_the_worker_names_no_shared_memory_directory(tmp_path: Path, shm: Path) -> None:
    """A task environment written before the field existed: nothing is touched."""
    _file(shm, "nccl-abc", USER)
    path = tmp_path / "task-env.json"
    path.write_text('{"exports": [], "scratch_base": null, "scratch_tmpdir": true}', encoding="utf-8")
    assert task_env.parse(path.read_text()).shm_dir is None
    slurm = _slurm()
    main._tidy_scratch({wk.ENV_SLURM_JOB_ID: str(JOB), wk.ENV_SLURM_JOB_UID: str(USER)}, job=True,
                       err=sys.stderr, path=str(path), slurm=slurm, node=NODE)
    assert (shm / "nccl-abc").exists()


def test_the_healthcheck_never_tidies_but_sweeps_what_epilogs_left(tmp_path: Path, shm: Path) -> None:
    _file(shm, "nccl-abc", USER)
    (Path(scratch.trash_dir(str(shm))) / "left").mkdir()
    sweeps: list[str] = []
    _epilog(tmp_path, shm, _slurm(), sweep=sweeps.append, job=False)
    assert (shm / "nccl-abc").exists()
    assert sweeps == [str(shm)]


def test_an_unreadable_directory_is_logged_never_the_hooks_failure(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-such-shm"
    _epilog(tmp_path, missing, _slurm())
    assert str(missing) in capsys.readouterr().err
