"""gpu-memory: memory held or processes left on the GPUs before a job starts and after one ends.

In the prolog only the job's GPUs matter (another job may hold the others on a shared node); in the
epilog the job's processes are gone (slurmd kills them before the Epilog), so anything left is stray.
"""

from __future__ import annotations

from slurmpod.prolog_epilog import gpu_readers as rd
from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.checks.gpu import gpus_of, listing, read_all
from slurmpod.prolog_epilog.config import Thresholds
from slurmpod.prolog_epilog.result import CheckResult, Context, Remediation, fail, ok

NAME = "gpu-memory"


def judge(readings: list[tuple[rd.Device, rd.Usage]], limits: Thresholds) -> CheckResult:
    held = [(d, u) for d, u in readings if u.pids or u.used_mib > limits.gpu_memory_held_max_mib]
    if held:
        return fail(NAME, "memory held: " + listing([
            (d, f"{u.used_mib} MiB" + (f" by pid {','.join(map(str, u.pids))}" if u.pids else "")) for d, u in held]),
            Remediation.RESTART_POD, gpus=gpus_of(held))
    return ok(NAME)


def run(env: CheckEnv) -> CheckResult:
    job_gpus = env.job.gpus  # only the job's GPUs, when Slurm named them
    got = read_all(env, NAME, rd.usage, (lambda d: d.index in job_gpus) if job_gpus else None)
    if isinstance(got, CheckResult):
        return got
    readings, model = got
    return judge(readings, env.limits(model))


CHECK = Check(NAME, frozenset({Context.PROLOG, Context.EPILOG}), run, timeout=5.0,
              description="GPU memory held by stray processes")
