"""The Python side of job_submit_slurmpod.so: job_desc values in, Slurm-encoded changes out.

The C shim copies the job_desc fields into plain numbers and strings and calls `PluginRuntime.decide`;
this module turns Slurm's sentinels into None, resolves the user's name and groups, runs `decide.decide`
with the current policy (re-read when the file changes: one stat() per call) and encodes the answer
back into job_desc values. It never raises into the shim: every failure is a Decision.
"""

from __future__ import annotations

import concurrent.futures
import grp
import os
import pwd
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurmpod.errors import BadInput
from slurmpod.policy import decide, loader
from slurmpod.policy.decision import REJECT_PREFIX, Decision, Refusal, Verdict
from slurmpod.policy.model import FailMode, Policy
from slurmpod.policy.outcome import Rule
from slurmpod.policy.request import JobRequest, Sharing

# Ref: https://github.com/SchedMD/slurm/blob/master/slurm/slurm.h (#define NO_VAL, NO_VAL16, JOB_SHARED_*)
NO_VAL = 0xFFFFFFFE
NO_VAL16 = 0xFFFE
SHARED_CODES = {Sharing.EXCLUSIVE: 0, Sharing.OVERSUBSCRIBE: 1, Sharing.USER: 2, Sharing.MCS: 3, Sharing.TOPO: 4}
SHARING_OF = {code: sharing for sharing, code in SHARED_CODES.items()}
IDENTITY_TTL_S = 300.0
# job_submit runs under slurmctld's job write lock: a user and group lookup (NSS: LDAP, sssd) may take no
# longer than this, and at most IDENTITY_MAX callers are remembered (a full cache starts again).
# Ref: https://slurm.schedmd.com/job_submit_plugins.html
IDENTITY_DEADLINE_S = 2.0
IDENTITY_MAX = 4096

Desc = Mapping[str, "int | str | None"]


def _num(value: int | str | None, unset: int) -> int | None:
    return value if isinstance(value, int) and value != unset else None


def _str(value: int | str | None) -> str | None:
    return value if isinstance(value, str) and value else None


# AccountingStorageEnforce values under which slurmctld refuses a job whose --account has no association
# for its user (limits, qos and safe imply associations). Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_AccountingStorageEnforce
ENFORCES_ACCOUNTS = frozenset({"associations", "limits", "qos", "safe"})


def accounts_enforced_in(conf_text: str) -> bool:
    """Whether a slurm.conf (the one slurmctld runs with) has Slurm check --account: its last
    AccountingStorageEnforce= names associations or a value that implies them."""
    enforce = ""
    for line in conf_text.splitlines():
        key, sep, value = line.split("#", 1)[0].partition("=")
        if sep and key.strip().lower() == "accountingstorageenforce":
            enforce = value.strip().lower()
    return bool(ENFORCES_ACCOUNTS.intersection(v.strip() for v in enforce.split(",")))


def accounts_enforced(slurm_conf: Path) -> bool:
    """As accounts_enforced_in, for the file; an unreadable slurm.conf enforces nothing."""
    try:
        return accounts_enforced_in(slurm_conf.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return False


class IdentityUnavailable(Exception):
    """The caller's name and groups could not be looked up within IDENTITY_DEADLINE_S."""


def request_from_desc(desc: Desc, user: str, groups: tuple[str, ...]) -> JobRequest:
    """job_desc values as the shim copied them (32- and 16-bit numbers with NO_VAL sentinels); user_id is
    the caller's uid (the shim's submit_uid), and ``user`` and ``groups`` were looked up from it."""
    requeue = _num(desc.get("requeue"), NO_VAL16)
    shared = _num(desc.get("shared"), NO_VAL16)
    return JobRequest(
        uid=int(desc.get("user_id") or 0), user=user, gid=int(desc.get("group_id") or 0), groups=groups,
        account=_str(desc.get("account")), partition=_str(desc.get("partition")), qos=_str(desc.get("qos")),
        min_nodes=_num(desc.get("min_nodes"), NO_VAL), max_nodes=_num(desc.get("max_nodes"), NO_VAL),
        num_tasks=_num(desc.get("num_tasks"), NO_VAL), tres_per_node=_str(desc.get("tres_per_node")),
        tres_per_job=_str(desc.get("tres_per_job")), tres_per_task=_str(desc.get("tres_per_task")),
        tres_per_socket=_str(desc.get("tres_per_socket")), features=_str(desc.get("features")),
        time_limit=_num(desc.get("time_limit"), NO_VAL), req_switch=_num(desc.get("req_switch"), NO_VAL),
        wait4switch=_num(desc.get("wait4switch"), NO_VAL),
        segment_size=_num(desc.get("segment_size"), NO_VAL16) or None,
        sharing=SHARING_OF.get(shared, Sharing.UNSET) if shared is not None else Sharing.UNSET,
        requeue=None if requeue is None else bool(requeue), comment=_str(desc.get("comment")),
        warn_signal=_num(desc.get("warn_signal"), NO_VAL16) or None,
        warn_time=_num(desc.get("warn_time"), NO_VAL16) or None,
        warn_flags=_num(desc.get("warn_flags"), NO_VAL16) or 0, name=_str(desc.get("name")),
        job_id=_num(desc.get("job_id"), NO_VAL) or None, is_modify=bool(desc.get("is_modify")),
        moves_tier=bool(desc.get("moves_tier")),
    )


def encode(decision: Decision) -> dict[str, int | str]:
    """The job_desc values to write back: only what the Decision sets, in Slurm's encoding."""
    out: dict[str, int | str] = {}
    for key, value in decision.changes.as_dict().items():
        if key == "sharing":
            out["shared"] = SHARED_CODES[Sharing(value)]
        elif isinstance(value, bool):
            out[key] = int(value)
        else:
            out[key] = value
    return out


def escaped(text: str) -> str:
    """``text`` with every character outside printable ASCII written as \\xNN / \\uNNNN: a value the user
    chose (a partition holding a newline) can never start a line of its own in slurmctld's log. Printable
    ASCII is kept as it is, as the C fast path writes it."""
    return "".join(c if " " <= c <= "~" else ascii(c)[1:-1] for c in text)


def log_line(req: JobRequest, decision: Decision) -> str:
    """One line per decision for slurmctld's log: job, user, verdict, rules, message (values escaped)."""
    job = req.job_id if req.job_id is not None else "new"
    rules = ",".join(decision.rules) or "-"
    what = "modify" if req.is_modify else "submit"
    return (f"{what} job={job} user={escaped(req.user) or req.uid} partition={escaped(req.partition or '-')} "
            f"verdict={decision.verdict.value} rules={rules} message={decision.message!r}")


@dataclass(frozen=True, slots=True)
class Loaded:
    """The policy file as last read: its stat key, and the policy or why it is unusable."""

    key: tuple[int, int, int]  # (st_ino, st_mtime_ns, st_size): a ConfigMap update swaps the file
    policy: Policy | None
    error: str | None
    fail_mode: FailMode


class PluginRuntime:
    """One per slurmctld: the current policy (reloaded when its file changes) and the identity cache."""

    def __init__(self, path: Path, identity: Callable[[int], tuple[str, tuple[str, ...]]] | None = None,
                 clock: Callable[[], float] = time.monotonic, deadline_s: float = IDENTITY_DEADLINE_S,
                 slurm_conf: Path | None = None) -> None:
        self.path = path
        self.slurm_conf = slurm_conf  # None: judge as if accounts were enforced (tests, `policy check`)
        self._identity = identity or system_identity
        self._clock = clock
        self._deadline_s = deadline_s
        self._lock = threading.Lock()
        self._loaded = Loaded((-1, -1, -1), None, "not loaded yet", FailMode.CLOSED)
        self._ids: dict[int, tuple[float, str, tuple[str, ...]]] = {}
        self._ids_lock = threading.Lock()
        self._pending: dict[int, concurrent.futures.Future[tuple[str, tuple[str, ...]]]] = {}
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    def current(self) -> Loaded:
        try:
            st = os.stat(self.path)
            key = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError as exc:
            key = (-2, -2, -2)
            if self._loaded.key != key:
                with self._lock:
                    self._loaded = Loaded(key, None, f"cannot read {self.path}: {exc.strerror}", FailMode.CLOSED)
            return self._loaded
        if key != self._loaded.key:
            with self._lock:
                if key != self._loaded.key:
                    enforced = self.slurm_conf is None or accounts_enforced(self.slurm_conf)
                    self._loaded = _load(self.path, key, enforced)
        return self._loaded

    def decide(self, desc: Desc, loaded: Loaded | None = None) -> tuple[Decision, JobRequest | None]:
        """The decision for one job_desc, under ``loaded`` (the policy as it is now, when not given)."""
        loaded = loaded or self.current()
        try:
            uid = int(desc.get("user_id") or 0)
            user, groups = self.identity(uid)
            req = request_from_desc(desc, user, groups)
        except IdentityUnavailable as exc:
            return Decision.reject(f"{REJECT_PREFIX}{exc}; try again", (Rule.IDENTITY.value,), Refusal.ACCESS), None
        except Exception as exc:  # a job_desc we cannot read: the policy cannot judge it
            return decide.failed(loaded.fail_mode, f"cannot read the job: {type(exc).__name__}: {exc}"), None
        if loaded.policy is None:
            return decide.failed(loaded.fail_mode, f"invalid policy: {loaded.error}"), req
        return decide.decide(loaded.policy, req), req

    def identity(self, uid: int) -> tuple[str, tuple[str, ...]]:
        """The caller's name and groups: cached for IDENTITY_TTL_S, looked up in a thread of its own and
        waited for at most the deadline (IdentityUnavailable then; the lookup goes on and fills the cache)."""
        now = self._clock()
        hit = self._ids.get(uid)
        if hit is not None and now - hit[0] < IDENTITY_TTL_S:
            return hit[1], hit[2]
        with self._ids_lock:
            future = self._pending.get(uid)
            if future is None:
                if self._pool is None:
                    self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="slurmpod-nss")
                future = self._pending[uid] = self._pool.submit(self._identity, uid)
        try:
            user, groups = future.result(timeout=self._deadline_s)
        except concurrent.futures.TimeoutError:
            raise IdentityUnavailable(f"the user and groups of uid {uid} could not be looked up within "
                                      f"{self._deadline_s:g} s") from None
        with self._ids_lock:
            if self._pending.get(uid) is future:
                del self._pending[uid]
                if len(self._ids) >= IDENTITY_MAX:
                    self._ids = {}
                self._ids[uid] = (self._clock(), user, groups)
        return user, groups


def _load(path: Path, key: tuple[int, int, int], accounts_enforced: bool) -> Loaded:
    try:
        return Loaded(key, loader.load(path, accounts_enforced), None, FailMode.CLOSED)
    except BadInput as exc:
        return Loaded(key, None, str(exc), _fail_mode_of(path))
    except OSError as exc:
        return Loaded(key, None, f"cannot read {path}: {exc.strerror}", FailMode.CLOSED)
    except Exception as exc:  # never into slurmctld: a loader bug is an unusable policy (fail-closed)
        return Loaded(key, None, f"{type(exc).__name__}: {exc}", FailMode.CLOSED)


def _fail_mode_of(path: Path) -> FailMode:
    try:
        import yaml  # noqa: PLC0415 - only on the error path

        raw: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except Exception:  # the YAML itself is broken: it cannot ask for fail-open
        return FailMode.CLOSED
    return loader.fail_mode_of(raw)


def system_identity(uid: int) -> tuple[str, tuple[str, ...]]:
    """The user's name and the names of their groups (primary included), from NSS, what slurmctld itself
    sees: from the uid alone, never from a gid the job names."""
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        return str(uid), ()
    user = entry.pw_name
    names = []
    for g in os.getgrouplist(user, entry.pw_gid):
        try:
            names.append(grp.getgrgid(g).gr_name)
        except KeyError:
            names.append(str(g))
    return user, tuple(sorted(set(names)))


VERDICT_CODES = {Verdict.ACCEPT: 0, Verdict.MODIFY: 1, Verdict.REJECT: 2}
