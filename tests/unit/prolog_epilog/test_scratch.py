"""The Epilog's scratch removal: its time does not grow with what a job leaves, it follows no link, and
what it hands the sweeper is gone soon after. The sweepers here are real detached processes."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from slurmpod import well_known as wk
from slurmpod.prolog_epilog import main, scratch, task_env
from slurmpod.prolog_epilog.task_env import TaskEnv

OTHER_UID = 4321
EPILOG_BOUND_S = 1.0  # what the removal step may take, whatever the count (PrologEpilogTimeout is far above)
MANY = 200_000


@pytest.fixture
def base(tmp_path: Path) -> Iterator[Path]:
    """A scratch base on tmpfs where there is one (as /tmp is on many nodes): file creation there is
    what lets the test hold many files in seconds."""
    shm = Path("/dev/shm")
    root = shm / f"slurmpod-test-{os.getpid()}-{tmp_path.name}" if shm.is_dir() else tmp_path / "b"
    root.mkdir(mode=0o1777)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _task_env_file(tmp_path: Path, base: Path) -> str:
    path = tmp_path / "task-env.json"
    path.write_text(task_env.render(TaskEnv((), str(base))), encoding="utf-8")
    return str(path)


def _files(d: Path, count: int) -> None:
    d.mkdir()
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(count):
            os.close(os.open(str(i), os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=fd))
    finally:
        os.close(fd)


def _eventually(what: Callable[[], bool], timeout: float = 120.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if what():
            return True
        time.sleep(0.05)
    return what()


def _epilog(tmp_path: Path, base: Path, job_id: str) -> float:
    start = time.monotonic()
    main._tidy_scratch({wk.ENV_SLURM_JOB_ID: job_id}, job=True, path=_task_env_file(tmp_path, base))
    return time.monotonic() - start


def _trash_empty(base: Path) -> Callable[[], bool]:
    return lambda: not scratch.pending(str(base))


def test_epilog_time_is_flat_in_the_file_count(tmp_path: Path, base: Path) -> None:
    """A job leaving 1,000,000 files is the case to hold; 200,000 keep the unit suite quick on a small
    machine (making them is the test's cost; the removal step makes one lstat, one mkdir, one rename and
    starts one process whatever the count). The step is timed for 10 files and for 200,000: both under
    the bound, and within a small margin of each other, so the time is flat in the count and 1,000,000
    (or any count) takes the same."""
    _files(base / "job-1", 10)
    _files(base / "job-2", MANY)
    few = _epilog(tmp_path, base, "1")
    many = _epilog(tmp_path, base, "2")
    assert few < EPILOG_BOUND_S and many < EPILOG_BOUND_S, (few, many)
    assert many < few + 0.5, (few, many)
    assert not (base / "job-1").exists() and not (base / "job-2").exists()
    assert _eventually(_trash_empty(base)), os.listdir(base / scratch.TRASH)


def test_a_link_planted_as_the_scratch_dir_is_not_followed(tmp_path: Path, base: Path) -> None:
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious").write_text("x")
    (base / "job-6").symlink_to(keep)
    (base / "job-7").mkdir()
    (base / "job-7" / "link").symlink_to(keep)
    _epilog(tmp_path, base, "6")
    _epilog(tmp_path, base, "7")
    assert not os.path.lexists(base / "job-6") and not (base / "job-7").exists()
    assert _eventually(_trash_empty(base))
    assert (keep / "precious").read_text() == "x"


def test_a_directory_of_another_user_goes_as_any_other(tmp_path: Path, base: Path) -> None:
    """Root's Epilog takes whatever sits at the job's path, whoever made it; the task prolog is what
    refuses to hand a job a directory it does not own."""
    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    _files(base / "job-8", 3)
    os.chown(base / "job-8", OTHER_UID, OTHER_UID)
    moved = task_env.remove_scratch(TaskEnv((), str(base)), "8")
    assert moved is not None and moved.owner == OTHER_UID and moved.trashed is not None
    assert not (base / "job-8").exists()
    scratch.start_sweeper(str(base))
    assert _eventually(_trash_empty(base))


def test_nothing_at_the_path_is_nothing_to_do(base: Path) -> None:
    assert task_env.remove_scratch(TaskEnv((), str(base)), "5") is None
    assert task_env.remove_scratch(TaskEnv((), None), "5") is None
    assert task_env.remove_scratch(TaskEnv((), str(base)), "5; rm -rf /") is None


@pytest.mark.parametrize("planted", ["dir", "link"], ids=["users-dir", "link-to-elsewhere"])
def test_a_trash_planted_by_a_user_is_moved_aside_and_swept(tmp_path: Path, base: Path, planted: str) -> None:
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious").write_text("x")
    if planted == "dir":
        (base / scratch.TRASH).mkdir(mode=0o777)
        if os.geteuid() == 0:
            os.chown(base / scratch.TRASH, OTHER_UID, OTHER_UID)
    else:
        (base / scratch.TRASH).symlink_to(keep)
    _files(base / "job-9", 3)
    _epilog(tmp_path, base, "9")
    trash = base / scratch.TRASH
    assert trash.is_dir() and not trash.is_symlink() and trash.stat().st_uid == os.geteuid()
    assert oct(trash.stat().st_mode & 0o777) == "0o700"
    assert _eventually(_trash_empty(base))
    assert sorted(os.listdir(base)) == [scratch.TRASH]
    assert (keep / "precious").read_text() == "x"


def test_two_sweepers_at_once_take_turns_and_leave_nothing(base: Path) -> None:
    for job in range(20):
        _files(base / f"job-{job}", 200)
        scratch.discard(str(base), f"job-{job}")
    trash = scratch.trash_dir(str(base))
    left: list[int] = []
    threads = [threading.Thread(target=lambda: left.append(scratch.sweep(trash))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert left == [0, 0]
    assert os.listdir(trash) == []


def test_a_sweeper_refuses_a_trash_that_is_not_roots_own(base: Path) -> None:
    trash = base / scratch.TRASH
    trash.mkdir(mode=0o777)
    (trash / "f").write_text("x")
    os.chmod(trash, 0o777)
    assert scratch.sweep(str(trash)) == -1
    assert (trash / "f").exists()


def test_the_periodic_run_sweeps_what_earlier_sweepers_left(tmp_path: Path, base: Path) -> None:
    trash = Path(scratch.trash_dir(str(base)))
    _files(trash / "job-3-left", 50)
    main._tidy_scratch({}, job=False, path=_task_env_file(tmp_path, base))
    assert _eventually(_trash_empty(base))


def test_a_job_dir_made_again_after_the_rename_is_the_next_epilogs(tmp_path: Path, base: Path) -> None:
    """A process of the job that outlived it may make its directory again after the rename: the new one
    is a directory like any other, and the next Epilog on the node for that id (or the operator) takes it;
    the trashed one is still swept."""
    _files(base / "job-4", 5)
    moved = scratch.discard(str(base), "job-4")
    assert moved is not None and moved.trashed is not None
    (base / "job-4").mkdir()
    scratch.start_sweeper(str(base))
    assert _eventually(_trash_empty(base))
    assert (base / "job-4").is_dir()
    assert scratch.discard(str(base), "job-4") is not None


def test_a_failing_removal_or_sweeper_never_fails_the_epilog(tmp_path: Path, base: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _files(base / "job-25", 3)

    def broken(*_: object) -> int:
        raise OSError(7, "no sweeper today")

    monkeypatch.setattr(scratch, "start_sweeper", broken)
    _epilog(tmp_path, base, "25")  # raises nothing
    assert not (base / "job-25").exists()

    def bug(*_: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(task_env, "remove_scratch", bug)
    _epilog(tmp_path, base, "26")
