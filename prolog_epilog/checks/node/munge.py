"""munge: a credential made here decodes here (munged up, key readable), when munge is Slurm's auth.

Equivalent of `munge -n | unmunge`, without a shell: `munge -n -o FILE`, then `unmunge -i FILE`.
Ref: https://github.com/dun/munge/wiki/Installation-Guide (verifying the installation)
"""

from __future__ import annotations

from pathlib import Path

from slurmpod import well_known as wk
from slurmpod.commands import Result
from slurmpod.errors import SlurmpodError
from slurmpod.prolog_epilog.check import Check, CheckEnv
from slurmpod.prolog_epilog.result import CheckResult, Context, Remediation, fail, ok, skipped

NAME = "munge"
STEP_TIMEOUT = 3.0  # seconds per command; munged answers in milliseconds


def judge(encode: Result, decode: Result | None) -> CheckResult:
    if encode.returncode != 0:
        return fail(NAME, f"munge failed: {encode.brief()}", Remediation.RESTART_POD)
    if decode is None or decode.returncode != 0:
        return fail(NAME, f"unmunge failed: {decode.brief() if decode else 'not run'}", Remediation.RESTART_POD)
    if "STATUS:" in decode.stdout and "Success" not in decode.stdout:
        return fail(NAME, "unmunge: " + decode.stdout.splitlines()[0], Remediation.RESTART_POD)
    return ok(NAME)


def run(env: CheckEnv) -> CheckResult:
    if env.auth != "munge":
        return skipped(NAME, f"auth is {env.auth or 'not set'}, not munge")
    import tempfile  # noqa: PLC0415 - periodic only: the prolog (every job) would pay ~10 ms to import it

    with tempfile.TemporaryDirectory(prefix="slurmpod-munge-") as tmp:
        cred = str(Path(tmp) / "cred")
        try:
            encode = env.runner([wk.MUNGE_BIN, "-n", "-o", cred], STEP_TIMEOUT)
            decode = env.runner([wk.UNMUNGE_BIN, "-i", cred], STEP_TIMEOUT) if encode.returncode == 0 else None
        except SlurmpodError as exc:
            return fail(NAME, str(exc), Remediation.RESTART_POD)
    return judge(encode, decode)


CHECK = Check(NAME, frozenset({Context.PERIODIC, Context.STARTUP}), run, timeout=8.0,
              description="munge credential round trip")
