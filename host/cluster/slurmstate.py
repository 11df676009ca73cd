"""The emulator's view of Slurm: the shared Slurm client, run inside a pod through `docker exec`.

The node model and its predicates are slurmpod's own (slurmpod.nodestate), the same the pods use.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from slurmpod.commands import Result
from slurmpod.errors import TransientError
from slurmpod.nodestate import NodeState
from slurmpod.slurm import CliSlurmClient
from slurmpod_host.cluster import runtime

# exec_in's exit codes for a command a pod does not have: try the next pod.
NOT_HERE = frozenset({126, 127})


class PodRunner:
    """slurmpod.commands.Runner over `docker exec` into the first of ``pods`` that has the command."""

    def __init__(self, client: Any, pods: Sequence[str]) -> None:
        self.client, self.pods = client, tuple(pods)

    def __call__(self, argv: Sequence[str], timeout: float) -> Result:
        result = runtime.ExecResult(-1, "", "no pod to ask")
        for pod in self.pods:
            try:
                result = runtime.exec_in(self.client, pod, argv, timeout_s=max(1.0, timeout))
            except Exception as exc:
                raise TransientError(f"docker exec in {pod}: {exc}") from None
            if result.code not in NOT_HERE:
                break
        if result.code == runtime.TIMEOUT_EXIT:
            raise TransientError(f"{argv[0]} timed out after {timeout:g} s in a pod")
        return Result(tuple(argv), result.code, result.stdout, result.stderr)


def client_in(docker_client: Any, pods: Sequence[str]) -> CliSlurmClient:
    """The Slurm client the pods use, run from the host in ``pods`` (controller first, then login)."""
    return CliSlurmClient(PodRunner(docker_client, pods))


def not_idle(expected: Iterable[str], nodes: Iterable[NodeState]) -> Mapping[str, str]:
    """Each expected node that is not usable and IDLE yet, with what Slurm says about it."""
    by_name = {n.name: n for n in nodes}
    return {name: (str(by_name[name]) if name in by_name else "not registered")
            for name in expected if name not in by_name or not by_name[name].usable_idle}
