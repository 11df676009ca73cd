"""The commands Slurm calls (prolog, epilog, healthcheck) and `check run`: settings from env and flags,
one run, the actions, metrics, and an exit code (0 healthy or warnings only, 1 a failure).

Ref: https://slurm.schedmd.com/prolog_epilog.html ; https://slurm.schedmd.com/slurm.conf.html#OPT_HealthCheckProgram
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO, cast

from slurmpod import nvml
from slurmpod import well_known as wk
from slurmpod.commands import LocalRunner, Runner
from slurmpod.errors import BadInput, Problem, SlurmpodError
from slurmpod.prolog_epilog import actions, config, job, metrics, registry, runner
from slurmpod.prolog_epilog.check import Check, CheckEnv, GpuSource
from slurmpod.prolog_epilog.cudalib import GpuLibraries, LibraryAbsent
from slurmpod.prolog_epilog.result import CheckResult, Context, Status, Verdict, worst
from slurmpod.prolog_epilog.state import StateDir
from slurmpod.timing import Clock, Deadline, SystemClock

if TYPE_CHECKING:
    from slurmpod.prolog_epilog.agent.protocol import Answer, Request
    from slurmpod.slurm import SlurmClient

log = logging.getLogger(__name__)
NEEDS_CUDA = frozenset({"cuda-memory", "nccl-allreduce"})
NVML_CALL_TIMEOUT = 2.0  # seconds for one NVML query (they take micro- to milliseconds when healthy)
# The share of a hook's deadline it waits for the health agent; the rest is left for running the checks
# itself, so a late agent never makes the hook overrun its deadline (and Slurm's PrologEpilogTimeout).
AGENT_SHARE = 0.5


class AgentClient(Protocol):
    """What the hooks ask the health agent through (agent/client.py); None: no answer, run the checks."""

    def ask(self, request: Request, timeout: float) -> Answer | None: ...


@dataclass(frozen=True, slots=True)
class Settings:
    context: Context
    config_path: Path
    state_dir: Path
    metrics_dir: Path | None
    node: str
    expected_gpus: int | None
    auth: str
    real_memory_mib: int
    act: bool


def _int(env: Mapping[str, str], name: str, problems: list[Problem]) -> int | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit():
        problems.append(Problem(name, raw, "must be a whole number"))
        return None
    return int(raw)


def settings_from(env: Mapping[str, str], context: Context, *, act: bool, config_path: str | None = None,
                  state_dir: str | None = None, metrics_dir: str | None = None) -> Settings:
    problems: list[Problem] = []
    expected = _int(env, wk.ENV_EXPECTED_GPUS, problems)
    real_memory = _int(env, wk.ENV_REAL_MEMORY, problems)
    if problems:
        raise BadInput(problems)
    metrics_raw = metrics_dir if metrics_dir is not None else env.get(wk.ENV_HEALTH_METRICS_DIR, wk.HEALTH_METRICS_DIR)
    node = env.get(wk.ENV_SLURMD_NODENAME) or env.get(wk.ENV_POD_NAME) or os.uname().nodename
    return Settings(
        context=context,
        config_path=Path(config_path or env.get(wk.ENV_HEALTH_CONFIG, wk.HEALTH_CONFIG)),
        state_dir=Path(state_dir or env.get(wk.ENV_HEALTH_STATE_DIR, wk.HEALTH_STATE_DIR)),
        metrics_dir=Path(metrics_raw) if metrics_raw else None,
        node=node,
        expected_gpus=expected,
        auth=env.get(wk.ENV_AUTH, ""),
        real_memory_mib=real_memory or 0,
        act=act,
    )


@dataclass(frozen=True, slots=True)
class Report:
    context: Context
    node: str
    job_id: int | None
    results: tuple[CheckResult, ...]
    action: actions.Action
    duration: float

    @property
    def failed(self) -> bool:
        return runner.first_failure(self.results) is not None

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    def to_json(self) -> dict[str, object]:
        return {
            "context": self.context.value,
            "node": self.node,
            "job_id": self.job_id,
            "status": worst(self.results).value if not self.failed else Status.FAIL.value,
            "action": self.action.value,
            "duration_s": round(self.duration, 6),
            "results": [r.to_json() for r in self.results],
        }


def libraries_for(planned: tuple[runner.Planned, ...]) -> GpuLibraries | None:
    """CUDA and NCCL through cffi, only when a planned check needs them; None where the node has none."""
    if not any(p.check.name in NEEDS_CUDA and not p.skip_reason for p in planned):
        return None
    try:
        return GpuLibraries()
    except LibraryAbsent as exc:
        log.info("%s", exc)
        return None


def check_env(s: Settings, context: Context, cfg: config.Config, *, the_job: job.JobInfo, state: StateDir,
              gpus: GpuSource, run_cmd: Runner, libraries: GpuLibraries | None) -> CheckEnv:
    """What the checks of one run may use: the config's node facts win over the settings'."""
    return CheckEnv(
        context=context, config=cfg, job=the_job, state=state, gpus=gpus, runner=run_cmd, libraries=libraries,
        expected_gpus=cfg.expected_gpus if cfg.expected_gpus is not None else s.expected_gpus,
        auth=cfg.auth if cfg.auth is not None else s.auth,
        real_memory_mib=cfg.real_memory_mib if cfg.real_memory_mib is not None else s.real_memory_mib,
    )


def _from_agent(agent: AgentClient, context: Context, planned: tuple[runner.Planned, ...], *,
                the_job: job.JobInfo, recheck: str | None, budget: float) -> tuple[CheckResult, ...] | None:
    """The agent's results for this run's plan, or None (not answered in ``budget``, refused, or not
    the plan this hook made: the hook then runs the checks itself)."""
    from slurmpod.prolog_epilog.agent.protocol import Request  # noqa: PLC0415 - only where an agent listens

    answer = agent.ask(Request(context, the_job, recheck, budget), budget)
    if answer is None:
        return None
    names = [v.verdict.check for v in answer.verdicts]
    if answer.context is not context or answer.job_id != the_job.job_id or names != [p.check.name for p in planned]:
        log.warning("health agent answered another plan; running the checks here: context=%s checks=%s",
                    answer.context.value, ",".join(names))
        return None
    return tuple(runner.resolve(v.verdict) for v in answer.verdicts)


def execute(s: Settings, env: Mapping[str, str], *, slurm: SlurmClient | None, clock: Clock | None = None,
            run_cmd: Runner | None = None, checks: tuple[Check, ...] | None = None,
            libraries: Callable[[tuple[runner.Planned, ...]], GpuLibraries | None] = libraries_for,
            agent: AgentClient | None = None, gpus: Callable[[float], GpuSource] | None = None,
            known: Mapping[str, Verdict] | None = None, deadline_cap: float | None = None,
            job_fields: Callable[[int], tuple[str, str]] | None = None) -> Report:
    """One run: the results (from the health agent when ``agent`` answers within its share of the
    deadline, else from the checks run here with what is left), then the actions and the metrics.

    The health agent runs hooks through this too: ``gpus`` gives its held NVML session (given the
    deadline), ``known`` its fresh periodic verdicts, ``deadline_cap`` what its client waits.
    ``job_fields``: a job's (comment, extra) when its environment lacks them (default: scontrol)."""
    clock = clock or SystemClock()
    start = clock.monotonic()
    all_checks = checks if checks is not None else registry.all_checks()
    cfg = config.load(s.config_path, {c.name for c in all_checks})
    deadline_s = cfg.deadlines[s.context] if deadline_cap is None else min(cfg.deadlines[s.context], deadline_cap)
    deadline = Deadline(clock, deadline_s, floor=0.1)
    the_job = job.from_env(env)
    state = StateDir(s.state_dir)
    recheck = actions.owned_drain_check(state) if s.context is Context.PERIODIC else None
    planned = runner.plan(all_checks, s.context, cfg, the_job, recheck=recheck)
    results = None
    if agent is not None:
        results = _from_agent(agent, s.context, planned, the_job=the_job, recheck=recheck,
                              budget=deadline_s * AGENT_SHARE)
    if results is None:
        source = (gpus or _own_gpus)(deadline_s)
        here = check_env(s, s.context, cfg, the_job=the_job, state=state, gpus=source,
                         run_cmd=run_cmd or LocalRunner(), libraries=libraries(planned))
        try:
            results = tuple(runner.resolve(v) for v in runner.run_verdicts(planned, here, deadline, clock, known=known))
        finally:
            source.close()
    if not the_job.skip_known and the_job.job_id is not None:
        results = late_skip(planned, results, the_job.job_id, job_fields or _job_fields)
    enabled = frozenset(c.name for c in all_checks if cfg.settings(c.name).enabled)
    action = actions.act(s.context, results, node=s.node, slurm=slurm if s.act else None, state=state,
                         clean_runs_to_undrain=cfg.clean_runs_to_undrain, enabled=enabled)
    duration = clock.monotonic() - start
    if s.metrics_dir is not None:
        totals = {k: int(v) for k, v in state.read("xid").get("totals", {}).items()}
        try:
            metrics.write(s.metrics_dir, s.context, metrics.render(s.context, results, duration, time.time(), totals))
        except OSError as exc:  # metrics are a convenience: never fail a prolog for them
            log.warning("metrics not written: dir=%s error=%s", s.metrics_dir, exc)
    return Report(s.context, s.node, the_job.job_id, results, action, duration)


def late_skip(planned: tuple[runner.Planned, ...], results: tuple[CheckResult, ...], job_id: int,
              job_fields: Callable[[int], tuple[str, str]]) -> tuple[CheckResult, ...]:
    """The job's skip list where its comment and extra were not in the environment (slurmd's PrEp plugin
    cannot read them): looked up only when a check the job could skip has failed, so a healthy hook
    makes no RPC. A failed lookup skips nothing: the hook decides as for a job that asked nothing."""
    could = {p.check.name for p in planned if p.check.skippable and not p.skip_reason}
    if not any(r.status is Status.FAIL and r.check in could for r in results):
        return results
    try:
        names = job.skip_names(*job_fields(job_id))
    except (SlurmpodError, OSError) as exc:
        log.warning("job's comment and extra not looked up: job=%s error=%s", job_id, exc)
        return results
    return tuple(runner.skipped_by_job(r.check, job_id)
                 if r.status is Status.FAIL and r.check in could and r.check in names else r for r in results)


def _job_fields(job_id: int) -> tuple[str, str]:
    from slurmpod.slurm import CliSlurmClient  # noqa: PLC0415 - only when a skippable check failed

    return CliSlurmClient().job_comment_extra(job_id, timeout=actions.RPC_TIMEOUT)


def _own_gpus(deadline_s: float) -> GpuSource:
    """A session of this run's own, opened on first use."""
    return GpuSource(nvml.open_library, NVML_CALL_TIMEOUT, init_timeout=min(10.0, deadline_s / 3))


def _print(report: Report, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.to_json(), indent=2))
        return
    for r in report.results:
        print(f"{r.status.value:7} {r.check:15} {r.duration * 1000:8.1f} ms  {r.reason}")
    print(f"{report.context.value}: {'FAIL' if report.failed else 'ok'} ({report.action.value})")


class _LazySlurm:
    """The scontrol client, imported on the first call: the healthy prolog and epilog make none, and
    slurmpod.slurm with its imports costs them tens of milliseconds."""

    def __getattr__(self, name: str) -> Any:
        from slurmpod.slurm import CliSlurmClient  # noqa: PLC0415 - see the class docstring

        return getattr(CliSlurmClient(), name)


def lazy_slurm() -> SlurmClient:
    """The scontrol client, imported on its first call."""
    return cast("SlurmClient", _LazySlurm())


def _slurm() -> SlurmClient:
    return cast("SlurmClient", _LazySlurm())


def _agent(env: Mapping[str, str]) -> AgentClient | None:
    """The health agent's client when its socket is there (a stat, no import otherwise); None when the
    socket setting is empty or nothing listens there."""
    path = env.get(wk.ENV_HEALTH_AGENT_SOCKET, wk.HEALTH_AGENT_SOCKET)
    if not path or not os.path.exists(path):
        return None
    from slurmpod.prolog_epilog.agent.client import Client  # noqa: PLC0415 - only where an agent listens

    return Client(Path(path))


HOOK_NAMES = {Context.PROLOG: "prolog", Context.EPILOG: "epilog", Context.PERIODIC: "healthcheck"}


def run_hook(context: Context, env: Mapping[str, str], *, slurm: SlurmClient, err: TextIO,
             agent: AgentClient | None = None, sweep: Callable[[str], object] | None = None,
             **run: Any) -> tuple[int, Report]:
    """One Prolog, Epilog or HealthCheckProgram run: the scratch tidy (epilog, healthcheck), the
    checks and their actions; findings go to ``err``. ``sweep``: what starts the trash's sweeper
    (default: a process of its own). ``run``: ``execute``'s keywords (the health agent's held session).
    Returns (exit code, report). Raises BadInput (the caller's exit 2)."""
    s = settings_from(env, context, act=True)
    if context is not Context.PROLOG:
        _tidy_scratch(env, job=context is Context.EPILOG, err=err, sweep=sweep, slurm=slurm, node=s.node)
    report = execute(s, env, slurm=slurm, agent=agent, **run)
    for r in report.results:
        if r.status in {Status.FAIL, Status.WARN}:
            print(f"slurmpod {context.value}: {r.status.value}: {r.check}: {r.reason}", file=err)
    return report.exit_code, report


def _hook(context: Context, env: Mapping[str, str]) -> int:
    """What Slurm runs: no arguments, the SLURM_* environment, findings on stderr (slurmd logs it).
    The results come from the health agent when it answers in time, else from the checks run here.
    Ref: https://slurm.schedmd.com/prolog_epilog.html"""
    code, _ = run_hook(context, env, slurm=_slurm(), err=sys.stderr, agent=_agent(env))
    return code


def prolog(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    return _hook(Context.PROLOG, env)


def _tidy_scratch(env: Mapping[str, str], *, job: bool, err: TextIO, path: str = wk.TASK_ENV_FILE,
                  sweep: Callable[[str], object] | None = None, slurm: SlurmClient | None = None,
                  node: str = "") -> None:
    """The job's scratch dir (made by its task prolog) goes with the job: the Epilog runs once per node
    after all its steps. The Epilog only moves it to the trash; a sweeper started here empties the trash
    (the periodic run starts one for what earlier sweepers left). Nothing here counts against the node:
    a failure is logged, never the hook's failure."""
    from slurmpod.prolog_epilog import scratch, task_env  # noqa: PLC0415 - only the epilog and periodic run

    try:
        with open(path, encoding="utf-8") as f:
            settings = task_env.parse(f.read(), path)
        moved = task_env.remove_scratch(settings, env.get(wk.ENV_SLURM_JOB_ID, "")) if job else None
        if moved:
            log.info("scratch removed: path=%s trash=%s owner=%d", moved.path, moved.trashed, moved.owner)
        if job and settings.shm_dir is not None:
            _release_shm(settings.shm_dir, env, err, slurm=slurm, node=node)
        for base in (settings.scratch_base, settings.shm_dir):
            if base is not None and scratch.pending(base):
                (sweep or scratch.start_sweeper)(base)
    except Exception as exc:  # whatever it is, never the hook's failure: a failed Epilog drains the node
        if not (isinstance(exc, FileNotFoundError) and exc.filename == path):  # no file: no task environment
            print(f"slurmpod {'epilog' if job else 'healthcheck'}: scratch: {exc}", file=err)


def _release_shm(shm_dir: str, env: Mapping[str, str], err: TextIO, *, slurm: SlurmClient | None,
                 node: str) -> None:
    """The job's user's entries in /dev/shm, once that user has no process and no other job here
    (prolog_epilog/job_shm.py). A failure is logged, never the hook's failure."""
    from slurmpod.prolog_epilog import job_shm  # noqa: PLC0415 - only the epilog

    raw_uid, raw_job = env.get(wk.ENV_SLURM_JOB_UID, ""), env.get(wk.ENV_SLURM_JOB_ID, "")
    if not all(v.isascii() and v.isdigit() and len(v) <= 10 for v in (raw_uid, raw_job)):
        return  # not what slurmd sets: nothing is removed
    uid, job_id = int(raw_uid), int(raw_job)

    def other_jobs() -> bool | None:
        """Whether slurmctld has another job of the user on this node; None when it does not say."""
        if slurm is None or not node:
            return None
        try:
            jobs = slurm.jobs_on_node(node, timeout=actions.RPC_TIMEOUT)
        except Exception:  # whatever it is, an unanswered question removes nothing
            return None
        own = next((j for j in jobs if j.job_id == job_id), None)
        user = own.user if own is not None and own.user else _user_name(uid)
        if not user:
            return None
        return any(j.user == user for j in jobs if j.job_id != job_id)

    try:
        done = job_shm.release(shm_dir, uid, other_jobs)
    except OSError as exc:
        print(f"slurmpod epilog: {shm_dir}: {exc}", file=err)
        return
    if done.removed or done.kept:
        log.info("shared memory released: dir=%s uid=%d removed=%d kept=%s", shm_dir, done.uid, done.removed,
                 done.kept or "-")


def _user_name(uid: int) -> str:
    import pwd  # noqa: PLC0415 - only when slurmctld did not list the ending job

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return ""


def epilog(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    return _hook(Context.EPILOG, env)


def healthcheck(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    return _hook(Context.PERIODIC, env)


def check_run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    s = settings_from(env, Context(args.context), act=bool(args.act), config_path=args.config,
                      state_dir=args.state_dir, metrics_dir=args.metrics_dir)
    report = execute(s, env, slurm=_slurm() if s.act else None)
    _print(report, bool(args.json))
    return report.exit_code
