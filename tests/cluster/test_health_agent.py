"""The health agent on real workers: a job's prolog and epilog run in it; with it gone (a stale socket,
as a killed agent leaves) the hooks run the checks themselves at once, and supervisord starts a killed
one again; and an XID raised between two jobs fails the next prolog with the agent on, and is missed
with it off, because the driver (and the fake NVML) gives an XID only to the event sets registered
when it is raised.

Every wait is bounded by a worst case printed with what was measured.
"""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator

import healthkit
import pytest
from clusterkit import Session, job, node, restore_pod, wait_for, wait_idle
from fakes import gpu_libs
from healthkit import FAKE_STATE_DIR, drained_with

from slurmpod import well_known as wk

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

CTL = f"{wk.SUPERVISORCTL} -c {wk.RUN_DIR}/{wk.SUPERVISORD_CONF}"
# supervisord restarts an exited program at once (autorestart); the agent then starts Python and opens
# NVML before its socket exists. Ref: http://supervisord.org/configuration.html#program-x-section-values
RESTART_WORST_S = 30.0
JOB_S = 60.0  # one `true` job, its prolog and epilog, on an idle node
LOG_WORST_S = 15.0  # an agent's log line reaching the container's log after the job ended
GPUS = 8
HEALTHY = f"gpus={GPUS}\nnvlinks=4\nname=NVIDIA A100-SXM4-80GB\naffinity=online\n"
XID_REASON = "slurmpod: xid: "  # then the remediation, then "XID 79 (GPU has fallen off the bus) on GPU 1"


def _status(s: Session, pod: str) -> tuple[str, int | None]:
    """(state, pid) of the pod's health-agent program as supervisorctl reports it."""
    out = s.root_in(pod, "sh", "-c", f"{CTL} status health-agent").stdout.split()
    state = out[1] if len(out) > 1 else "?"
    pid = int(out[3].rstrip(",")) if state == "RUNNING" and len(out) > 3 else None
    return state, pid


def _logs(s: Session, pod: str, since: float) -> str:
    return s.client.containers.get(pod).logs(since=int(since) - 1).decode("utf-8", "replace")


def _job(s: Session, worker: str) -> int:
    """A `true` batch job on ``worker``, waited for; its id."""
    done = s.as_researcher("sbatch", "--parsable", "--wait", "-w", worker, "-o", "/dev/null", "--wrap", "true",
                           timeout=JOB_S)
    assert done.code == 0, f"{done.stdout}{done.stderr}"
    return int(done.stdout.strip().split(";")[0])


def _served(s: Session, worker: str, job_id: int, since: float) -> float:
    """Seconds until the agent's log shows the job's prolog and epilog, both exit 0."""
    lines = (f"hook=prolog job={job_id} exit=0", f"hook=epilog job={job_id} exit=0")
    return wait_for(f"agent ran the hooks of job {job_id}",
                    lambda: all(x in _logs(s, worker, since) for x in lines) or None, LOG_WORST_S)[1]


@pytest.mark.smoke
def test_a_jobs_prolog_and_epilog_run_in_the_health_agent(session: Session) -> None:
    worker = session.cluster.workers[0]
    wait_idle(session, worker)
    # A worker an earlier test replaced can be idle in Slurm while supervisord still counts the agent's
    # startsecs (STARTING); a crashing agent never leaves STARTING/BACKOFF and fails this wait.
    wait_for("health-agent RUNNING", lambda: _status(session, worker)[0] == "RUNNING" or None, RESTART_WORST_S)
    since = time.time()
    job_id = _job(session, worker)
    waited = _served(session, worker, job_id, since)
    print(f"agent's lines for job {job_id} seen {waited:.1f}s after it ended (bound {LOG_WORST_S:.0f}s)")
    wait_idle(session, worker)


SCRAPE_S = 10.0  # one GET of a few kB, answered from memory


@pytest.mark.smoke
def test_the_agents_metrics_are_scraped_live_from_outside_the_pods(session: Session) -> None:
    """What Prometheus does, from the Docker host, which no pod's egress policy governs (the suite's
    clusters enforce the chart's NetworkPolicies, and no slurmpod pod is a scraper): GET /metrics on the
    worker pod's IP, after a job."""
    worker = session.cluster.workers[0]
    wait_idle(session, worker)
    wait_for("health-agent RUNNING", lambda: _status(session, worker)[0] == "RUNNING" or None, RESTART_WORST_S)
    since = time.time()
    _served(session, worker, _job(session, worker), since)
    nets = session.client.containers.get(worker).attrs["NetworkSettings"]["Networks"]
    url = f"http://{next(iter(nets.values()))['IPAddress']}:{wk.HEALTH_AGENT_METRICS_PORT}/metrics"
    with urllib.request.urlopen(url, timeout=SCRAPE_S) as resp:
        lines = resp.read().decode().splitlines()
    assert 'slurmpod_health_check_status{check="disk",context="prolog"} 0.0' in lines, lines[-50:]
    assert 'slurmpod_health_check_status{check="gpu-memory",context="epilog"} 0.0' in lines
    ok_at = [ln for ln in lines
             if ln.startswith('slurmpod_health_check_last_success_timestamp_seconds{check="disk",context="prolog"}')]
    assert ok_at and float(ok_at[0].split()[-1]) >= since - 1, ok_at
    assert any(ln.startswith('slurmpod_health_agent_hooks_total{exit_code="0",hook="prolog"}') for ln in lines)


@pytest.mark.smoke
def test_without_the_agent_the_hooks_run_the_checks_and_a_killed_agent_is_started_again(session: Session) -> None:
    worker = session.cluster.workers[0]
    wait_idle(session, worker)
    metrics = healthkit.METRICS["prolog"]
    stale = ("import socket; s = socket.socket(socket.AF_UNIX); "
             f"s.bind('{wk.HEALTH_AGENT_SOCKET}'); s.close()")  # what a killed agent leaves: nothing listens
    assert session.root_in(worker, "sh", "-c", f"{CTL} stop health-agent").code == 0
    try:
        assert session.root_in(worker, f"{wk.VENV_DIR}/bin/python", "-c", stale).code == 0
        since = time.time()
        job_id = _job(session, worker)  # the prolog ran here: it must have, the job completed
        logs = _logs(session, worker, since)
        assert f"job={job_id}" not in logs, logs[-2000:]
        written = int(session.root_in(worker, "stat", "-c", "%Y", metrics).stdout.strip())
        assert written >= int(since), "the prolog that ran in the agent's place wrote no metrics"
        wait_idle(session, worker)
    finally:
        assert session.root_in(worker, "sh", "-c", f"{CTL} start health-agent").code == 0
    _, pid = _status(session, worker)
    assert pid is not None
    killed_at = time.monotonic()
    assert session.root_in(worker, "kill", "-9", str(pid)).code == 0

    def restarted() -> int | None:
        state, new = _status(session, worker)
        up = session.root_in(worker, "test", "-S", wk.HEALTH_AGENT_SOCKET).code == 0
        return new if state == "RUNNING" and new != pid and up else None

    new_pid, waited = wait_for("health-agent restarted by supervisord", restarted, RESTART_WORST_S)
    print(f"agent pid {pid} killed, pid {new_pid} listening {waited:.1f}s later (bound {RESTART_WORST_S:.0f}s)")
    assert time.monotonic() - killed_at < RESTART_WORST_S
    since = time.time()
    _served(session, worker, _job(session, worker), since)


@pytest.fixture
def fake_gpu_worker(session: Session, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The first worker on 8 fake GPUs, its kernel log an empty file on /home (an XID reaches it only
    through NVML), and the second worker drained so the requeued job has nowhere to go."""
    worker, other = session.cluster.workers[0], session.cluster.workers[1]
    kmsg = f"{FAKE_STATE_DIR}/{worker}.kmsg"
    with healthkit.fakes_installed(session, tmp_path_factory.mktemp("fakegpu")):
        healthkit.write_file(session, session.cluster.login, kmsg, "")
        healthkit.write_file(session, session.cluster.login, f"{FAKE_STATE_DIR}/{worker}", HEALTHY)
        healthkit.replace_worker(session, worker, healthkit.fake_gpu_patch())
        try:
            wait_idle(session, worker)
            n = node(session, worker)
            assert n is not None and healthkit.gpu_count(n.gres) == GPUS, n
            doc = healthkit.health_config(session, worker)
            healthkit.write_health_config(session, worker, {**doc, "expected_gpus": GPUS, "kernel_log": kmsg,
                                                            "thresholds": {"allreduce_busbw_min_gbps": 100}})
            healthkit.drain_as_admin(session, other, "test: jobs stay on the fake-GPU worker")
            yield worker
        finally:
            healthkit.resume(session, other)
            healthkit.resume(session, worker)
            restore_pod(session, worker)  # a new container: the latched XID goes with the old one


def _raise_xid(s: Session, worker: str, gpu: int, code: int) -> None:
    """XID ``code`` on ``gpu`` now, as an NVML event only (nothing in the kernel log)."""
    seq = time.time_ns() // 1000
    healthkit.write_file(s, s.cluster.login, f"{FAKE_STATE_DIR}/{worker}", HEALTHY + gpu_libs.xid_line(gpu, code, seq))


def test_an_xid_between_jobs_fails_the_next_prolog_with_the_agent_and_is_missed_without(
        session: Session, fake_gpu_worker: str) -> None:
    worker = fake_gpu_worker
    _job(session, worker)
    # Agent off: the prolog registers an event set of its own, after the XID; it cannot see it.
    assert session.root_in(worker, "sh", "-c", f"{CTL} stop health-agent").code == 0
    _raise_xid(session, worker, 1, 79)
    try:
        _job(session, worker)
        n = node(session, worker)
        assert n is not None and not n.drained, f"the agent-less prolog saw an XID it cannot have: {n}"
    finally:
        assert session.root_in(worker, "sh", "-c", f"{CTL} start health-agent").code == 0
    wait_for("agent listening", lambda: session.root_in(worker, "test", "-S", wk.HEALTH_AGENT_SOCKET).code == 0
             or None, RESTART_WORST_S)
    # Agent on: its set, registered at its start, holds the next XID until the next job's prolog.
    _job(session, worker)
    _raise_xid(session, worker, 1, 79)
    held = session.as_researcher("sbatch", "--parsable", "-w", worker, "-o", "/dev/null", "--wrap", "true")
    assert held.code == 0, held.stderr
    job_id = int(held.stdout.strip().split(";")[0])
    try:
        drained, waited = wait_for(f"{worker} drained for the XID",
                                   lambda: drained_with(session, worker, XID_REASON), healthkit.DRAIN_WORST_S)
        print(f"drained {waited:.1f}s after the job was submitted (bound {healthkit.DRAIN_WORST_S:.0f}s): "
              f"{drained.reason}")
        assert "XID 79 (GPU has fallen off the bus) on GPU 1" in drained.reason, drained
    finally:
        assert session.root_in(session.cluster.controller, "scancel", str(job_id)).code == 0
        wait_for(f"job {job_id} ended", lambda: job(session, job_id).state in healthkit.FINAL or None,
                 healthkit.JOB_WORST_S)


NVLINK_REASON = "slurmpod: nvlink: "


def test_slurmds_prep_plugin_asks_the_agent_and_a_job_still_skips_a_check_by_its_comment(
        session: Session, fake_gpu_worker: str) -> None:
    """slurmd runs the Prolog and Epilog through slurmpod's PrEp plugin, which cannot read a job's comment
    (it is in the job credential only): the agent looks it up once a check the job may skip has failed.
    A job that skips nvlink ends with its node in service; the next job, which does not, drains it."""
    worker = fake_gpu_worker
    config = session.root_in(session.cluster.controller, "scontrol", "show", "config").stdout
    assert re.search(rf"^PrEpPlugins\s*=\s*(prep/)?{wk.PREP_PLUGIN}\s*$", config, re.M), config
    healthkit.write_file(session, session.cluster.login, f"{FAKE_STATE_DIR}/{worker}",
                         HEALTHY + "gpu.5.nvlink.2.down=1\n")  # nvlink runs in the epilog, and may be skipped
    since = time.time()
    done = session.as_researcher("sbatch", "--parsable", "--wait", "-w", worker, "-o", "/dev/null",
                                 "--comment", "sweep 4 slurmpod:skip=nvlink", "--wrap", "true", timeout=JOB_S)
    assert done.code == 0, f"{done.stdout}{done.stderr}"
    skipped = int(done.stdout.strip().split(";")[0])
    _served(session, worker, skipped, since)
    n = node(session, worker)
    assert n is not None and not n.drained, f"the job's skip list did not reach its epilog: {n}"
    held = session.as_researcher("sbatch", "--parsable", "-w", worker, "-o", "/dev/null", "--wrap", "true")
    assert held.code == 0, held.stderr
    drained, waited = wait_for(f"{worker} drained for nvlink", lambda: drained_with(session, worker, NVLINK_REASON),
                               healthkit.DRAIN_WORST_S)
    print(f"drained {waited:.1f}s after the second job was submitted (bound {healthkit.DRAIN_WORST_S:.0f}s): "
          f"{drained.reason}")
    assert "GPU 5 link 2 down" in drained.reason, drained
