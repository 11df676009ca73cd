"""The Epilog's scratch removal: its time does not grow with what a job leaves, it follows no link, and
what it hands the sweeper is gone soon after. The sweepers here are real detached processes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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
    main._tidy_scratch({wk.ENV_SLURM_JOB_ID: job_id}, job=True, err=sys.stderr, path=_task_env_file(tmp_path, base))
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
    main._tidy_scratch({}, job=False, err=sys.stderr, path=_task_env_file(tmp_path, base))
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


# --- What a job (or a process of it that outlived it) can do to its scratch dir, without privileges ---

@pytest.fixture
def keep(base: Path) -> Iterator[Path]:
    """Files outside the scratch base, on its filesystem (a hard link can name them): no removal may
    touch them."""
    path = base.with_name(f"{base.name}-keep")
    path.mkdir()
    (path / "precious").write_text("x")
    (path / "sub").mkdir()
    (path / "sub" / "also").write_text("y")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _intact(keep: Path) -> bool:
    return (keep / "precious").read_text() == "x" and (keep / "sub" / "also").read_text() == "y"


def _sweeper(base: Path) -> str:
    """The sweeper as start_sweeper runs it, as a shell command."""
    return f"exec {sys.executable} -P -m {scratch.__name__} {base / scratch.TRASH} 60"


def _sh(script: str, *before: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*before, "sh", "-c", script], capture_output=True, text=True, timeout=120, check=False)


def test_a_tree_deeper_than_any_stack_or_descriptor_limit_is_swept(tmp_path: Path, base: Path) -> None:
    """3,000 levels: past Python's recursion limit (a recursive removal dies there, and so would every
    sweeper after it, leaving the trash to grow) and past the sweeper's 64 descriptors."""
    (base / "job-20").mkdir()
    fd = os.open(base / "job-20", os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(3000):
        os.mkdir("d", dir_fd=fd)
        os.close(os.open("f", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=fd))
        down = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = down
    os.close(fd)
    _files(base / "job-21", 3)  # after job-20 in the sweeper's order
    scratch.discard(str(base), "job-20")
    scratch.discard(str(base), "job-21")
    done = _sh(f"ulimit -n 64; {_sweeper(base)}")
    assert done.returncode == 0, done.stderr
    assert not scratch.pending(str(base))


def test_modes_fifos_and_links_a_job_left_do_not_stop_the_sweep(tmp_path: Path, base: Path, keep: Path) -> None:
    """Dirs the job made mode 000 or read-only, a FIFO (never opened, so nothing blocks), and a symlink and
    a hard link to files outside: the names go, what they name stays."""
    if os.geteuid() != 0:
        pytest.skip("root's CAP_DAC_OVERRIDE is what reads a mode-000 dir (the worker keeps it: deploy/)")
    job = base / "job-22"
    _files(job, 3)
    for name, mode in (("closed", 0o000), ("readonly", 0o500)):
        _files(job / name, 5)
        os.chmod(job / name, mode)
    os.mkfifo(job / "fifo")
    (job / "link").symlink_to(keep)
    os.link(keep / "precious", job / "hard")
    os.chmod(job, 0o000)
    _epilog(tmp_path, base, "22")
    assert not job.exists()
    assert _eventually(_trash_empty(base))
    assert _intact(keep)


@pytest.mark.parametrize("swap", ["moved-away", "link-instead", "hard-link-instead", "fifo-instead"])
def test_a_dir_swapped_while_the_epilog_runs_fails_nothing_and_touches_nothing_outside(
        tmp_path: Path, base: Path, keep: Path, *, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], swap: str) -> None:
    """Between the Epilog's look at the job's path and its rename, the job's user renames the dir away
    and puts something else there (or nothing): the Epilog moves whatever the name holds, or reports on
    stderr and goes on; the user's dir stays where the user put it, and nothing outside is touched."""
    job = base / "job-23"
    _files(job, 3)
    real = scratch.trash_dir

    def user_swaps_first(b: str) -> str:  # what runs between discard's lstat and its rename
        job.rename(base / "mine")
        if swap == "link-instead":
            job.symlink_to(keep)
        elif swap == "hard-link-instead":
            os.link(keep / "precious", job)
        elif swap == "fifo-instead":
            os.mkfifo(job)
        return real(b)

    monkeypatch.setattr(scratch, "trash_dir", user_swaps_first)
    _epilog(tmp_path, base, "23")
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert ("scratch: " in err) == (swap == "moved-away"), err
    assert not os.path.lexists(job)
    assert _eventually(_trash_empty(base))
    assert sorted(os.listdir(base / "mine")) == ["0", "1", "2"]
    assert _intact(keep)


def test_a_bind_mount_inside_the_scratch_dir_is_never_entered(tmp_path: Path, base: Path, keep: Path) -> None:
    """A mount under the dir (only root can make one) moves with the rename; the sweeper never goes into
    it, so the mount's files stay, and so does the trashed dir until the mount is gone."""
    if os.geteuid() != 0 or subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False).returncode:
        pytest.skip("needs a mount namespace of its own (root with CAP_SYS_ADMIN)")
    job = base / "job-24"
    _files(job, 3)
    (job / "data").mkdir()
    discard = f"{sys.executable} -P -c 'from {scratch.__name__} import discard; discard(\"{base}\", \"job-24\")'"
    ns = _sh(f"mount --bind {keep} {job}/data && {discard} && {_sweeper(base)}", "unshare", "-m")
    assert ns.returncode == 1, ns.stderr  # one entry left: the one holding the mount
    assert _intact(keep)
    assert not job.exists() and scratch.pending(str(base))
    assert scratch.sweep(str(base / scratch.TRASH)) == 0  # the namespace, and its mount, are gone
    assert _intact(keep)


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


def test_a_sweeper_that_finds_the_trash_locked_leaves_at_once(base: Path) -> None:
    """A burst of Epilogs during a long pass leaves no queue of sleeping sweepers: the holder takes what
    they came for."""
    import fcntl

    _files(base / "job-27", 3)
    scratch.discard(str(base), "job-27")
    fd = os.open(base / scratch.TRASH, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        start = time.monotonic()
        assert scratch.sweep(str(base / scratch.TRASH)) == 0
        assert time.monotonic() - start < 1.0 and scratch.pending(str(base))
    finally:
        os.close(fd)
    assert scratch.sweep(str(base / scratch.TRASH)) == 0 and not scratch.pending(str(base))


class _Proc:
    """A sweeper process as subprocess.Popen shows it: running until ``end``, then reaped by poll()."""

    def __init__(self) -> None:
        self.ended = False
        self.polls = 0

    def poll(self) -> int | None:
        self.polls += 1
        return 0 if self.ended else None


def test_the_agents_sweepers_run_one_per_base_and_are_reaped() -> None:
    started: list[_Proc] = []

    def spawn(base: str) -> _Proc:
        started.append(_Proc())
        return started[-1]

    sweepers = scratch.Sweepers(spawn)  # type: ignore[arg-type]
    assert sweepers("/tmp/jobs") is True
    assert sweepers("/tmp/jobs") is False  # one still sweeps this base: the next epilog leaves it to it
    assert sweepers("/scratch") is True
    started[0].ended = True
    assert sweepers("/tmp/jobs") is True  # the first was reaped (poll) and a new one started
    assert len(started) == 3 and started[0].polls >= 1


def test_an_empty_scratch_dir_goes_at_once_and_starts_no_sweeper(tmp_path: Path, base: Path) -> None:
    """Most short jobs write nothing there: their Epilog costs a rename and an rmdir, and no process
    (a sweeper's interpreter start is tens of ms of CPU, taken from the next job on the node)."""
    (base / "job-30").mkdir()
    started: list[str] = []
    main._tidy_scratch({wk.ENV_SLURM_JOB_ID: "30"}, job=True, err=sys.stderr, path=_task_env_file(tmp_path, base),
                       sweep=started.append)
    assert not (base / "job-30").exists()
    assert not scratch.pending(str(base))
    assert started == []
    _files(base / "job-31", 1)  # one file: the sweeper's, as before
    main._tidy_scratch({wk.ENV_SLURM_JOB_ID: "31"}, job=True, err=sys.stderr, path=_task_env_file(tmp_path, base),
                       sweep=started.append)
    assert not (base / "job-31").exists()
    assert scratch.pending(str(base)) and started == [str(base)]


def test_the_sweepers_interpreter_starts_at_the_lowest_priority(tmp_path: Path, base: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """nice 19 from exec, not only after the sweeper's imports: its start takes no CPU from a job."""
    seen = tmp_path / "nice"
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\nnice > {seen}\n", encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setattr(scratch.sys, "executable", str(fake))
    assert scratch.spawn_sweeper(str(base)).wait(timeout=10) == 0
    assert seen.read_text(encoding="utf-8").strip() == str(scratch.NICE)
