"""`slurmpod daemon health-agent`: the worker's resident health agent, under supervisord beside slurmd.

- NVML is opened once, at start, through the same adapter the hooks use (slurmpod.nvml), and held for
  the agent's lifetime; every run reads the GPUs afresh over that session. Opening again is tried only
  after an NVML error (a driver not loaded yet): never after a hang (the library may hold its lock) or
  where there is no library (no GPUs).
- The periodic checks run on the agent's own schedule (``interval_s``); each check's latest verdict is
  kept with its time (state.Latest).
- A request is answered with the verdicts of the checks the hook's own plan names (the same registry,
  config, job opt-outs and recheck): a periodic request reuses verdicts at most ``max_age_s`` old and
  runs the rest; a prolog or epilog request runs its checks now, for its job. One run at a time (the
  checks share the state dir); a request that cannot start one within its deadline is refused.
- A hook request runs the whole hook here (hooks.run_hook: scratch tidy, checks, drain or undrain,
  metrics) with the client's SLURM* environment over the agent's own, and answers its exit code and
  stderr: the thin client (images/files/slurmpod_hook.c) costs a job no Python start. It has the
  whole of what the client waits, less a margin, and otherwise the hook's own deadline.
- One XID event set is registered at start and drained by every run, so an XID raised between jobs
  reaches the next run (a set made per run sees only those raised while it runs). The jobs a prolog
  was run for, until their epilog, say which job an XID on their GPUs happened under.
- A session in which an NVML call hung makes no further call (slurmpod.nvml), and only a new process
  can open NVML again: once the run that met the hang has answered, the agent exits and supervisord
  starts it afresh (the hooks run the checks themselves meanwhile). One whose nvmlInit hung stays up,
  answering that NVML hangs, and exits to try again after HUNG_RETRY_S.
- What the runs saw is served live to Prometheus (agent/exporter.py) on ``metrics_port``: the textfile
  series, when each check last passed, and the hooks answered by exit code.
- A check that does not return within its timeout (a call stuck in the driver) is "unknown"; its
  thread is abandoned, the run goes on, and the socket keeps answering. The hook decides what an unknown
  means, as it decides everything else (runner.resolve, actions.act).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from slurmpod import nvml
from slurmpod import well_known as wk
from slurmpod.commands import LocalRunner, Runner
from slurmpod.errors import BadInput
from slurmpod.prolog_epilog import actions, config, job, registry, runner, scratch
from slurmpod.prolog_epilog import gpu_readers as rd
from slurmpod.prolog_epilog import main as hooks
from slurmpod.prolog_epilog.agent import exporter, protocol, server
from slurmpod.prolog_epilog.agent.protocol import Aged, Answer, HookAnswer, HookRequest, Refusal, Request
from slurmpod.prolog_epilog.agent.state import Latest, Observed
from slurmpod.prolog_epilog.check import Check, GpuSource
from slurmpod.prolog_epilog.cudalib import GpuLibraries
from slurmpod.prolog_epilog.job import JobInfo
from slurmpod.prolog_epilog.main import HOOK_NAMES
from slurmpod.prolog_epilog.result import Context, Verdict, skipped
from slurmpod.prolog_epilog.state import StateDir
from slurmpod.timing import Clock, Deadline, SystemClock

if TYPE_CHECKING:
    import ctypes

    from slurmpod.slurm import SlurmClient

log = logging.getLogger(__name__)
# Well inside Slurm's HealthCheckInterval (300 s by default): a healthcheck is answered from verdicts at
# most MAX_AGE_S old. Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_HealthCheckInterval
INTERVAL_S = 60.0
MAX_AGE_S = 120.0
NVML_INIT_TIMEOUT = 10.0  # nvmlInit on 8 GPUs with persistence mode off takes a few seconds
START_MARGIN_S = 0.05  # a run is not started with less than this left of the request's deadline
ANSWER_MARGIN_S = 0.2  # kept back from a hook request's deadline to write the answer
HUNG_RETRY_S = 60.0  # an agent whose nvmlInit hung exits after this, for a new process to try again
EXIT_GRACE_S = 0.5  # after a hang, time for the answers in flight to be written before the agent exits
EXIT_NVML_HUNG = 3
MAX_TRACKED_JOBS = 4096  # jobs between prolog and epilog that are remembered (a missed epilog ages out)


@dataclass(frozen=True, slots=True)
class AgentSettings:
    socket: Path = Path(wk.HEALTH_AGENT_SOCKET)
    interval_s: float = INTERVAL_S  # between the agent's own periodic runs
    max_age_s: float = MAX_AGE_S  # the oldest verdict a periodic request is answered with
    nvml_call_timeout: float = hooks.NVML_CALL_TIMEOUT  # seconds per NVML call before it counts as hung
    nvml_init_timeout: float = NVML_INIT_TIMEOUT
    allowed_uids: frozenset[int] = server.DEFAULT_ALLOWED_UIDS
    socket_gid: int | None = wk.SLURM_UID  # the socket's group (SlurmUser's group has its uid's number)
    metrics_port: int = wk.HEALTH_AGENT_METRICS_PORT  # 0: no live metrics


class Agent:
    def __init__(self, checks_settings: hooks.Settings, agent: AgentSettings, *, clock: Clock | None = None,
                 checks: tuple[Check, ...] | None = None,
                 library: Callable[[], ctypes.CDLL] = nvml.open_library, run_cmd: Runner | None = None,
                 libraries: Callable[[tuple[runner.Planned, ...]], GpuLibraries | None] = hooks.libraries_for,
                 job_fields: Callable[[int], tuple[str, str]] | None = None) -> None:
        self._s = checks_settings
        self._a = agent
        self._clock = clock or SystemClock()
        self._checks = checks if checks is not None else registry.all_checks()
        self._library = library
        self._run_cmd = run_cmd or LocalRunner()
        self._libraries = libraries
        self._job_fields = job_fields  # a job's (comment, extra) for slurmd's PrEp plugin; None: scontrol
        self._stack = ExitStack()
        self._nv: nvml.Nvml | Exception = nvml.NvmlError("nvmlInit", -1, "not opened yet")
        self._run_lock = threading.Lock()
        self._watch: rd.XidWatch | None = None
        self._library_file: Path | None = None  # where a new process finds the NVML this one holds
        self._jobs: dict[int, tuple[int, ...]] = {}  # job id -> its GPUs, from its prolog to its epilog
        self._env: dict[str, str] = {}
        self._slurm: SlurmClient | None = None
        self.latest = Latest()
        self.restart_needed = threading.Event()  # set once NVML hung in this process
        self._sweepers = scratch.Sweepers()  # the epilogs' trash, emptied beside the agent, one at a time
        self.observations = exporter.Observations()  # what the live metrics are built from

    # --- NVML, held for the agent's lifetime ---
    def open(self) -> None:
        try:
            lib = self._library()
            self._nv = self._stack.enter_context(nvml.session(
                lib, call_timeout=self._a.nvml_call_timeout, init_timeout=self._a.nvml_init_timeout))
            self._library_file = nvml.loaded_from()
            log.info("NVML open (%s)", self._library_file or "library path unknown")
        except (nvml.NvmlAbsent, nvml.NvmlHung, nvml.NvmlError) as exc:
            self._nv = exc
            log.warning("NVML not open: %s", exc)
            return
        nv = self._nv
        try:
            watch = rd.watch_xids(nv, rd.devices(nv))
        except (nvml.NvmlHung, nvml.NvmlError) as exc:  # each run then registers a set of its own
            log.warning("no XID event set: %s", exc)
            return
        self._watch = watch
        self._stack.callback(rd.unwatch_xids, nv, watch)

    def close(self) -> None:
        self._stack.close()

    def use_environment(self, env: Mapping[str, str], slurm: SlurmClient | None = None) -> None:
        """The pod's environment, under each hook request's own (which names only SLURM* variables),
        and the Slurm client the hooks' actions use (scontrol; None: the hooks' own lazy one)."""
        self._env = {k: v for k, v in env.items() if not protocol.is_hook_variable(k)}
        self._slurm = slurm

    def _gpus(self) -> GpuSource:
        if isinstance(self._nv, nvml.NvmlError):  # not absent, not hung: worth another try
            self.open()
        held: nvml.Nvml | Exception = self._nv
        if isinstance(held, nvml.Nvml) and self._library_file is not None and not self._library_file.exists():
            # The session still answers, but nothing started now (a job, slurmd's gpu/nvml, the hooks
            # without the agent) can load NVML: the node is judged as if it had none.
            held = nvml.NvmlAbsent(f"no NVML library ({self._library_file}): gone since the agent opened it")
        return GpuSource.held(held, xid_watch=self._watch, jobs_on_gpus=self.jobs_on_gpus())

    # --- the jobs between their prolog and their epilog ---
    def jobs_on_gpus(self) -> dict[int, int]:
        return {g: job_id for job_id, gpus in self._jobs.items() for g in gpus}

    def _track(self, context: Context, the_job: JobInfo, exit_code: int) -> None:
        if the_job.job_id is None:
            return
        if context is Context.PROLOG and exit_code == 0:
            self._jobs[the_job.job_id] = the_job.gpus
            while len(self._jobs) > MAX_TRACKED_JOBS:
                self._jobs.pop(next(iter(self._jobs)))
        elif context in (Context.PROLOG, Context.EPILOG):
            self._jobs.pop(the_job.job_id, None)

    # --- whole hooks, for the thin client ---
    def hook(self, request: HookRequest, deadline: Deadline) -> HookAnswer | Refusal:
        """Run the hook as ``slurmpod prolog|epilog|healthcheck`` would, with this session."""
        name = HOOK_NAMES[request.context]
        if not self._run_lock.acquire(timeout=max(0.0, deadline.left() - START_MARGIN_S)):
            return Refusal("busy: another run holds the checks")
        err = io.StringIO()
        started = self._clock.monotonic()
        try:
            marker = {} if request.job_fields else {wk.ENV_JOB_FIELDS: wk.JOB_FIELDS_LOOKUP}
            env = MappingProxyType({**self._env, **request.env, **marker})
            the_job = JobInfo()
            try:
                the_job = job.from_env(env)
                code, report = hooks.run_hook(request.context, env, slurm=self._slurm_client(), err=err,
                                              sweep=self._sweepers, gpus=lambda _deadline: self._gpus(),
                                              checks=self._checks, run_cmd=self._run_cmd, libraries=self._libraries,
                                              job_fields=self._job_fields,
                                              deadline_cap=max(0.1, deadline.left() - ANSWER_MARGIN_S))
                self.observations.record(report.context, report.results, report.duration, time.time())
            except BadInput as exc:  # what the Python hook exits 2 with
                print(f"slurmpod {name}: bad input: {exc}", file=err)
                code = 2
            self._track(request.context, the_job, code)
        finally:
            self._run_lock.release()
            self._note_hang()
        self.observations.hook_answered(name, code)
        log.info("hook=%s job=%s exit=%d duration=%.3f", name, the_job.job_id, code, self._clock.monotonic() - started)
        return HookAnswer(code, err.getvalue())

    def _note_hang(self) -> None:
        if isinstance(self._nv, nvml.Nvml) and self._nv.hung is not None and not self.restart_needed.is_set():
            log.error("NVML hung in %s: the agent exits so that a new process opens NVML afresh", self._nv.hung)
            self.restart_needed.set()

    def xid_totals(self) -> dict[str, int]:
        """The node's XID counts ("GPU:CODE" -> n), as the checks keep them in the state dir."""
        totals = StateDir(self._s.state_dir).read("xid").get("totals", {})
        return {str(k): int(v) for k, v in totals.items()}

    def init_hung(self) -> bool:
        return isinstance(self._nv, nvml.NvmlHung)

    def _slurm_client(self) -> SlurmClient:
        return self._slurm if self._slurm is not None else hooks.lazy_slurm()

    def handle(self, request: Request | HookRequest, deadline: Deadline) -> Answer | HookAnswer | Refusal:
        """What the socket serves: hook requests and check-run requests."""
        if isinstance(request, HookRequest):
            return self.hook(request, deadline)
        return self.answer(request, deadline)

    # --- runs ---
    def run(self, request: Request, deadline: Deadline, *, reuse: bool) -> Answer | Refusal:
        """The verdicts for ``request``'s plan within ``deadline``."""
        try:
            cfg = config.load(self._s.config_path, {c.name for c in self._checks})
        except BadInput as exc:  # the hook meets the same error and exits 2, as without the agent
            return Refusal(f"health config: {exc}")
        planned = runner.plan(self._checks, request.context, cfg, request.job, recheck=request.recheck)
        periodic = request.context is Context.PERIODIC and not request.job.present
        names = [p.check.name for p in planned if not p.skip_reason]

        def reusable() -> dict[str, Observed]:
            if not (reuse and periodic):
                return {}
            return self.latest.fresh(names, self._clock.monotonic(), self._a.max_age_s)

        fresh = reusable()
        if set(names) <= set(fresh):
            return self._answer(request, _compose(planned, fresh), fresh, ran=frozenset())
        if not self._run_lock.acquire(timeout=max(0.0, deadline.left() - START_MARGIN_S)):
            return Refusal("busy: another run holds the checks")
        try:
            fresh = reusable()  # the run just waited for may have given them
            ran = frozenset(n for n in names if n not in fresh)
            if not ran:
                verdicts = _compose(planned, fresh)
            else:
                run_deadline = Deadline(self._clock, min(cfg.deadlines[request.context], deadline.left()), floor=0.1)
                env = hooks.check_env(self._s, request.context, cfg, the_job=request.job,
                                      state=StateDir(self._s.state_dir), gpus=self._gpus(),
                                      run_cmd=self._run_cmd, libraries=self._libraries(planned))
                started = self._clock.monotonic()
                verdicts = runner.run_verdicts(planned, env, run_deadline, self._clock,
                                               known={n: o.verdict for n, o in fresh.items()})
                self.observations.record(request.context, [runner.resolve(v) for v in verdicts],
                                         self._clock.monotonic() - started, time.time())
            if periodic:  # before the lock goes: a run waiting for it reuses these, not runs them again
                self.latest.record((v for v in verdicts if v.check in ran), self._clock.monotonic())
        finally:
            self._run_lock.release()
            self._note_hang()
        return self._answer(request, verdicts, fresh, ran)

    def _answer(self, request: Request, verdicts: tuple[Verdict, ...], fresh: Mapping[str, Observed],
                ran: frozenset[str]) -> Answer:
        now = self._clock.monotonic()
        aged = tuple(Aged(v, fresh[v.check].age(now) if v.check in fresh and v.check not in ran else 0.0)
                     for v in verdicts)
        return Answer(request.context, request.job.job_id, aged)

    def answer(self, request: Request, deadline: Deadline) -> Answer | Refusal:
        return self.run(request, deadline, reuse=True)

    def periodic_pass(self) -> Answer | Refusal:
        """One scheduled run of the periodic checks (and the check whose drain stands), fresh."""
        recheck = actions.owned_drain_check(StateDir(self._s.state_dir))
        deadline_s = config.DEFAULT_DEADLINES[Context.PERIODIC]
        with contextlib.suppress(BadInput):  # run() refuses, and says why
            deadline_s = config.load(self._s.config_path, {c.name for c in self._checks}).deadlines[Context.PERIODIC]
        request = Request(Context.PERIODIC, JobInfo(), recheck, deadline_s)
        result = self.run(request, Deadline(self._clock, deadline_s, floor=0.1), reuse=False)
        if isinstance(result, Refusal):
            log.warning("periodic run not done: %s", result.error)
        return result

    def schedule(self, stop: threading.Event) -> None:
        """Periodic runs every ``interval_s`` until ``stop``, the first at once."""
        while not stop.is_set():
            try:
                self.periodic_pass()
            except Exception:  # the schedule outlives a bug in one pass; the hooks still run their checks
                log.exception("periodic run crashed")
            stop.wait(self._a.interval_s)


def _compose(planned: tuple[runner.Planned, ...], fresh: Mapping[str, Observed]) -> tuple[Verdict, ...]:
    return tuple(skipped(p.check.name, p.skip_reason) if p.skip_reason else fresh[p.check.name].verdict
                 for p in planned)


def _exit_on_hang(agent: Agent, stop: threading.Event, retry_s: float = HUNG_RETRY_S) -> None:
    """Exit the process (os._exit: a thread stuck in the driver cannot be joined) once NVML hung in it,
    after the answers in flight had EXIT_GRACE_S; or after ``retry_s`` when its nvmlInit hung."""
    hung_at_init = agent.init_hung()
    if agent.restart_needed.wait(retry_s if hung_at_init else None) or hung_at_init:
        if stop.is_set():
            return
        time.sleep(EXIT_GRACE_S)
        log.error("health agent exiting: NVML hung; supervisord starts a new one")
        logging.shutdown()
        os._exit(EXIT_NVML_HUNG)


def main(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    s = hooks.settings_from(env, Context.PERIODIC, act=False, config_path=args.config, state_dir=args.state_dir,
                           metrics_dir="")
    settings = AgentSettings(socket=Path(args.socket), interval_s=float(args.interval), max_age_s=float(args.max_age),
                             allowed_uids=server.DEFAULT_ALLOWED_UIDS | {os.geteuid()},
                             metrics_port=int(args.metrics_port))
    agent = Agent(s, settings)
    # The hooks it runs read their settings from the environment: the options given win, as for checks.
    agent.use_environment({**env, wk.ENV_HEALTH_CONFIG: str(s.config_path), wk.ENV_HEALTH_STATE_DIR: str(s.state_dir)})
    agent.open()  # before the socket exists: until then the hooks find none and run the checks themselves
    stop = threading.Event()
    sock = server.bind(settings.socket, settings.socket_gid)
    srv = server.Server(sock, agent.handle, settings.allowed_uids, SystemClock())

    def on_signal(signum: int, frame: object) -> None:
        stop.set()
        srv.stop()

    signal.signal(signal.SIGTERM, on_signal)  # supervisord's stopsignal
    signal.signal(signal.SIGINT, on_signal)
    metrics = exporter.LiveMetrics(agent.observations, agent.xid_totals, settings.metrics_port, stop)
    metrics.start()
    scheduled = threading.Thread(target=agent.schedule, args=(stop,), name="agent-schedule", daemon=True)
    scheduled.start()
    threading.Thread(target=_exit_on_hang, args=(agent, stop), name="agent-hang-watch", daemon=True).start()
    log.info("health agent listening: socket=%s interval=%gs", settings.socket, settings.interval_s)
    try:
        srv.serve_forever()
    finally:
        stop.set()
        sock.close()
        settings.socket.unlink(missing_ok=True)
        metrics.shutdown()
        agent.close()
    return 0

