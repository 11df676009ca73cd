"""The flavor table: which Debian suite, Python and Slurm each image flavor is built from.

A flavor names the Slurm release series; everything else (suite, Python, apt packages) follows
from it. Package names were checked against the Debian mirror's Packages files for both suites
(trixie: Slurm 24.11.5, Python 3.13; forky: Slurm 26.05.5, Python 3.14; both have sackd).
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmpod import well_known
from slurmpod.errors import BadInput

BASE = "base"
ROLES: tuple[str, ...] = well_known.IMAGE_ROLES  # controller, worker, login, accounting, restapi
ALL_IMAGES: tuple[str, ...] = (BASE, *ROLES)

# debootstrap scripts live here; bookworm's debootstrap has no `forky` script, and Debian's
# testing suites all use the `sid` script. Ref: debootstrap(8), SCRIPT argument.
DEBOOTSTRAP_SCRIPTS = "/usr/share/debootstrap/scripts"

# Installed in the base image, before the Slurm packages (which need a sysusers provider):
# systemd-standalone-sysusers satisfies `systemd | systemd-standalone-sysusers | systemd-sysusers`
# without pulling all of systemd into the image.
BASE_PACKAGES: tuple[str, ...] = (
    "bash",
    "procps",
    "iproute2",
    "python3",
    "systemd-standalone-sysusers",
    "munge",
    # scontrol/sinfo: every role's probes, prestop and health checks talk to slurmctld with them,
    # and it brings slurm-wlm-basic-plugins + libslurm, shared by all roles from one layer.
    "slurm-client",
)
# SSSD for users from the site's directory (started only where an sssd.conf is mounted), in base: the LDAP
# provider (Active Directory through it, ldap_schema = ad), NSS's sss module (added to nsswitch.conf by its
# package), and sss_ssh_authorizedkeys (sssd-common). Ref: sssd-ldap(5)
SSSD_PACKAGES: tuple[str, ...] = ("sssd-ldap", "libnss-sss")
# Debian's source package of SSSD_PACKAGES and of what they pin to their own version (sssd-common,
# libsss-*, python3-sss, ...). Where a flavor's sssd_suite is not its own suite, apt may take from that
# suite's main section the binaries of this source package and nothing else (base.Dockerfile).
# Ref: apt_preferences(5), "src:" in the Package field
SSSD_SOURCE_PACKAGE = "sssd"

# What the controller image installs only to compile job_submit_slurmpod.so and removes in the same layer:
# Slurm's headers (libslurm-dev), Python's (python3-dev, which brings libpython3.X: kept), a C compiler,
# setuptools, through which cffi compiles, and Debian's cffi (its backend, python3-cffi-backend, stays:
# the embedded interpreter imports it from Debian's path). Ref: https://cffi.readthedocs.io/en/stable/embedding.html
PLUGIN_BUILD_PACKAGES: tuple[str, ...] = ("gcc", "libc6-dev", "libslurm-dev", "python3-dev", "python3-setuptools",
                                          "python3-cffi")

# gpu/nvml: slurmd on a GPU worker finds its GPUs' files, cores and links through NVML (the controller's
# gres.conf says AutoDetect=nvml). It dlopen()s libnvidia-ml.so.1 itself and depends only on libc and the
# same Slurm build, so CPU-only workers load gpu/generic instead. Ref: https://slurm.schedmd.com/gres.conf.html#OPT_AutoDetect
NVML_PLUGIN_PACKAGE = "slurm-wlm-nvml-plugin"

# OpenMPI for `srun --mpi=pmix` (worker and login, on flavors whose Slurm has mpi/pmix): the MPI library
# (built against the same libpmix2 as Slurm's plugin) and ompi_info/mpirun. Ref: https://slurm.schedmd.com/mpi_guide.html#pmix
MPI_PACKAGES: tuple[str, ...] = ("libopenmpi40", "openmpi-bin")
# libucx0 depends on these ROCm runtimes (~210 MB with LLVM) for a transport module it dlopen()s only on AMD
# GPUs; the images provide the names with an empty local package instead (worker.Dockerfile).
MPI_STUBS: tuple[str, ...] = ("libamdhip64-5", "libhsa-runtime64-1")
# hwloc plugins (libhwloc-plugins, which libopenmpi40 and libpmix2t64 depend on) that every MPI rank, and
# the PMIx server slurmstepd starts for each `--mpi=pmix` step, would dlopen() with all they link, whether
# or not discovery uses them: OpenCL devices (libOpenCL), X displays through NV-CONTROL (libX11 and four
# more) and Intel oneAPI Level Zero (libze_loader, which loads four more, and libstdc++). None places a
# CPU, NIC or GPU for OpenMPI or PMIx: that is the pci plugin's, which stays, with xml_libxml. The images
# divert them to .../hwloc-unused, which HWLOC_PLUGINS_PATH can name (docs/mpi-and-ports.md).
# Ref: https://www.open-mpi.org/projects/hwloc/doc/ (Environment Variables: HWLOC_PLUGINS_PATH; Components and plugins)
HWLOC_UNUSED_PLUGINS: tuple[str, ...] = ("opencl", "gl", "levelzero")
# What the worker build installs to compile slurmpod-mpi-hello and removes in the same layer.
MPI_BUILD_PACKAGES: tuple[str, ...] = ("gcc", "libc6-dev", "libopenmpi-dev")
# What the worker build installs to compile its hook client (images/files/slurmpod_hook.c) and its SPANK
# plugin (slurmpod_spank.c, against the image's own spank.h) and removes in the same layer.
HOOK_BUILD_PACKAGES: tuple[str, ...] = ("gcc", "libc6-dev", "libslurm-dev")
# auth/jwt (auth_jwt.so, with libjwt): Debian ships it apart from slurm-wlm-basic-plugins.
# Ref: https://slurm.schedmd.com/jwt.html
JWT_PLUGIN_PACKAGE = "slurm-wlm-jwt-plugin"

# Third-party Python wheels installed into the venv of the base image (from the host wheelhouse).
PYTHON_REQUIREMENTS: tuple[str, ...] = ("jinja2", "pyyaml", "supervisor", "cffi", "nvidia-ml-py", "prometheus-client")
# In the wheelhouse too, installed by the controller image alone (slurmpod[kube]).
CONTROLLER_REQUIREMENTS: tuple[str, ...] = ("kubernetes",)


@dataclass(frozen=True, slots=True)
class Flavor:
    """One buildable flavor. Every field is a fact of the Debian suite it is built from."""

    name: str
    """The flavor name users type: the Slurm major.minor series, e.g. ``24.11``."""
    suite: str
    """Debian codename debootstrap and apt use."""
    python: str
    """Debian's python3 in that suite (major.minor); the wheelhouse targets it."""
    debootstrap_script: str | None
    """Script name under DEBOOTSTRAP_SCRIPTS passed as debootstrap's 4th argument, or None."""
    apt_check_valid_until: bool
    """False writes ``Acquire::Check-Valid-Until "false";`` into the base image's apt.conf.d:
    the mirror's Release file for a testing suite on a snapshot mirror has an expired
    Valid-Until date, and apt refuses it without this. Ref: apt.conf(5), Acquire::Check-Valid-Until."""
    has_sackd: bool
    """Whether the suite ships the `sackd` package (auth/slurm without munge on login nodes)."""
    nvml_plugin_suite: str
    """Debian suite whose contrib section has `slurm-wlm-nvml-plugin` (gpu/nvml, for gres.conf
    AutoDetect=nvml) at this flavor's exact Slurm version: forky's contrib lacks it, sid's has 26.05.5-1."""
    sssd_suite: str
    """Debian suite SSSD_PACKAGES come from. trixie: its own (2.10.1). forky has no sssd package (checked
    2026-12-03), so the 26.05 flavor takes sid's: sssd 2.13.1-3 there depends only on library versions forky
    has (samba 4.25.1, libldb2, python3 3.14), so exactly the 9 binaries of the `sssd` source package come
    from sid and its 32 dependencies from forky, nothing upgraded (libc6, Slurm's libraries unchanged).
    trixie's 2.10.1 cannot go into forky: its python3-sss needs python3 << 3.14."""
    mpi_pmix: bool = False
    """Whether Debian's Slurm of this suite has mpi/pmix (`mpi_pmix.so` in slurm-wlm-basic-plugins): trixie's
    24.11.5 does (with libpmix2t64 5.0.7); forky's and sid's 26.05.5-1 are built without it (checked 2026-12-01:
    no package of either ships mpi_pmix*.so). Only then do worker and login carry OpenMPI."""

    def mpi_packages(self, role: str) -> tuple[str, ...]:
        """OpenMPI packages a role image installs (none where Slurm has no mpi/pmix)."""
        return MPI_PACKAGES if self.mpi_pmix and role in ("worker", "login") else ()

    @property
    def python_tag(self) -> str:
        """``py313`` style tag naming the wheelhouse cache directory."""
        return "py" + self.python.replace(".", "")

    @property
    def debootstrap_script_path(self) -> str | None:
        if self.debootstrap_script is None:
            return None
        return f"{DEBOOTSTRAP_SCRIPTS}/{self.debootstrap_script}"

    def role_packages(self, role: str) -> tuple[str, ...]:
        """apt packages a role image adds on top of the base image.

        JWT_PLUGIN_PACKAGE is in every role that reads slurm.conf: with the chart's restapi on, slurm.conf
        says AuthAltTypes=auth/jwt, and slurmctld, slurmd, slurmdbd and every client command then load it.
        """
        if role == "controller":
            return ("slurmctld", JWT_PLUGIN_PACKAGE)
        if role == "worker":
            return ("slurmd", "openssh-server", "libpam-slurm-adopt", NVML_PLUGIN_PACKAGE, JWT_PLUGIN_PACKAGE)
        if role == "login":
            # openssh-client: users ssh from here into their allocations (pam_slurm_adopt on the workers);
            # forky's openssh-server does not pull it in.
            return ("slurm-client", *(("sackd",) if self.has_sackd else ()), "openssh-server", "openssh-client",
                    JWT_PLUGIN_PACKAGE)
        if role == "accounting":
            # slurmdbd, and MariaDB for the db pod (mariadb-client: mariadb-install-db's helpers, mariadb-admin).
            return ("slurmdbd", "mariadb-server", "mariadb-client", JWT_PLUGIN_PACKAGE)
        if role == "restapi":
            return ("slurmrestd", *(("sackd",) if self.has_sackd else ()), JWT_PLUGIN_PACKAGE)
        if role == BASE:
            return (*BASE_PACKAGES, *SSSD_PACKAGES)
        raise BadInput.one("role", role, f"expected one of {', '.join(ALL_IMAGES)}")


FLAVORS: dict[str, Flavor] = {
    "24.11": Flavor(
        name="24.11",
        suite="trixie",
        python="3.13",
        debootstrap_script=None,
        apt_check_valid_until=True,
        has_sackd=True,
        nvml_plugin_suite="trixie",
        sssd_suite="trixie",
        mpi_pmix=True,
    ),
    "26.05": Flavor(
        name="26.05",
        suite="forky",
        python="3.14",
        debootstrap_script="sid",
        apt_check_valid_until=False,
        has_sackd=True,
        nvml_plugin_suite="sid",
        sssd_suite="sid",
    ),
}
DEFAULT_FLAVOR = "24.11"


def get(name: str) -> Flavor:
    try:
        return FLAVORS[name]
    except KeyError:
        raise BadInput.one("flavor", name, f"expected one of {', '.join(sorted(FLAVORS))}") from None


def repository(role: str, prefix: str = well_known.IMAGE_REPOSITORY_PREFIX) -> str:
    """``slurmpod/worker``: the local repository name of a role's image."""
    return f"{prefix}{role}"


def tags(flavor: Flavor, version: str) -> tuple[str, str]:
    """The two tags every image gets: ``<flavor>`` and ``<flavor>-<slurmpod version>``."""
    return (flavor.name, f"{flavor.name}-{version}")


def rootfs_image(flavor: Flavor, prefix: str = well_known.IMAGE_REPOSITORY_PREFIX) -> str:
    """Name of the debootstrapped root file system imported into Docker."""
    return f"{prefix}rootfs:{flavor.suite}"
