"""fabric: on NVSwitch systems, each GPU's fabric registration completed with success.

A GPU whose fabric state is not COMPLETED cannot run CUDA work across NVSwitch (jobs fail at init).
Ref: https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html (nvmlDeviceGetGpuFabricInfo)
"""

from __future__ import annotations

from slurmpod.prolog_epilog import gpu_readers as rd
from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.checks.gpu import gpus_of, listing, read_all
from slurmpod.prolog_epilog.result import CheckResult, Context, Remediation, fail, ok, skipped

NAME = "fabric"
_STATES = {rd.FABRIC_NOT_STARTED: "not started", rd.FABRIC_IN_PROGRESS: "in progress",
           rd.FABRIC_COMPLETED: "completed"}


def judge(readings: list[tuple[rd.Device, rd.Fabric | None]]) -> CheckResult:
    known = [(d, f) for d, f in readings if f is not None]
    if not known:
        return skipped(NAME, "no NVSwitch fabric")
    bad = [(d, f) for d, f in known if f.state != rd.FABRIC_COMPLETED or f.status != 0]
    if bad:
        return fail(NAME, "fabric not ready: " + listing(
            [(d, f"{_STATES.get(f.state, f.state)}, status {f.status}") for d, f in bad]),
            Remediation.RESTART_POD, gpus=gpus_of(bad))
    return ok(NAME)


def run(env: CheckEnv) -> CheckResult:
    got = read_all(env, NAME, rd.fabric)
    return got if isinstance(got, CheckResult) else judge(got[0])


CHECK = Check(NAME, frozenset({Context.PROLOG, Context.PERIODIC, Context.STARTUP}), run, timeout=5.0,
              description="NVSwitch fabric registration")
