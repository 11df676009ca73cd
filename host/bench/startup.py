"""Pod start to IDLE (also with SSSD on, beside off; and claiming a placeholder, beside a start with none to
claim), and preStop to drained-and-requeued, each beside a baseline.

Both sides run in the same cluster, the same image and the same pod plan from deploy/; only the
container command differs. Trials alternate between the two so background noise hits both alike.
IDLE is observed by a loop inside the controller pod (sinfo every 10 ms) that records the time;
the host's clock and the pods' are the same kernel clock.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slurmpod import well_known as wk
from slurmpod.errors import TransientError
from slurmpod_host.bench.report import Figure, Report, median
from slurmpod_host.cluster import lifecycle, runtime

START_FLOOR_RATIO = 1.25  # floor: start-to-IDLE at most 1.25x a bare slurmd in the same run
START_ADDED_FLOOR_S = 0.25  # floor: the median seconds our start adds over bare, at most
PRESTOP_FLOOR_S = 5.0  # issue: preStop to drained-and-requeued at most 5 s
IDLE_TIMEOUT_S = 60

# The baseline: what a hand-written pod would do with the same image — install the key, start munged,
# exec a dynamic slurmd whose only --conf is the nodeset feature. No supervision, no rendering.
BARE_SLURMD = (
    f"install -o munge -g munge -m 0400 {wk.MUNGE_KEY_SECRET} /etc/munge/munge.key"
    " && install -d -o munge -g munge /run/munge /var/lib/munge /var/log/munge"
    " && runuser -u munge -- /usr/sbin/munged"
    " && exec /usr/sbin/slurmd -D -Z --conf-server $SLURMPOD_CONTROLLER:6817 --conf Features=workers"
)


def _sh(client: Any, pod: str, script: str, timeout_s: float = 30) -> runtime.ExecResult:
    return runtime.exec_in(client, pod, ["bash", "-c", script], timeout_s=timeout_s)


def _time_to_idle(client: Any, cluster: str, controller: str, ordinal: int, patch: lifecycle.PodPatch, *,
                  prepare: Callable[[str], None] | None = None) -> float:
    """``prepare(node)``: run before the pod starts, outside the time measured."""
    plan = lifecycle.plan_pod(client, cluster, "worker", ordinal, patch)
    node, mark = plan.name, f"/tmp/bench-idle-{plan.name}"
    if prepare is not None:
        prepare(node)
    watch = (f"rm -f {mark}; until sinfo -h -n {node} -t idle -o %n 2>/dev/null | grep -qx {node}; "
             f"do sleep 0.01; done; date +%s.%N > {mark}")
    ex = client.api.exec_create(controller, ["timeout", str(IDLE_TIMEOUT_S), "bash", "-c", watch])
    client.api.exec_start(ex["Id"], detach=True)
    time.sleep(0.2)  # the watcher is polling before the pod exists
    started = time.time()
    lifecycle.start_pod(client, cluster, plan)
    deadline = time.monotonic() + IDLE_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            done = _sh(client, controller, f"cat {mark} 2>/dev/null")
            if done.code == 0 and done.stdout.strip():
                return float(done.stdout.strip()) - started
            time.sleep(0.25)
        raise TransientError(f"{node} not IDLE after {IDLE_TIMEOUT_S} s")
    finally:
        lifecycle.delete_pod(client, cluster, node, run_prestop=False, grace_s=5)
        _sh(client, controller, f"scontrol delete nodename={node} || true")


def start_to_idle(report: Report, client: Any, cluster: str, controller: str, trials: int = 5) -> None:
    ours: list[float] = []
    bare: list[float] = []
    bare_patch = lifecycle.PodPatch(command=("bash",), args=("-c", BARE_SLURMD))
    for i in range(trials):
        ours.append(_time_to_idle(client, cluster, controller, 20 + 2 * i, lifecycle.PodPatch()))
        bare.append(_time_to_idle(client, cluster, controller, 21 + 2 * i, bare_patch))
    value, base = median(ours), median(bare)
    report.add(Figure(f"worker pod start to IDLE (median of {trials})", "s", value, base,
                      "bare slurmd -Z + munged, same image", f"<= {START_FLOOR_RATIO}x baseline",
                      value <= START_FLOOR_RATIO * base, tuple(ours), tuple(bare)))
    # Paired by trial (they alternate), so background noise of one moment hits both sides alike.
    added = [o - b for o, b in zip(ours, bare, strict=True)]
    report.add(Figure(f"seconds our start adds over bare (median of {trials} paired trials)", "s",
                      median(added), None, "the bare start of the same trial", f"<= {START_ADDED_FLOOR_S} s",
                      median(added) <= START_ADDED_FLOOR_S, tuple(added), ()))


# SSSD on a worker: a minimal site sssd.conf on the shared /home (root's, 0600, as pod start requires),
# named by the env twin of the Secret's path. Its directory refuses connections at once, so SSSD starts
# offline; its start never waits for the directory (sssd.conf(5): offline mode), so what the figure adds
# is SSSD's own start and pod start's wait for its nss socket.
SSSD_CONF = "/home/.slurmpod-bench/sssd.conf"
SSSD_CONF_TEXT = """[sssd]
services = nss, ssh
domains = bench

[domain/bench]
id_provider = ldap
auth_provider = none
ldap_uri = ldap://127.0.0.1
ldap_search_base = dc=example,dc=org
"""


@dataclass(frozen=True, slots=True)
class _PairNames:
    """The figures of a worker start with something on, beside the same start without it."""

    on: str  # start to IDLE with it on; "(median of N)" is added
    off: str  # the baseline: the same start without it
    added: str  # the seconds it adds; "(median of N paired trials)" is added
    added_baseline: str


def _start_pair(report: Report, client: Any, cluster: str, controller: str, *, trials: int, first_ordinal: int,
                on_patch: lifecycle.PodPatch, names: _PairNames,
                prepare: Callable[[str], None] | None = None) -> None:
    """Starts with ``on_patch`` (``prepare`` before each) and without, alternating, paired per trial."""
    on: list[float] = []
    off: list[float] = []
    for i in range(trials):
        on.append(_time_to_idle(client, cluster, controller, first_ordinal + 2 * i, on_patch, prepare=prepare))
        off.append(_time_to_idle(client, cluster, controller, first_ordinal + 1 + 2 * i, lifecycle.PodPatch()))
    report.add(Figure(f"{names.on} (median of {trials})", "s", median(on), median(off), names.off, "", None,
                      tuple(on), tuple(off)))
    added = [a - b for a, b in zip(on, off, strict=True)]
    report.add(Figure(f"{names.added} (median of {trials} paired trials)", "s", median(added), None,
                      names.added_baseline, "", None, tuple(added), ()))


def sssd_start_to_idle(report: Report, client: Any, cluster: str, *, controller: str, login: str,
                       trials: int = 5) -> None:
    """Worker start to IDLE with SSSD on beside the same start with it off, alternating, paired per trial."""
    made = _sh(client, login, f"install -d -m 0700 {SSSD_CONF.rsplit('/', 1)[0]} && umask 077 && "
                              f"printf '%s' {shlex.quote(SSSD_CONF_TEXT)} > {SSSD_CONF}")
    if made.code != 0:
        raise TransientError(f"writing {SSSD_CONF}: {made.stderr.strip()}")
    _start_pair(report, client, cluster, controller, trials=trials, first_ordinal=40,
                on_patch=lifecycle.PodPatch(env={"SLURMPOD_SSSD_CONF_FILE": SSSD_CONF}),
                names=_PairNames("worker pod start to IDLE with SSSD on", "the same start with SSSD off",
                                 "seconds SSSD adds to a worker's start", "the SSSD-off start of the same trial"))


def claim_start_to_idle(report: Report, client: Any, cluster: str, controller: str, trials: int = 5) -> None:
    """Worker start to IDLE on a nodeset of slurmpod's autoscaler (SLURMPOD_CLAIM_PLACEHOLDER=true, a FUTURE
    placeholder of the pod's name that the claim deletes before slurmd starts), beside the same start on
    any other nodeset (no claim, no placeholder), alternating, paired per trial."""

    def placeholder(node: str) -> None:
        made = _sh(client, controller, f"scontrol create NodeName={node} State=FUTURE CPUs=1 RealMemory=1 "
                                       "Features=workers")
        if made.code != 0:
            raise TransientError(f"placeholder {node}: {made.stderr.strip()}")

    _start_pair(report, client, cluster, controller, trials=trials, first_ordinal=60,
                on_patch=lifecycle.PodPatch(env={wk.ENV_CLAIM_PLACEHOLDER: "true"}), prepare=placeholder,
                names=_PairNames("worker pod start to IDLE claiming its placeholder",
                                 "the same start with no placeholder and no claim",
                                 "seconds the claim adds to a worker's start",
                                 "the start without it in the same trial"))


def _running_job(client: Any, login: str, worker: str) -> int:
    sub = runtime.exec_in(client, login, ["sbatch", "--parsable", "--requeue", "-w", worker, "-o", "/dev/null",
                                          "--wrap", "sleep 600"], timeout_s=30, user=wk.DEMO_USER,
                          workdir=f"/home/{wk.DEMO_USER}")
    if sub.code != 0:
        raise TransientError(f"sbatch failed: {sub.stderr.strip()}")
    job = int(sub.stdout.strip().split(";")[0])
    for _ in range(200):
        st = runtime.exec_in(client, login, ["squeue", "-h", "-j", str(job), "-o", "%T %N"], timeout_s=10)
        if st.stdout.split()[:2] == ["RUNNING", worker]:
            return job
        time.sleep(0.1)
    raise TransientError(f"job {job} did not start on {worker}")


def _drained_and_requeued(client: Any, controller: str, worker: str, job: int) -> bool:
    """The node takes no new work (drained, or already deleted by our hook) and the job left it."""
    node = _sh(client, controller, f"sinfo -h -n {worker} -o %T").stdout.split()
    job_state = _sh(client, controller, f"squeue -h -j {job} -o '%T %N'").stdout.split()
    node_ok = not node or node[0].startswith("drain")
    job_ok = bool(job_state) and not (job_state[0] == "RUNNING" and worker in job_state[1:])
    return node_ok and job_ok


def prestop(report: Report, client: Any, cluster: str, *, controller: str, login: str, workers: list[str]) -> None:
    """Our preStop hook vs the same two scontrol calls typed by hand, each with a running batch job."""
    ours_w, bare_w = workers[0], workers[1]
    job = _running_job(client, login, ours_w)
    started = time.monotonic()
    hook = runtime.exec_in(client, ours_w, ["slurmpod", "prestop"], timeout_s=60)
    ours = time.monotonic() - started
    ok = hook.code == 0 and _drained_and_requeued(client, controller, ours_w, job)
    _sh(client, controller, f"scancel {job}")

    job2 = _running_job(client, login, bare_w)
    started = time.monotonic()
    _sh(client, controller, f"scontrol update nodename={bare_w} state=drain reason=bench && scontrol requeue {job2}")
    while not _drained_and_requeued(client, controller, bare_w, job2) and time.monotonic() - started < 60:
        time.sleep(0.05)
    bare = time.monotonic() - started
    _sh(client, controller, f"scancel {job2}; scontrol update nodename={bare_w} state=resume")
    report.add(Figure("preStop hook: drain + requeue + job gone + slurmd stopped", "s", ours, bare,
                      "scontrol drain + requeue by hand", f"<= {PRESTOP_FLOOR_S:.0f} s",
                      ok and ours <= PRESTOP_FLOOR_S))
    lifecycle.replace_pod(client, cluster, ours_w, run_prestop=False)
