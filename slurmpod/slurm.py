"""Talk to Slurm through its CLI's JSON output (pyslurm cannot build against 24.11/26.05).

Every call has a timeout; output is parsed by the pure functions below.
Ref: https://slurm.schedmd.com/scontrol.html (--json), https://slurm.schedmd.com/squeue.html
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from slurmpod import confvalues
from slurmpod.errors import PermanentError, TransientError

DEFAULT_TIMEOUT = 10.0
# Node states that make a node unusable for new work. Ref: https://slurm.schedmd.com/sinfo.html#SECTION_NODE-STATE-CODES
UNUSABLE_STATES = frozenset(
    {
        "DOWN",
        "DRAIN",
        "DRAINING",
        "DRAINED",
        "NOT_RESPONDING",
        "INVALID_REG",
        "INVALID",
        "FAIL",
        "FAILING",
        "FUTURE",
        "UNKNOWN",
    }
)


@dataclass(frozen=True, slots=True)
class NodeState:
    name: str
    states: frozenset[str]
    reason: str
    cpus: int
    real_memory: int
    specialized_cores: int
    specialized_memory: int
    features: tuple[str, ...]
    dynamic: bool


def run(argv: Sequence[str], timeout: float = DEFAULT_TIMEOUT, ok_codes: Sequence[int] = (0,)) -> str:
    """Run a Slurm command; stdout on an expected exit code, TransientError otherwise."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise TransientError(f"{argv[0]} timed out after {timeout:.0f} s") from None
    except FileNotFoundError:
        raise PermanentError(f"{argv[0]} is not installed") from None
    if proc.returncode not in ok_codes:
        raise TransientError(f"{' '.join(argv[:3])} exited {proc.returncode}: {proc.stderr.strip()[:300]}")
    return proc.stdout


def _number(value: Any) -> int:
    """Slurm's JSON wraps numbers as {"set": bool, "infinite": bool, "number": n} in newer versions."""
    if isinstance(value, dict):
        return int(value.get("number", 0)) if value.get("set", True) else 0
    return int(value or 0)


def parse_nodes(text: str) -> list[NodeState]:
    """Parse `scontrol show nodes --json` (data_parser v0.0.4x)."""
    doc = json.loads(text)
    out = []
    for node in doc.get("nodes", []):
        state = node.get("state", [])
        states = frozenset([state] if isinstance(state, str) else state)
        out.append(
            NodeState(
                name=node["name"],
                states=states,
                reason=node.get("reason", "") or "",
                cpus=_number(node.get("cpus", 0)),
                real_memory=_number(node.get("real_memory", 0)),
                specialized_cores=_number(node.get("specialized_cores", 0)),
                specialized_memory=_number(node.get("specialized_memory", 0)),
                features=tuple(node.get("features", []) or []),
                dynamic="DYNAMIC_NORM" in states or "DYNAMIC_FUTURE" in states,
            )
        )
    return out


def nodes(timeout: float = DEFAULT_TIMEOUT) -> list[NodeState]:
    return parse_nodes(run(["scontrol", "show", "nodes", "--json"], timeout))


def node(name: str, timeout: float = DEFAULT_TIMEOUT) -> NodeState | None:
    confvalues.node_name("node", name)
    found = parse_nodes(run(["scontrol", "show", "node", name, "--json"], timeout, ok_codes=(0, 1)) or "{}")
    return next((n for n in found if n.name == name), None)


def usable(state: NodeState) -> bool:
    return not (state.states & UNUSABLE_STATES)


def drain(name: str, reason: str, timeout: float = DEFAULT_TIMEOUT) -> None:
    confvalues.node_name("node", name)
    confvalues.quoted_text("reason", reason)
    run(["scontrol", "update", f"NodeName={name}", "State=DRAIN", f"Reason={reason}"], timeout)


def resume(name: str, timeout: float = DEFAULT_TIMEOUT) -> None:
    confvalues.node_name("node", name)
    run(["scontrol", "update", f"NodeName={name}", "State=RESUME"], timeout)


def delete_node(name: str, timeout: float = DEFAULT_TIMEOUT) -> None:
    confvalues.node_name("node", name)
    run(["scontrol", "delete", f"NodeName={name}"], timeout)


@dataclass(frozen=True, slots=True)
class JobOnNode:
    job_id: int
    batch: bool
    state: str


def parse_squeue(text: str) -> list[JobOnNode]:
    """Parse `squeue --json` into job id, whether it is a batch job, and its state."""
    doc = json.loads(text)
    out = []
    for job in doc.get("jobs", []):
        state = job.get("job_state", [])
        state_s = state[0] if isinstance(state, list) and state else str(state)
        out.append(JobOnNode(_number(job.get("job_id")), bool(job.get("batch_flag", False)), state_s))
    return out


def jobs_on_node(name: str, timeout: float = DEFAULT_TIMEOUT) -> list[JobOnNode]:
    confvalues.node_name("node", name)
    return parse_squeue(
        run(["squeue", "--nodelist", name, "--states", "RUNNING,COMPLETING,CONFIGURING", "--json"], timeout)
    )


def requeue(job_ids: Sequence[int], timeout: float = DEFAULT_TIMEOUT) -> None:
    if job_ids:
        run(["scontrol", "requeue", ",".join(str(j) for j in job_ids)], timeout)


def start_now(job_ids: Sequence[int], timeout: float = DEFAULT_TIMEOUT) -> None:
    """Make pending jobs eligible now (slurmctld holds a requeued job back for about two minutes).

    Ref: https://slurm.schedmd.com/scontrol.html#OPT_StartTime
    """
    if job_ids:
        run(["scontrol", "update", f"JobId={','.join(str(j) for j in job_ids)}", "StartTime=now"], timeout)


def ping(timeout: float = DEFAULT_TIMEOUT) -> bool:
    """True when slurmctld answers. Ref: scontrol ping"""
    out = run(["scontrol", "ping"], timeout, ok_codes=(0, 1))
    return "UP" in out and "DOWN" not in out
