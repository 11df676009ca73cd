"""nccl-allreduce: intra-node all-reduce bus bandwidth over the local GPUs, against the model's floor.

busbw = algbw * 2(n-1)/n, as nccl-tests reports it, at a large message (thresholds.allreduce_bytes).
Ref: https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md
"""

from __future__ import annotations

from slurmpod.errors import SlurmpodError
from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.checks.cuda import no_device
from slurmpod.prolog_epilog.checks.cuda.memory import busy
from slurmpod.prolog_epilog.checks.gpu import session
from slurmpod.prolog_epilog.config import Thresholds
from slurmpod.prolog_epilog.cudalib import AllReduceResult, NoCudaDevice
from slurmpod.prolog_epilog.result import CheckResult, Context, Remediation, fail, ok, skipped

NAME = "nccl-allreduce"


def judge(result: AllReduceResult, limits: Thresholds) -> CheckResult:
    values = (("busbw_gbps", round(result.busbw_gbps, 2)), ("algbw_gbps", round(result.algbw_gbps, 2)))
    text = f"{result.busbw_gbps:.0f} GB/s busbw over {result.gpus} GPUs at {result.bytes // 2**20} MiB"
    floor = limits.allreduce_busbw_min_gbps
    if floor and result.busbw_gbps < floor:
        return fail(NAME, f"{text}, floor {floor:g}", Remediation.DRAIN, values=values)
    return ok(NAME, text, values=values)


def run(env: CheckEnv) -> CheckResult:
    libs = env.libraries
    if libs is None or not libs.has_nccl:
        return skipped(NAME, "no CUDA runtime or NCCL")
    why = busy(env)
    if why:
        return skipped(NAME, why)
    got = session(env, NAME)
    name = "" if isinstance(got, CheckResult) or not got[1] else got[1][0].name
    limits = env.limits(name)
    try:
        count = libs.device_count()
        if count < 2:
            return skipped(NAME, f"{count} GPU: no intra-node all-reduce")
        result = libs.all_reduce(list(range(count)), limits.allreduce_bytes)
    except NoCudaDevice as exc:
        return no_device(env, NAME, str(exc))
    except SlurmpodError as exc:
        return fail(NAME, f"all-reduce failed: {exc}", Remediation.RESTART_POD)
    return judge(result, limits)


CHECK = Check(NAME, frozenset({Context.PERIODIC}), run, timeout=30.0, skippable=True,
              description="NCCL all-reduce bus bandwidth")
