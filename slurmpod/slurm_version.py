"""Which Slurm is installed: read from dpkg's status file (no process start), or SLURMPOD_SLURM_VERSION."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from slurmpod.errors import BadInput
from slurmpod.well_known import ENV_SLURM_VERSION, SLURM_PLUGIN_GLOB

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SlurmVersion:
    major: int
    minor: int

    @classmethod
    def parse(cls, text: str, field: str = ENV_SLURM_VERSION) -> SlurmVersion:
        """'24.11', '25.05.1' or a Debian upstream version such as '24.11.5'; BadInput otherwise."""
        match = re.fullmatch(r"([0-9]{2})\.([0-9]{2})(\.[0-9A-Za-z~+.-]*)?", text.strip())
        if not match:
            raise BadInput.one(field, text, "not a Slurm version (MAJOR.MINOR[.MICRO], e.g. 24.11)")
        return cls(int(match[1]), int(match[2]))

    @property
    def node_topology(self) -> bool:
        """Nodes take `Topology=` from 25.05 (topology.yaml). Ref: https://slurm.schedmd.com/topology.yaml.html"""
        return (self.major, self.minor) >= (25, 5)

    @property
    def requeue_delay(self) -> bool:
        """`SchedulerParameters=requeue_delay=` sets a requeued job's hold apart from the credential
        lifetime from 25.11; before, the hold is `AuthInfo=cred_expire`.
        Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_requeue_delay"""
        return (self.major, self.minor) >= (25, 11)


DPKG_STATUS = Path("/var/lib/dpkg/status")
_PACKAGES = ("slurmd", "slurmctld", "slurm-client", "sackd")
DEFAULT = "24.11"


def from_dpkg_status(text: str) -> str | None:
    """The version of the first Slurm package found in a dpkg status file, e.g. '24.11.5'."""
    package = None
    for line in text.splitlines():
        if line.startswith("Package: "):
            package = line.split(": ", 1)[1].strip()
        elif line.startswith("Version: ") and package in _PACKAGES:
            version = line.split(": ", 1)[1].strip()
            return version.split(":", 1)[-1].split("-", 1)[0]
    return None


def detect(env: Mapping[str, str], status: Path = DPKG_STATUS) -> SlurmVersion:
    raw = env.get(ENV_SLURM_VERSION)
    if raw:
        return SlurmVersion.parse(raw)
    try:
        raw = from_dpkg_status(status.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        raw = None
    if not raw:
        log.info("no Slurm package found; assuming %s", DEFAULT)
        raw = DEFAULT
    return SlurmVersion.parse(raw, f"{status} Version")


def mpi_plugins(root: Path = Path("/")) -> frozenset[str]:
    """The MPI plugin types this image's Slurm has: ``mpi_pmix.so`` -> ``pmix`` (Debian keeps plugins in
    /usr/lib/<triplet>/slurm-wlm). Ref: https://slurm.schedmd.com/mpi_guide.html"""
    return frozenset(p.name[len("mpi_"):-len(".so")] for p in root.glob(SLURM_PLUGIN_GLOB))
