"""The pod roles, one module each, in one registry: what a role reads and the builder of its plan.

Each builder takes the validated ``StartInput``, what every pod has (``Common``) and the ``Adapters``,
and returns its ``RolePlan``; it reads no environment and starts nothing. The modules keep their heavy
imports (the cluster spec, the Slurm client, topology) inside the builder, so a worker loads none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slurmpod.entrypoints.roles import accounting, controller, db, login, restapi, worker

if TYPE_CHECKING:
    from slurmpod.entrypoints.inputs import Adapters, StartInput
    from slurmpod.entrypoints.startplan import Common, RolePlan

Builder = Callable[["StartInput", "Common", "Adapters"], "RolePlan"]


@dataclass(frozen=True, slots=True)
class Role:
    name: str
    build: Builder
    needs_controller: bool = False  # SLURMPOD_CONTROLLER is required: the pod talks to slurmctld
    auth: bool = True  # runs a Slurm daemon: munged or the auth/slurm key
    cluster_spec: bool = False  # reads the cluster spec
    node: bool = False  # registers a Slurm node (hardware, Slurm version, task environment)
    storage: bool = False  # slurmdbd: needs its StorageHost
    directory: bool = False  # users from the site's directory through SSSD, when its sssd.conf is mounted


# In wk.POD_ROLES order: the order pods start in the emulator.
REGISTRY: Mapping[str, Role] = {r.name: r for r in (
    Role("db", db.build, auth=False),
    Role("accounting", accounting.build, storage=True),
    Role("controller", controller.build, cluster_spec=True, directory=True),
    Role("worker", worker.build, needs_controller=True, node=True, directory=True),
    Role("login", login.build, needs_controller=True, directory=True),
    Role("restapi", restapi.build, needs_controller=True, directory=True),
)}
