"""ecc: uncorrectable ECC errors fail; correctable ones over the limit warn (volatile counters)."""

from __future__ import annotations

from slurmpod.prolog_epilog import gpu_readers as rd
from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.checks.gpu import gpus_of, listing, read_all
from slurmpod.prolog_epilog.config import Thresholds
from slurmpod.prolog_epilog.result import CheckResult, Context, Remediation, fail, ok, skipped, warn

NAME = "ecc"


def judge(readings: list[tuple[rd.Device, rd.Ecc | None]], limits: Thresholds) -> CheckResult:
    known = [(d, e) for d, e in readings if e is not None]
    if not known:
        return skipped(NAME, "ECC not supported")
    bad = [(d, e) for d, e in known if e.volatile_uncorrected > limits.ecc_uncorrected_volatile_max]
    if bad:
        return fail(NAME, "uncorrectable ECC: " + listing([(d, f"{e.volatile_uncorrected} DBE") for d, e in bad]),
                    Remediation.RESTART_POD, gpus=gpus_of(bad))
    noisy = [(d, e) for d, e in known if e.volatile_corrected > limits.ecc_corrected_volatile_max]
    if noisy:
        return warn(NAME, "correctable ECC over limit: " +
                    listing([(d, f"{e.volatile_corrected} SBE") for d, e in noisy]), gpus=gpus_of(noisy))
    return ok(NAME)


def run(env: CheckEnv) -> CheckResult:
    got = read_all(env, NAME, rd.ecc)
    if isinstance(got, CheckResult):
        return got
    readings, model = got
    return judge(readings, env.limits(model))


CHECK = Check(NAME, frozenset(Context), run, timeout=5.0, description="ECC error counters")
