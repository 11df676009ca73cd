"""How slurmpod runs a command: argument lists, a timeout always, output kept for pure parsers.

A ``Runner`` is the seam: in a pod commands run here (``LocalRunner``); the emulator on the host runs
the same Slurm client inside a pod with `docker exec` (its own runner).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from slurmpod.errors import PermanentError, TransientError


@dataclass(frozen=True, slots=True)
class Result:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def brief(self) -> str:
        """`cmd sub exited N: first stderr line(s)` for an error message."""
        text = (self.stderr.strip() or self.stdout.strip())[:300]
        return f"{' '.join(self.argv[:3])} exited {self.returncode}: {text}"


class Runner(Protocol):
    def __call__(self, argv: Sequence[str], timeout: float) -> Result:
        """Run argv; TransientError when it times out, PermanentError when it cannot start."""
        ...


class LocalRunner:
    """Run commands in this container."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = dict(env) if env is not None else None

    def __call__(self, argv: Sequence[str], timeout: float) -> Result:
        try:
            proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False,
                                  env=self._env)
        except subprocess.TimeoutExpired:
            raise TransientError(f"{argv[0]} timed out after {timeout:.1f} s") from None
        except FileNotFoundError:
            raise PermanentError(f"{argv[0]} is not installed") from None
        except OSError as exc:
            raise PermanentError(f"cannot run {argv[0]}: {exc.strerror}") from None
        return Result(tuple(argv), proc.returncode, proc.stdout, proc.stderr)
