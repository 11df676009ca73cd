"""`slurmpod-task-prolog`: the program slurm.conf's TaskProlog= names (it takes no arguments).

A command line of its own, beside slurmpod/cli.py: it runs before every task, so it reads the job's
environment once and calls the task prolog, with no argument parser and no logging set up.
Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_TaskProlog
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    from slurmpod.prolog_epilog import task_env  # noqa: PLC0415 - the program's one import

    return task_env.main(None, dict(os.environ))


if __name__ == "__main__":
    sys.exit(main())
