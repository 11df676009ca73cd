"""`slurmpod daemon accounting-setup` (controller): the cluster and the spec's QoS in slurmdbd.

Runs once per controller start, beside slurmctld, and is idempotent: it registers the cluster when
slurmdbd does not list it, adds each QoS of cluster.yaml's `accounting.qos` it lacks, then sets every
such QoS's priority, preempt list and preempt mode (a changed spec takes effect on the next start).
`sacctmgr -i` answers no questions. It waits for slurmdbd as long as it takes; supervisord restarts it
if it fails. Ref: https://slurm.schedmd.com/sacctmgr.html, https://slurm.schedmd.com/qos.html
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
