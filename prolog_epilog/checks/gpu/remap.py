"""remap: remapped rows pending (a reset is needed) or failed (the GPU is out of spare rows).

Ref: https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html#row-remapping
"""

from __future__ import annotations

from slurmpod.prolog_epilog import gpu_readers as rd
from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.checks.gpu import gpus_of, listing, read_all
from slurmpod.prolog_epilog.result import CheckResult, Context, Remediation, fail, ok, skipped

NAME = "remap"


def judge(readings: list[tuple[rd.Device, rd.Remap | None]]) -> CheckResult:
    known = [(d, r) for d, r in readings if r is not None]
    if not known:
        return skipped(NAME, "row remapping not supported")
    failed = [(d, r) for d, r in known if r.failure]
    if failed:
        return fail(NAME, "row remapping failed: " + listing([(d, "out of spare rows") for d, _ in failed]),
                    Remediation.REPLACE_NODE, gpus=gpus_of(failed))
    pending = [(d, r) for d, r in known if r.pending]
    if pending:
        return fail(NAME, "row remap pending: " + listing([(d, "needs a reset") for d, _ in pending]),
                    Remediation.RESTART_POD, gpus=gpus_of(pending))
    return ok(NAME)


def run(env: CheckEnv) -> CheckResult:
    got = read_all(env, NAME, rd.remapped_rows)
    return got if isinstance(got, CheckResult) else judge(got[0])


CHECK = Check(NAME, frozenset(Context), run, timeout=5.0, description="HBM row remapping state")
