"""retired-pages: pages retired for ECC errors (pre-Ampere) over the limit, or a retirement pending."""

from __future__ import annotations

from slurmpod.prolog_epilog import gpu_readers as rd
from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.checks.gpu import gpus_of, listing, read_all
from slurmpod.prolog_epilog.config import Thresholds
from slurmpod.prolog_epilog.result import CheckResult, Context, Remediation, fail, ok, skipped

NAME = "retired-pages"


def judge(readings: list[tuple[rd.Device, rd.RetiredPages | None]], limits: Thresholds) -> CheckResult:
    known = [(d, r) for d, r in readings if r is not None]
    if not known:
        return skipped(NAME, "page retirement not supported (row remapping instead)")
    full = [(d, r) for d, r in known if r.sbe + r.dbe >= limits.retired_pages_max]
    if full:
        return fail(NAME, "retired pages at limit: " + listing([(d, f"{r.sbe + r.dbe} pages") for d, r in full]),
                    Remediation.REPLACE_NODE, gpus=gpus_of(full))
    pending = [(d, r) for d, r in known if r.pending]
    if pending:
        return fail(NAME, "page retirement pending: " + listing([(d, "needs a reset") for d, _ in pending]),
                    Remediation.RESTART_POD, gpus=gpus_of(pending))
    return ok(NAME)


def run(env: CheckEnv) -> CheckResult:
    got = read_all(env, NAME, rd.retired_pages)
    if isinstance(got, CheckResult):
        return got
    readings, model = got
    return judge(readings, env.limits(model))


CHECK = Check(NAME, frozenset({Context.PERIODIC, Context.STARTUP, Context.EPILOG}), run, timeout=5.0,
              description="retired memory pages")
