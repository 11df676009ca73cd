"""The task environment: what every task on a worker gets, as `export NAME=value` lines.

On a worker, slurmpod's SPANK plugin (images/files/slurmpod_spank.c) sets the lines ``render_for_script``
writes in each task; `slurmpod task-prolog` prints them as a TaskProlog, whose lines slurmstepd sets in
the task. Ref: https://slurm.schedmd.com/spank.html, https://slurm.schedmd.com/slurm.conf.html#OPT_TaskProlog
The value runs to the end of its line, unquoted, so a name or value that could end the line early or
carry another command (a newline, a NUL) is refused here, when the worker writes the file, and again
before each line is set or printed.

The worker's start writes TASK_ENV_FILE (JSON) from its pod: the network interface NCCL should use, an
NCCL topology file, the pod's placement and Kubernetes node, and the scratch base. The task prolog reads
that one small file and the job's SLURM_JOB_ID, makes the job's scratch directory (as the user, mode
0700) and prints the lines: no Slurm RPC, no third-party import, nothing that can block. The job's
Epilog (root, once per node when the job ends) takes the scratch directory away, in a time that does
not depend on what it holds (prolog_epilog/scratch.py): a TaskEpilog runs after each task, while the
job's other tasks on the node may still use it.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slurmpod import well_known as wk
from slurmpod.errors import BadInput, Problem

if TYPE_CHECKING:
    from slurmpod.prolog_epilog.scratch import Discarded

# Ref: https://pubs.opengroup.org/onlinepubs/9799919799/basedefs/V1_chap08.html (portable names)
NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")
# Printable ASCII without the shell's quote and expansion characters: a value any shell reads back as is.
VALUE = re.compile(r"[A-Za-z0-9_./:,=@%+^-]{1,4096}")
# NCCL_SOCKET_IFNAME: interface names or prefixes, `^` excludes, `=` matches exactly.
# Ref: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-socket-ifname
IFNAME = re.compile(r"[=^]?[A-Za-z0-9_.:-]{1,15}(,[=^]?[A-Za-z0-9_.:-]{1,15})*")
JOB_ID = re.compile(r"[0-9]{1,10}")
AUTO = "auto"
SCRATCH_PREFIX = "job-"


@dataclass(frozen=True, slots=True)
class TaskEnv:
    """What the worker hands its task prolog (TASK_ENV_FILE)."""

    exports: tuple[tuple[str, str], ...]
    """Fixed per pod: NCCL_SOCKET_IFNAME, NCCL_TOPO_FILE, SLURMPOD_TOPOLOGY, SLURMPOD_K8S_NODE..."""
    scratch_base: str | None
    """The sticky directory (mode 1777) under which each job gets `job-<id>`; None: no scratch."""
    scratch_tmpdir: bool = True
    """Whether TMPDIR is the job's scratch directory too."""
    shm_dir: str | None = None
    """The shared-memory directory the Epilog tidies after a user's last job (prolog_epilog/job_shm.py);
    None: never."""


def check_name(field: str, name: str) -> str:
    if not NAME.fullmatch(name):
        raise BadInput.one(field, name, "not an environment variable name (A-Z, 0-9, _)")
    return name


def check_value(field: str, value: str) -> str:
    if not VALUE.fullmatch(value):
        raise BadInput.one(field, value, "must be 1-4096 characters of A-Z a-z 0-9 _ . / : , = @ % + ^ -")
    return value


def check_dir(field: str, value: str) -> str:
    check_value(field, value)
    if not value.startswith("/") or "/../" in f"{value}/" or value == "/":
        raise BadInput.one(field, value, "must be an absolute path below /")
    return value.rstrip("/")


def default_route_interface(route_table: str) -> str | None:
    """The interface of the IPv4 default route in /proc/net/route text (the pod's network), or None.
    Ref: https://man7.org/linux/man-pages/man5/proc_net.5.html"""
    for line in route_table.splitlines()[1:]:
        cols = line.split()
        if len(cols) > 2 and cols[1] == "00000000" and IFNAME.fullmatch(cols[0]):
            return cols[0]
    return None


@dataclass(frozen=True, slots=True)
class Inputs:
    """What the worker's settings say of its tasks' environment, as given (``from_pod`` validates them)."""

    socket_ifname: str = AUTO  # SLURMPOD_NCCL_SOCKET_IFNAME: interfaces, or auto (the default route's)
    topo_file: str = ""  # SLURMPOD_NCCL_TOPO_FILE
    scratch_base: str = wk.DEFAULT_SCRATCH_BASE  # SLURMPOD_SCRATCH_BASE; "" means no scratch
    scratch_tmpdir: str = "true"  # SLURMPOD_SCRATCH_TMPDIR

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Inputs:
        return cls(env.get(wk.ENV_NCCL_SOCKET_IFNAME, AUTO), env.get(wk.ENV_NCCL_TOPO_FILE, ""),
                   env.get(wk.ENV_SCRATCH_BASE, wk.DEFAULT_SCRATCH_BASE), env.get(wk.ENV_SCRATCH_TMPDIR, "true"))


def from_pod(given: Inputs, node_name: str, route_table: str, placement: str | None) -> TaskEnv:
    """The worker's task environment from its settings and its pod (Kubernetes node, placement, routes)."""
    problems: list[Problem] = []
    exports: list[tuple[str, str]] = []

    def add(field: str, name: str, value: str, check: Callable[[str, str], str] = check_value) -> None:
        try:
            exports.append((name, check(field, value)))
        except BadInput as exc:
            problems.extend(exc.problems)

    ifname = given.socket_ifname
    if ifname == AUTO:
        found = default_route_interface(route_table)
        if found:
            exports.append(("NCCL_SOCKET_IFNAME", found))
    elif ifname:
        if IFNAME.fullmatch(ifname):
            exports.append(("NCCL_SOCKET_IFNAME", ifname))
        else:
            problems.append(Problem(wk.ENV_NCCL_SOCKET_IFNAME, ifname, "not interface names (eth0, ^lo,docker)"))
    if topo := given.topo_file:
        add(wk.ENV_NCCL_TOPO_FILE, "NCCL_TOPO_FILE", topo, check_dir)
    if placement:
        add(f"annotation {wk.ANNOTATION_TOPOLOGY}", wk.TASK_ENV_TOPOLOGY, placement)
    if node_name:
        add(wk.ENV_NODE_NAME, wk.TASK_ENV_K8S_NODE, node_name)
    base_raw = given.scratch_base
    base = None
    if base_raw:
        try:
            base = check_dir(wk.ENV_SCRATCH_BASE, base_raw)
        except BadInput as exc:
            problems.extend(exc.problems)
    tmpdir_raw = given.scratch_tmpdir
    if tmpdir_raw not in ("true", "false"):
        problems.append(Problem(wk.ENV_SCRATCH_TMPDIR, tmpdir_raw, "must be true or false"))
    if problems:
        raise BadInput(problems)
    return TaskEnv(tuple(exports), base, tmpdir_raw == "true", wk.JOB_SHM_DIR)


def render(task_env: TaskEnv) -> str:
    doc = {"exports": [list(pair) for pair in task_env.exports], "scratch_base": task_env.scratch_base,
           "scratch_tmpdir": task_env.scratch_tmpdir, "shm_dir": task_env.shm_dir}
    return json.dumps(doc, sort_keys=True) + "\n"


def render_for_script(task_env: TaskEnv) -> tuple[str, str | None]:
    """(TASK_PROLOG_EXPORTS, TASK_PROLOG_SCRATCH or None): what the SPANK plugin sets in each task and
    where it makes the job's scratch dir, each line validated as ``lines`` validates it."""
    exports = "".join(f"{line}\n" for line in lines(TaskEnv(task_env.exports, None), None))
    if task_env.scratch_base is None:
        return exports, None
    base = check_dir("scratch_base", task_env.scratch_base)
    return exports, f"{base} {'true' if task_env.scratch_tmpdir else 'false'}\n"


def parse(text: str, source: str = wk.TASK_ENV_FILE) -> TaskEnv:
    """TASK_ENV_FILE back, validated again: a file edited by hand still cannot add a line."""
    try:
        doc = json.loads(text)
        pairs = [(str(name), str(value)) for name, value in doc["exports"]]
        base = doc["scratch_base"]
        tmpdir = doc["scratch_tmpdir"]
        shm = doc.get("shm_dir")
    except (ValueError, KeyError, TypeError) as exc:
        raise BadInput.one(source, text[:80], f"not a slurmpod task environment: {exc}") from None
    for name, value in pairs:
        check_name(f"{source}: name", name)
        check_value(f"{source}: {name}", value)
    if base is not None:
        base = check_dir(f"{source}: scratch_base", str(base))
    if not isinstance(tmpdir, bool):
        raise BadInput.one(f"{source}: scratch_tmpdir", str(tmpdir), "must be true or false")
    if shm is not None:
        shm = check_dir(f"{source}: shm_dir", str(shm))
    return TaskEnv(tuple(pairs), base, tmpdir, shm)


def scratch_dir(task_env: TaskEnv, job_id: str) -> str | None:
    if task_env.scratch_base is None or not JOB_ID.fullmatch(job_id):
        return None
    return f"{task_env.scratch_base}/{SCRATCH_PREFIX}{job_id}"


def make_scratch(path: str, uid: int) -> str | None:
    """Make the job's scratch directory as its user (each task of the job calls this; the first makes it).
    Returns why it is not usable, or None. One that exists must be a real directory the user owns with
    mode 0700: another user cannot plant one for this job id in the sticky base and read its files."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        return f"cannot make {path}: {exc.strerror}"
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"cannot stat {path}: {exc.strerror}"
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or stat.S_IMODE(st.st_mode) & 0o077:
        return f"{path} is not a private directory of uid {uid}"
    return None


def lines(task_env: TaskEnv, scratch: str | None) -> list[str]:
    """The TaskProlog's output. Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_TaskProlog"""
    pairs = list(task_env.exports)
    if scratch is not None:
        pairs.append((wk.TASK_ENV_SCRATCH, scratch))
        if task_env.scratch_tmpdir:
            pairs.append(("TMPDIR", scratch))
    out = []
    for name, value in pairs:
        check_name("export", name)  # the tripwire: nothing reaches slurmstepd that could add a line
        check_value(f"export {name}", value)
        out.append(f"export {name}={value}")
    return out


def remove_scratch(task_env: TaskEnv, job_id: str) -> Discarded | None:
    """The Epilog's cleanup (root): the job's path taken away in one rename, its contents left to the
    sweeper (prolog_epilog/scratch.py). None when the job had no scratch. Raises OSError."""
    from slurmpod.prolog_epilog import scratch  # noqa: PLC0415 - the worker's start and the task prolog never remove anything

    if task_env.scratch_base is None or scratch_dir(task_env, job_id) is None:
        return None
    return scratch.discard(task_env.scratch_base, f"{SCRATCH_PREFIX}{job_id}")


def run(env: Mapping[str, str], path: str, uid: int) -> tuple[list[str], list[str]]:
    """(stdout lines, stderr lines) of one task prolog. A worker without the file exports nothing."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return [], []
    task_env = parse(text, path)
    scratch = scratch_dir(task_env, env.get(wk.ENV_SLURM_JOB_ID, ""))
    notes = []
    if scratch is not None and (why := make_scratch(scratch, uid)) is not None:
        notes.append(f"slurmpod task-prolog: no scratch directory: {why}")
        scratch = None
    return lines(task_env, scratch), notes


def main(args: object, env: Mapping[str, str]) -> int:
    """`slurmpod task-prolog` and `slurmpod-task-prolog` (a TaskProlog= program: no arguments). The file
    is always TASK_ENV_FILE: the job's environment, which its user controls, cannot point it elsewhere."""
    import sys  # noqa: PLC0415 - the function is the program; the module stays import-light

    try:
        out, notes = run(env, wk.TASK_ENV_FILE, os.getuid())
    except BadInput as exc:
        print(f"slurmpod task-prolog: bad input: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"slurmpod task-prolog: {exc.strerror or exc} {exc.filename or ''}".rstrip(), file=sys.stderr)
        return 1
    for note in notes:
        print(note, file=sys.stderr)
    if out:
        sys.stdout.write("\n".join(out) + "\n")
    return 0
