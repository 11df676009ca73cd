"""A recording fake of ``slurmpod.entrypoints.supervisor.Supervisor`` (this pod's supervisord)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from slurmpod.entrypoints.supervisor import ProgramStatus
from slurmpod.errors import TransientError


@dataclass
class FakeSupervisor:
    """A recording ``Supervisor``: ``programs`` is what status reports, ``unreachable`` makes status raise;
    ``on[action]`` runs after that action (e.g. a restarted slurmd registering again)."""

    programs: tuple[ProgramStatus, ...] = (ProgramStatus("slurmd", "RUNNING"),)
    unreachable: bool = False
    control_ok: bool = True
    actions: list[tuple[str, str]] = field(default_factory=list)
    on: dict[str, Callable[[], object]] = field(default_factory=dict)

    def status(self, *, timeout: float) -> tuple[ProgramStatus, ...]:
        if self.unreachable:
            raise TransientError("supervisord not answering (supervisorctl exited 2): refused connection")
        return self.programs

    def control(self, action: str, program: str, *, timeout: float) -> bool:
        self.actions.append((action, program))
        if action in self.on:
            self.on[action]()
        return self.control_ok

