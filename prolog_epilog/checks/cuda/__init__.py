"""The checks that drive the GPUs through the CUDA runtime (and NCCL)."""

from __future__ import annotations

from slurmpod.prolog_epilog.check import CheckEnv
from slurmpod.prolog_epilog.checks.gpu import session
from slurmpod.prolog_epilog.result import CheckResult, Remediation, fail, skipped


def no_device(env: CheckEnv, name: str, why: str) -> CheckResult:
    """What a CUDA check reports when the runtime finds no driver or no device (``NoCudaDevice``):
    skipped on a host with no GPU (none expected, none seen by NVML: a CPU node that carries the CUDA
    runtime), a failure where GPUs are expected or NVML sees some (a driver older than the runtime)."""
    got = session(env, name)
    seen = 0 if isinstance(got, CheckResult) else len(got[1])
    if env.expected_gpus or seen:
        expected = f"{env.expected_gpus} expected" if env.expected_gpus else f"{seen} seen by NVML"
        return fail(name, f"{why}, with {expected} GPUs", Remediation.RESTART_POD)
    return skipped(name, f"no GPU on this host: {why}")
