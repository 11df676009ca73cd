"""The worker's health config (/etc/slurmpod/health.json): what the hooks cannot learn themselves.

slurmd starts Prolog, Epilog and HealthCheckProgram with an environment of its own (no SLURMPOD_* from
the pod), so the pod writes at start what it knows: the GPUs NVML saw, the auth type, the RealMemory it
registers with and the shared mounts it started with. Plain JSON (no comment line): JSON is YAML, and
the hooks read JSON without importing yaml, which would cost every prolog tens of milliseconds. The text
is deterministic (sorted keys).
Ref: https://slurm.schedmd.com/prolog_epilog.html (the environment slurmd gives the scripts)
"""

from __future__ import annotations

import json
from dataclasses import dataclass

# Shared volumes a job needs; required only when the pod started with them mounted.
SHARED_MOUNTS = ("/home",)


@dataclass(frozen=True, slots=True)
class NodeFacts:
    expected_gpus: int
    auth: str
    real_memory_mib: int
    required_mounts: tuple[str, ...]


def required(mounted: frozenset[str]) -> tuple[str, ...]:
    """The shared mounts this pod has now, which the checks then hold it to."""
    return tuple(m for m in SHARED_MOUNTS if m in mounted)


def render(facts: NodeFacts) -> str:
    doc = {
        "expected_gpus": facts.expected_gpus,
        "auth": facts.auth,
        "real_memory_mib": facts.real_memory_mib,
        "required_mounts": list(facts.required_mounts),
    }
    return json.dumps(doc, sort_keys=True, indent=2) + "\n"
