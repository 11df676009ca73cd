"""`slurmpod daemon accounting-setup` (controller): the cluster, the spec's QoS and its accounts in slurmdbd.

Runs once per controller start, beside slurmctld, and is idempotent: it registers the cluster when
slurmdbd does not list it, adds each QoS of cluster.yaml's `accounting.qos` it lacks, then sets every
such QoS's priority, preempt list and preempt mode (a changed spec takes effect on the next start).
Then, QoS first because an association's QoS list may name them, it adds each account of
`accounting.accounts` this cluster lacks (parents first, as the spec lists them) and each user's
association with it, and sets the QoS of the associations that were there already. Nothing is ever
removed. `sacctmgr -i` answers no questions. It waits for slurmdbd as long as it takes; supervisord
restarts it if it fails. Ref: https://slurm.schedmd.com/sacctmgr.html, https://slurm.schedmd.com/qos.html,
https://slurm.schedmd.com/accounting.html
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from slurmpod import well_known as wk
from slurmpod.commands import LocalRunner, Result, Runner
from slurmpod.entrypoints import cluster_spec
from slurmpod.errors import SlurmpodError, TransientError
from slurmpod.timing import Clock, SystemClock

log = logging.getLogger(__name__)

SACCTMGR = "sacctmgr"
STEP_TIMEOUT_S = 30.0
WAIT_START_S = 1.0
WAIT_MAX_S = 10.0


def names(text: str) -> set[str]:
    """`sacctmgr -n -P show ... format=name` output -> the names (case kept; Slurm lowercases some)."""
    return {line.strip() for line in text.splitlines() if line.strip()}


def modify_argv(q: cluster_spec.QosSpec) -> tuple[str, ...]:
    """`sacctmgr -i modify qos where name=Q set ...`: only what the spec says is set."""
    sets = [f"priority={q.priority}"]
    if q.preempt:
        sets.append("preempt=" + ",".join(q.preempt))
    if q.preempt_mode is not None:
        sets.append(f"preemptmode={q.preempt_mode.lower()}")
    return (SACCTMGR, "-i", "modify", "qos", "where", f"name={q.name}", "set", *sets)


def associations(text: str) -> set[tuple[str, str]]:
    """`sacctmgr -n -P show associations ... format=account,user` output -> (account, user) pairs, lower
    case; the user is '' for an account's own association."""
    pairs = set()
    for line in text.splitlines():
        account, _, user = line.strip().partition("|")
        if account:
            pairs.add((account.lower(), user.strip().lower()))
    return pairs


def add_account_argv(cluster: str, a: cluster_spec.AccountSpec) -> tuple[str, ...]:
    """`sacctmgr -i add account A cluster=C [parent=P]` (no parent: under root)."""
    parent = () if a.parent == cluster_spec.ROOT_ACCOUNT else (f"parent={a.parent}",)
    return (SACCTMGR, "-i", "add", "account", a.name, f"cluster={cluster}", *parent)


def _qos_sets(a: cluster_spec.AccountSpec) -> tuple[str, ...]:
    sets = (f"qos={','.join(a.qos)}",) if a.qos else ()
    return sets + ((f"defaultqos={a.default_qos}",) if a.default_qos else ())


def add_user_argv(cluster: str, a: cluster_spec.AccountSpec, user: str) -> tuple[str, ...]:
    """`sacctmgr -i add user U account=A cluster=C [qos=...] [defaultqos=Q]`: the user's association."""
    return (SACCTMGR, "-i", "add", "user", user, f"account={a.name}", f"cluster={cluster}", *_qos_sets(a))


def modify_user_argv(cluster: str, a: cluster_spec.AccountSpec, user: str) -> tuple[str, ...] | None:
    """`sacctmgr -i modify user where ... set qos=... defaultqos=Q`, or None when the spec sets no QoS."""
    sets = _qos_sets(a)
    if not sets:
        return None
    return (SACCTMGR, "-i", "modify", "user", "where", f"name={user}", f"account={a.name}", f"cluster={cluster}",
            "set", *sets)


def _nothing_changed(result: Result) -> bool:
    # sacctmgr exits 1 with " Nothing modified" / "Nothing new added" when all is as asked already.
    text = (result.stdout + result.stderr).lower()
    return result.returncode == 1 and ("nothing modified" in text or "nothing new added" in text
                                       or "already exists" in text)


class Setup:
    def __init__(self, run: Runner, clock: Clock) -> None:
        self.run = run
        self.clock = clock

    def _must(self, argv: Sequence[str]) -> Result:
        result = self.run(argv, STEP_TIMEOUT_S)
        if result.returncode != 0 and not _nothing_changed(result):
            raise TransientError(result.brief())
        return result

    def _show(self, what: str) -> set[str]:
        fmt = "cluster" if what == "cluster" else "name"
        return names(self._must((SACCTMGR, "-n", "-P", "show", what, f"format={fmt}")).stdout)

    def wait_for_slurmdbd(self) -> set[str]:
        """The clusters slurmdbd knows, once it answers."""
        wait = WAIT_START_S
        while True:
            try:
                return self._show("cluster")
            except SlurmpodError as exc:
                log.info("waiting for slurmdbd", extra={"ctx": {"err": str(exc)[:200]}})
                self.clock.sleep(wait)
                wait = min(WAIT_MAX_S, wait * 2)

    def apply(self, spec: cluster_spec.ClusterSpec) -> list[str]:
        """What was done, for the log and the tests."""
        done: list[str] = []
        clusters = {c.lower() for c in self.wait_for_slurmdbd()}
        if spec.cluster_name.lower() not in clusters:
            self._must((SACCTMGR, "-i", "add", "cluster", spec.cluster_name))
            done.append(f"added cluster {spec.cluster_name}")
        have = {q.lower() for q in self._show("qos")}
        for q in spec.accounting.qos:
            if q.name.lower() not in have:
                self._must((SACCTMGR, "-i", "add", "qos", q.name))
                done.append(f"added qos {q.name}")
        for q in spec.accounting.qos:  # after every add: a preempt list names the others
            self._must(modify_argv(q))
            done.append(f"set qos {q.name}")
        if spec.accounting.accounts:
            done += self._accounts(spec.cluster_name, spec.accounting.accounts)
        return done

    def _accounts(self, cluster: str, accounts: Sequence[cluster_spec.AccountSpec]) -> list[str]:
        done: list[str] = []
        have = associations(self._must((SACCTMGR, "-n", "-P", "show", "associations", "where", f"cluster={cluster}",
                                        "format=account,user")).stdout)
        for a in accounts:  # the spec lists a parent before its children
            if (a.name, "") not in have:
                self._must(add_account_argv(cluster, a))
                done.append(f"added account {a.name}")
        for a in accounts:
            for user in a.users:
                if (a.name, user) not in have:
                    self._must(add_user_argv(cluster, a, user))
                    done.append(f"added user {user} to account {a.name}")
                elif (argv := modify_user_argv(cluster, a, user)) is not None:
                    self._must(argv)
                    done.append(f"set user {user} in account {a.name}")
        return done


def main(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    del args
    spec = cluster_spec.load(Path(env.get(wk.ENV_CLUSTER_SPEC, wk.CLUSTER_SPEC_FILE)))
    if not spec.accounting.enabled:
        log.info("accounting is off in the cluster spec; nothing to set up")
        return 0
    done = Setup(LocalRunner(), SystemClock()).apply(spec)
    log.info("accounting set up", extra={"ctx": {"cluster": spec.cluster_name, "done": "; ".join(done)}})
    return 0
