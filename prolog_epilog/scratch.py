"""The job's scratch directory leaves with the job in a time that does not depend on what it holds.

The Epilog must finish within PrologEpilogTimeout or Slurm drains the node, and a job can leave any
number of files. So the Epilog only renames the job's directory into the base's trash (one rename(2),
the same filesystem). An empty one is removed there at once (one rmdir(2)); for anything else, it starts
a sweeper that is no child of slurmd: its own session, nice 19 from its start, no descriptor shared with
the hook, its own time budget. Whatever the sweeper does not finish (budget
spent, a file still open) stays in the trash for the next Epilog or periodic run's sweeper.

The base is world-writable (sticky), so nothing in it is trusted: rename(2) and unlink(2) act on the
name, never on what a symlink names; the trash is a directory of root's own, mode 0700, so nothing in
it can be swapped by a user once it is there; the sweeper walks by file descriptor (openat with
O_NOFOLLOW, unlinkat), never follows a link inside, never enters another mount, and needs neither stack
nor descriptors in proportion to the tree's depth. Ref: https://man7.org/linux/man-pages/man2/rename.2.html
Ref: https://man7.org/linux/man-pages/man2/openat.2.html
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess

TRASH = ".trash"
# Seconds one sweeper may run before it ends itself: far past the slowest removal we have seen (a
# million files take seconds), short enough that a stuck one does not outlive the next periodic run
# by much. What it leaves, the next sweeper takes.
SWEEP_BUDGET_S = 1800
NICE = 19  # the lowest CPU priority; with no I/O class set, the I/O priority follows it.
# Ref: https://man7.org/linux/man-pages/man2/ioprio_set.2.html (I/O priorities and CPU nice)
# coreutils' nice(1): the interpreter starts at NICE, not only the sweep after its imports (a thread-safe
# spawn has no hook in the child before exec). Ref: https://man7.org/linux/man-pages/man1/nice.1.html
NICE_BIN = "/usr/bin/nice"


@dataclass(frozen=True, slots=True)
class Discarded:
    """What the Epilog did with a job's scratch path."""

    path: str
    trashed: str | None  # where the directory went; None: it was not a directory, and only the name went
    owner: int  # the uid that owned what was there


def _nonce() -> str:
    return os.urandom(8).hex()  # unguessable: nobody can plant an entry under the name a rename will take


def trash_of(base: str) -> str:
    return f"{base}/{TRASH}"


def _ours(st: os.stat_result) -> bool:
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not stat.S_IMODE(st.st_mode) & 0o077


def trash_dir(base: str) -> str:
    """The base's trash, made if need be. Anything else under that name (a user's directory, file or
    link: the base is world-writable) is moved aside, then into the real trash, to be swept."""
    path = trash_of(base)
    for _ in range(3):
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
        if _ours(os.lstat(path)):
            return path
        aside = f"{path}-{_nonce()}"
        os.rename(path, aside)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue  # planted again between the two calls: look again
        os.rename(aside, f"{path}/planted-{_nonce()}")
    raise OSError(f"{path} is taken by another user's entry")


def discard(base: str, name: str) -> Discarded | None:
    """Take ``base/name`` away from where jobs can see it: a directory into the trash (whoever owns
    it), anything else unlinked. None when there is nothing there. Raises OSError."""
    path = f"{base}/{name}"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)  # the link or file itself, never what it names
        return Discarded(path, None, st.st_uid)
    dest = f"{trash_dir(base)}/{name}-{_nonce()}"
    # A swap between lstat and here moves the new entry instead: the name is what moves, and the
    # sweeper looks at each entry again before it removes it.
    os.rename(path, dest)
    # An empty one (a job that wrote nothing) goes at once, in root's trash where nobody can swap it, so
    # it starts no sweeper. Ref: https://man7.org/linux/man-pages/man2/rmdir.2.html (ENOTEMPTY)
    with contextlib.suppress(OSError):
        os.rmdir(dest)
    return Discarded(path, dest, st.st_uid)


def pending(base: str) -> bool:
    """Whether the trash holds anything (one directory read, whatever it holds)."""
    try:
        with os.scandir(trash_of(base)) as it:
            return next(it, None) is not None
    except (FileNotFoundError, NotADirectoryError):
        return False


def spawn_sweeper(base: str, budget_s: int = SWEEP_BUDGET_S) -> subprocess.Popen[bytes]:
    """The sweeper, started: a new session (Slurm's kill of the hook's process group on timeout does
    not reach it) and no descriptor of the hook's (slurmd reads the hook's output until it closes).
    Ref: https://slurm.schedmd.com/prolog_epilog.html"""
    import subprocess  # noqa: PLC0415 - only when there is something to sweep

    return subprocess.Popen(  # our own interpreter and module, at nice 19 from exec: its start takes no CPU from jobs
        [NICE_BIN, "-n", str(NICE), sys.executable, "-P", "-m", __name__, trash_of(base), str(budget_s)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True,
        start_new_session=True, env={"PATH": os.defpath}, cwd="/")


def start_sweeper(base: str, budget_s: int = SWEEP_BUDGET_S) -> int:
    """Start the sweeper from a hook, which exits before it: its pid, never waited for (init reaps it)."""
    proc = spawn_sweeper(base, budget_s)
    proc.returncode = 0
    return proc.pid


class Sweepers:
    """The health agent's sweepers: at most one running per base, each reaped once it has ended (the
    agent outlives them, so nothing else would reap them)."""

    def __init__(self, spawn: Callable[[str], subprocess.Popen[bytes]] = spawn_sweeper) -> None:
        self._spawn = spawn
        self._running: dict[str, subprocess.Popen[bytes]] = {}

    def __call__(self, base: str) -> bool:
        """Start one for ``base`` unless one still runs; whether one was started."""
        for b, proc in list(self._running.items()):
            if proc.poll() is not None:  # reaps it
                del self._running[b]
        if base in self._running:
            return False
        self._running[base] = self._spawn(base)
        return True


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
BATCH = 10_000  # subdirectories taken from one pass over a directory: the memory per level stays flat


def _mount_id(fd: int) -> int | None:
    """The mount a descriptor's file is on (``mnt_id`` in /proc/self/fdinfo); None where /proc cannot say.
    Ref: https://man7.org/linux/man-pages/man5/proc_pid_fdinfo.5.html"""
    try:
        with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("mnt_id:")), None)
    except (OSError, ValueError):
        return None


@dataclass(slots=True)
class _Level:
    name: str  # its name in the level above
    ident: tuple[int, int]  # (st_dev, st_ino): what ".." must lead back to
    todo: list[str]
    stuck: set[str]  # what could not go: not retried in this pass


def _scan(fd: int, level: _Level) -> bool:
    """One pass over the directory at ``fd``: each entry that is no directory unlinked (the name, never
    what a link names), up to BATCH subdirectories queued. Whether the pass found anything to do."""
    took = False
    with os.scandir(fd) as it:
        for entry in it:
            if entry.name in level.stuck:
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                if not is_dir:
                    os.unlink(entry.name, dir_fd=fd)
            except FileNotFoundError:
                continue
            except OSError:
                level.stuck.add(entry.name)  # busy (a mount on it) or not ours to take
                continue
            took = True
            if is_dir:
                level.todo.append(entry.name)
                if len(level.todo) >= BATCH:
                    break
    return took


def _remove_dir(trash_fd: int, name: str) -> bool:
    """Remove the directory ``name`` in the trash and all it holds. No recursion and one descriptor open
    at a time, whatever the depth (a job can make a tree deeper than any stack or descriptor limit);
    back up by "..", checked against the identity seen on the way down. Never into another mount (a
    bind mount's files are not the job's): that entry stays, and so does all above it. False when
    anything stays."""
    home = (os.fstat(trash_fd).st_dev, _mount_id(trash_fd))
    cur = os.open(name, _DIR, dir_fd=trash_fd)
    try:
        st = os.fstat(cur)
        if (st.st_dev, _mount_id(cur)) != home:
            return False
        path = [_Level(name, (st.st_dev, st.st_ino), [], set())]
        while path:
            level = path[-1]
            if not level.todo and _scan(cur, level):
                continue  # look again before going up: a pass that removes may miss an entry
            if level.todo:
                sub = level.todo.pop()
                try:
                    down = os.open(sub, _DIR, dir_fd=cur)
                except FileNotFoundError:
                    continue
                except OSError:
                    level.stuck.add(sub)
                    continue
                st = os.fstat(down)
                if (st.st_dev, _mount_id(down)) != home:
                    os.close(down)
                    level.stuck.add(sub)
                    continue
                os.close(cur)
                cur = down
                path.append(_Level(sub, (st.st_dev, st.st_ino), [], set()))
                continue
            done = path.pop()
            if not path:
                break
            up = os.open("..", _DIR, dir_fd=cur)
            os.close(cur)
            cur = up
            st = os.fstat(cur)
            if (st.st_dev, st.st_ino) != path[-1].ident:
                return False  # moved while we were below (a process of the job still in it): the next pass
            try:
                os.rmdir(done.name, dir_fd=cur)
            except FileNotFoundError:
                pass
            except OSError:
                path[-1].stuck.add(done.name)
    finally:
        os.close(cur)
    try:
        os.rmdir(name, dir_fd=trash_fd)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


def _remove(trash_fd: int, name: str) -> bool:
    try:
        if stat.S_ISDIR(os.lstat(name, dir_fd=trash_fd).st_mode):
            return _remove_dir(trash_fd, name)
        os.unlink(name, dir_fd=trash_fd)
    except FileNotFoundError:
        pass
    except OSError:
        return False  # a file still open, a mount inside, a tree moved under us: the next sweeper tries again
    return True


def sweep(trash: str) -> int:
    """Empty the trash; returns the entries left (-1: the trash is not root's own). One sweeper at a
    time, and none waits for another: one that finds the trash locked leaves what it came for to the
    holder, which looks again after it lets go. So a burst of Epilogs during a long pass leaves no
    queue of sleeping sweepers."""
    import fcntl  # noqa: PLC0415 - the sweeper's own import

    fd = os.open(trash, _DIR)
    try:
        if not _ours(os.fstat(fd)):
            return -1
        left: set[str] = set()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return 0  # the holder takes it
            try:
                while names := sorted(set(os.listdir(fd)) - left):
                    left.update(n for n in names if not _remove(fd, n))
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            if not set(os.listdir(fd)) - left:
                return len(left)
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    """``python -m slurmpod.prolog_epilog.scratch TRASH BUDGET_S``: what ``start_sweeper`` runs."""
    import signal  # noqa: PLC0415 - the sweeper's own import

    trash, budget = argv[0], int(argv[1])
    signal.alarm(budget)  # SIGALRM's default action ends the process: the budget holds mid-rmtree
    os.setpriority(os.PRIO_PROCESS, 0, NICE)  # already so when started by spawn_sweeper; a run by hand too
    return 0 if sweep(trash) == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
