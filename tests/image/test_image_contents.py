"""What is inside each image: packages and Slurm version, users, Python, sshd, slurmpod, supervisord."""

from __future__ import annotations

import shlex
import uuid
from typing import Any

import pytest
from imagekit import CONTAINER_PREFIX

from slurmpod import well_known as wk
from slurmpod.prolog_epilog import scratch
from slurmpod.well_known import (
    EPILOG_BIN,
    HEALTHCHECK_BIN,
    HOOK_CLIENT_DIR,
    HOOK_FALLBACK_DIR,
    PROLOG_BIN,
    SPANK_PLUGIN,
)
from slurmpod_host.images import flavors
from slurmpod_host.images.engine import ImageInfo
from slurmpod_host.images.flavors import (
    HOOK_BUILD_PACKAGES,
    HWLOC_UNUSED_PLUGINS,
    MPI_BUILD_PACKAGES,
    MPI_PACKAGES,
    MPI_STUBS,
    SSSD_SOURCE_PACKAGE,
    Flavor,
)

pytestmark = [pytest.mark.docker, pytest.mark.image]

ALL = flavors.ALL_IMAGES
ROLES = flavors.ROLES
SLURM_PACKAGES = {"slurm-client", "slurm-wlm-basic-plugins", "slurmctld", "slurmd", "sackd",
                  "libpam-slurm-adopt"}
# The contract's fixed IDs, spelled out here so a drift in well_known.py fails a test too.
USERS = {"slurm": (64030, 64030, "/usr/sbin/nologin"), "munge": (64031, 64031, "/usr/sbin/nologin"),
         "researcher": (2000, 2000, "/bin/bash")}
# The worker's nice(1) starts the scratch sweeper (prolog_epilog/scratch.py).
DAEMONS = {"controller": ["/usr/sbin/slurmctld"], "worker": ["/usr/sbin/slurmd", "/usr/sbin/sshd", scratch.NICE_BIN],
           "login": ["/usr/sbin/sshd", "/usr/bin/sbatch", "/usr/bin/srun"],
           "accounting": ["/usr/sbin/slurmdbd", "/usr/sbin/mariadbd", "/usr/bin/mariadb-install-db",
                          "/usr/bin/mariadb-admin"],
           "restapi": ["/usr/sbin/slurmrestd", "/usr/sbin/sackd"]}
# What images/dockerfiles/base.Dockerfile writes, for its SSSD install alone, where SSSD comes from another
# suite than the flavor's.
SSSD_PREFERENCES = "/etc/apt/preferences.d/slurmpod-sssd"
SSSD_SOURCES = "/etc/apt/sources.list.d/slurmpod-sssd.list"
# Binaries of Debian's sssd source package that sssd-ldap and libnss-sss bring (checked 2026-12-03 in trixie's
# 2.10.1 and sid's 2.13.1: the same nine).
SSSD_BINARIES = {"sssd-ldap", "sssd-common", "sssd-krb5-common", "libnss-sss", "libpam-sss", "libsss-certmap0",
                 "libsss-idmap0", "libsss-nss-idmap0", "python3-sss"}


@pytest.mark.parametrize("name", ALL)
def test_packages_installed_with_the_flavors_slurm(name: str, hosts: dict[str, Any],
                                                   flavor: Flavor) -> None:
    host = hosts[name]
    wanted = set(flavor.role_packages("base")) | set(flavor.role_packages(name))
    for pkg in sorted(wanted):
        assert host.package(pkg).is_installed, f"{pkg} missing from {name}"
        if pkg in SLURM_PACKAGES:
            assert host.package(pkg).version.startswith(flavor.name + "."), (pkg, host.package(pkg).version)
    assert not host.package("systemd").is_installed, "sysusers must come from systemd-standalone-sysusers"


@pytest.mark.parametrize("name", ROLES)
def test_role_daemons_present(name: str, hosts: dict[str, Any]) -> None:
    for path in DAEMONS[name]:
        assert hosts[name].file(path).is_file, path


@pytest.mark.parametrize("name", ALL)
def test_users_have_the_fixed_ids(name: str, hosts: dict[str, Any]) -> None:
    host = hosts[name]
    for user, (uid, gid, shell) in USERS.items():
        u = host.user(user)
        assert (u.uid, u.gid, u.shell) == (uid, gid, shell), user
        assert host.group(user).gid == gid
    assert host.user("researcher").home == "/home/researcher"
    assert not host.file("/home/researcher").exists, "/home is a volume: no home in the image"


def test_user_entries_identical_in_every_image(hosts: dict[str, Any]) -> None:
    def entries(name: str) -> tuple[str, ...]:
        cmd = "getent passwd slurm munge researcher; getent group slurm munge researcher"
        out = hosts[name].check_output(cmd)
        return tuple(out.splitlines())

    first = entries("base")
    assert len(first) == 6
    for name in ROLES:
        assert entries(name) == first, name


@pytest.mark.parametrize("name", ALL)
def test_python_venv_and_supervisord(name: str, hosts: dict[str, Any], flavor: Flavor) -> None:
    host = hosts[name]
    py = "/opt/slurmpod/bin/python"
    ver = host.check_output(f"{py} -c 'import sys; print(*sys.version_info[:2], sep=\".\")'")
    assert ver == flavor.python
    assert host.run("/opt/slurmpod/bin/python -c 'import jinja2, yaml, supervisor, cffi, pynvml'").rc == 0
    link = host.file("/usr/local/bin/supervisord")
    assert link.is_symlink and link.linked_to == "/opt/slurmpod/bin/supervisord"
    assert host.run("supervisord --version").rc == 0
    assert not host.package("python3-pip").is_installed


@pytest.mark.parametrize("name", ROLES)
def test_slurmpod_installed_and_runs(name: str, hosts: dict[str, Any]) -> None:
    host = hosts[name]
    assert host.run("/opt/slurmpod/bin/python -c 'import slurmpod.cli, slurmpod.well_known'").rc == 0
    link = host.file("/usr/local/bin/slurmpod")
    assert link.is_symlink and link.linked_to == "/opt/slurmpod/bin/slurmpod"
    helped = host.run("slurmpod --help")
    assert helped.rc == 0 and "entrypoint" in helped.stdout


def test_base_has_no_slurmpod(hosts: dict[str, Any]) -> None:
    # Deliberate: slurmpod is each role's last layer (fast Python-only rebuilds).
    assert hosts["base"].run("/opt/slurmpod/bin/python -c 'import slurmpod'").rc != 0
    assert not hosts["base"].file("/usr/local/bin/slurmpod").exists


@pytest.mark.parametrize("name", ["worker", "login"])
def test_sshd_drop_in_is_effective(name: str, hosts: dict[str, Any]) -> None:
    host = hosts[name]
    conf = host.file("/etc/ssh/sshd_config.d/slurmpod.conf")
    assert conf.is_file
    for line in ("PasswordAuthentication no", "KbdInteractiveAuthentication no", "PermitRootLogin no",
                 "UsePAM yes"):
        assert conf.contains(f"^{line}$"), line
    # What sshd would really run with (host keys made here, in the throw-away container only,
    # as the entrypoint does at pod start).
    effective = host.check_output("ssh-keygen -A >/dev/null && mkdir -p /run/sshd && sshd -T")
    # Keys are lower case up to OpenSSH 10.0 (trixie) and CamelCase in 10.6 (forky).
    settings = {k.lower(): v for k, v in (ln.split(" ", 1) for ln in effective.splitlines() if " " in ln)}
    assert settings["passwordauthentication"] == "no"
    assert settings["kbdinteractiveauthentication"] == "no"
    assert settings["permitrootlogin"] == "no"
    assert settings["usepam"] == "yes"
    # no forwarding of any kind: a pod is not a jump host into the cluster network
    assert settings["allowtcpforwarding"] == "no"
    assert settings["allowagentforwarding"] == "no"
    assert settings["x11forwarding"] == "no"
    assert settings["allowstreamlocalforwarding"] == "no"
    assert settings["permittunnel"] == "no"


def _pam_stack(host: Any, service: str) -> list[str]:
    """The PAM lines of ``service`` with every ``@include`` expanded, comments dropped."""
    lines: list[str] = []
    for raw in host.file(f"/etc/pam.d/{service}").content_string.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("@include"):
            lines += _pam_stack(host, line.split()[1])
        elif line:
            lines.append(line)
    return lines


def test_worker_sshd_account_stack_ends_with_pam_slurm_adopt(hosts: dict[str, Any]) -> None:
    """ssh into allocations: pam_slurm_adopt decides last in the account stack, and pam_systemd, which
    would move the session out of the job's cgroup, is nowhere in sshd's stack.
    Ref: https://slurm.schedmd.com/pam_slurm_adopt.html#PAM_CONFIG"""
    host = hosts["worker"]
    stack = _pam_stack(host, "sshd")
    account = [x.split() for x in stack if x.split()[0] == "account"]
    assert account[-1][1:3] == ["required", "pam_slurm_adopt.so"], account
    # a session it cannot contain (no Contain) or cannot decide on is refused, not let in
    assert set(account[-1][3:]) == {"action_no_jobs=deny", "action_adopt_failure=deny",
                                    "action_generic_failure=deny"}, account
    assert not [x for x in stack if "pam_systemd" in x], stack
    assert host.file("/usr/lib/x86_64-linux-gnu/security/pam_slurm_adopt.so").is_file


@pytest.mark.parametrize("name", ["login", "worker", "controller", "restapi"])
def test_sssd_serves_users_through_nss_only_and_sshds_stack_is_unchanged(name: str, hosts: dict[str, Any]) -> None:
    """SSSD is installed but off until an sssd.conf is mounted: NSS asks it after the local files, no PAM
    stack has pam_sss (sshd authenticates keys; pam_unix's account check takes NSS users), and sshd's
    session stack ends with the include pod start fills when homes are to be made."""
    host = hosts[name]
    if name in ("login", "worker"):
        assert host.file("/etc/pam.d/sshd").content_string.splitlines()[-1 if name == "login" else -2] == \
            "@include slurmpod-mkhomedir"
        assert _pam_stack(host, "slurmpod-mkhomedir") == []  # shipped empty
    for db in ("passwd", "group"):
        (line,) = [x for x in host.file("/etc/nsswitch.conf").content_string.splitlines() if x.startswith(f"{db}:")]
        assert line.split()[1:] == ["files", "sss"], line
    assert host.file(wk.SSSD_BINARY).is_file and host.file("/usr/bin/sss_ssh_authorizedkeys").is_file
    assert not host.file(wk.SSSD_CONF).exists
    for service in ("common-auth", "common-account", "common-session", "common-password"):
        assert not [x for x in _pam_stack(host, service) if "pam_sss" in x or "pam_pwquality" in x], service


def test_sssd_is_one_build_of_debians_sssd_and_loads_with_what_the_image_has(hosts: dict[str, Any]) -> None:
    """The nine binaries of Debian's sssd source package (on 26.05 from sid, pinned to them alone), one version;
    every library sssd and its plugins load is in the image, and no later layer's apt sees another suite."""
    host = hosts["base"]
    listed = host.run("dpkg-query -W -f '${source:Package} ${Package} ${Version}\\n'")
    assert listed.rc == 0, listed.stderr
    built = {tuple(line.split()[1:]) for line in listed.stdout.splitlines() if line.split()[0] == SSSD_SOURCE_PACKAGE}
    assert {name for name, _ in built} == SSSD_BINARIES, built
    assert len({version for _, version in built}) == 1, built
    loads = host.run("for f in /usr/sbin/sssd /usr/libexec/sssd/* /usr/lib/x86_64-linux-gnu/sssd/*.so "
                     "/usr/lib/x86_64-linux-gnu/sssd/modules/*.so /usr/lib/x86_64-linux-gnu/libnss_sss.so.2 "
                     "/usr/bin/sss_ssh_authorizedkeys; do ldd $f 2>/dev/null | grep 'not found'; done")
    assert loads.stdout == "", loads.stdout
    assert host.run(f"{wk.SSSD_BINARY} --version").rc == 0
    assert not host.file(SSSD_PREFERENCES).exists and not host.file(SSSD_SOURCES).exists


@pytest.mark.parametrize("name", ALL)
def test_no_host_tools_in_the_pod_images(name: str, hosts: dict[str, Any]) -> None:
    """The images carry the pod side only: no Docker SDK, no Dockerfiles, no emulator/bench/builder."""
    host = hosts[name]
    python = "/opt/slurmpod/bin/python"
    for module in ("docker", "slurmpod_host", "slurmpod.cluster", "slurmpod.bench", "slurmpod.images"):
        probe = host.run(f"{python} -c 'import {module}'")
        assert probe.rc == 1 and "ModuleNotFoundError" in probe.stderr, (module, probe.stderr)
    assert host.check_output("find / -xdev -iname '*Dockerfile*' -print -quit 2>/dev/null") == ""
    if name != "base":  # slurmpod itself is in the role images only
        found = host.check_output(f"{python} -c 'import slurmpod, os; print(os.path.dirname(slurmpod.__file__))'")
        listing = host.check_output(f"ls {found}")
        assert "cluster" not in listing.split() and "bench" not in listing.split()
        assert "entrypoints" in listing.split()


@pytest.mark.parametrize("name", ALL)
def test_no_secrets_in_the_file_system(name: str, images: dict[str, ImageInfo], docker_client: Any) -> None:
    # A fresh container: the sshd test above generates host keys in the shared ones.
    fresh = docker_client.containers.create(images[name].id, entrypoint=["sh", "-c"],
                                            command=["ls -A /etc/munge /etc/ssh 2>&1; true"],
                                            network_disabled=True,
                                            name=f"{CONTAINER_PREFIX}{name}-secrets-{uuid.uuid4().hex[:8]}")
    try:
        fresh.start()
        assert fresh.wait(timeout=60)["StatusCode"] == 0
        listing = fresh.logs(stdout=True, stderr=True).decode()
    finally:
        fresh.remove(force=True)
    assert "munge.key" not in listing
    assert "ssh_host_" not in listing


def test_worker_hooks_are_the_thin_client_and_their_python_fallbacks_and_the_spank_plugin(
        hosts: dict[str, Any]) -> None:
    """One compiled client under the three names Slurm calls, each falling back to the wheel's Python
    hook of the same name; a SPANK plugin built for this Slurm (the task environment, the pod's CPUs); the
    compiler and Slurm's headers gone with their layer."""
    host = hosts["worker"]
    inodes = {host.check_output(f"stat -c %i {path}") for path in (PROLOG_BIN, EPILOG_BIN, HEALTHCHECK_BIN)}
    assert len(inodes) == 1, "the three hooks are links to one program"
    assert host.file(PROLOG_BIN).mode & 0o111 and host.check_output(f"head -c 4 {PROLOG_BIN} | od -An -c").split() \
        == ["177", "E", "L", "F"]
    for name in ("slurmpod-prolog", "slurmpod-epilog", "slurmpod-healthcheck"):
        assert host.file(f"{HOOK_FALLBACK_DIR}/{name}").is_file, name
    # What Slurm's plugin loader checks: plugin_type "spank", plugin_version this Slurm's (SPANK_PLUGIN in
    # slurm/spank.h), the hook it calls in each task and the one slurmd calls at its start (the pod's CPUs).
    # Ref: https://slurm.schedmd.com/spank.html
    probe = ("import ctypes, os, sys; lib = ctypes.CDLL(sys.argv[1], os.RTLD_LAZY); "
             "print((ctypes.c_char * 6).in_dll(lib, 'plugin_type').value.decode(), "
             "ctypes.c_uint.in_dll(lib, 'plugin_version').value, hasattr(lib, 'slurm_spank_task_init'), "
             "hasattr(lib, 'slurm_spank_init'), hasattr(lib, 'slurmpod_task_env'), "
             "hasattr(lib, 'slurmpod_take_pod_cpus'))")
    kind, version, *exported = host.check_output(f"/opt/slurmpod/bin/python -c {shlex.quote(probe)} {SPANK_PLUGIN}"
                                                 ).split()
    major, minor, micro = (int(x) for x in host.check_output("slurmd -V").split()[1].split(".")[:3])
    assert (kind, int(version)) == ("spank", (major << 16) | (minor << 8) | micro)
    assert exported == ["True", "True", "False", "False"]  # the two hooks; the helpers stay inside
    assert not host.file(f"{HOOK_CLIENT_DIR}/slurmpod-task-prolog").exists
    for pkg in HOOK_BUILD_PACKAGES:
        assert not host.package(pkg).is_installed, pkg
    assert host.run("command -v gcc cc").rc != 0
    # With no agent socket the client runs the Python hook, which here refuses a bad setting, naming it
    # (exit 2): the Python hook is what answered.
    done = host.run(f"SLURMPOD_EXPECTED_GPUS=many {PROLOG_BIN}")
    assert done.rc == 2 and "SLURMPOD_EXPECTED_GPUS" in done.stderr, (done.rc, done.stderr)


@pytest.mark.parametrize(("name", "daemon"), [("worker", "slurmd"), ("controller", "slurmctld")])
def test_the_prep_plugin_is_built_for_this_slurm_in_both_daemons_images(name: str, daemon: str,
                                                                          hosts: dict[str, Any]) -> None:
    """PrEpPlugins=slurmpod: slurmd and slurmctld both load prep_slurmpod.so from Slurm's plugin directory.
    What Slurm's plugin loader checks: plugin_type, plugin_version (this Slurm's, micro included) and the
    prep_p_* calls (src/interfaces/prep.c). The agent client inside it is not exported into the daemon."""
    host = hosts[name]
    plugindir = host.check_output("dirname $(dpkg -L slurm-wlm-basic-plugins | grep /prep_script.so$)")
    calls = ["prep_p_register_callbacks", "prep_p_prolog", "prep_p_epilog", "prep_p_prolog_slurmctld",
             "prep_p_epilog_slurmctld", "prep_p_required"]
    probe = ("import ctypes, os, sys; lib = ctypes.CDLL(sys.argv[1], os.RTLD_LAZY); "
             "print((ctypes.c_char * 14).in_dll(lib, 'plugin_type').value.decode(), "
             "ctypes.c_uint.in_dll(lib, 'plugin_version').value, "
             f"all(hasattr(lib, c) for c in {calls!r}), hasattr(lib, 'agent_ask'))")
    kind, version, has_calls, leaks = host.check_output(
        f"/opt/slurmpod/bin/python -c {shlex.quote(probe)} {plugindir}/{wk.PREP_PLUGIN_FILE}").split()
    major, minor, micro = (int(x) for x in host.check_output(f"{daemon} -V").split()[1].split(".")[:3])
    assert (kind, int(version), has_calls, leaks) == (
        f"prep/{wk.PREP_PLUGIN}", (major << 16) | (minor << 8) | micro, "True", "False")


def test_worker_fits_the_size_budget(images: dict[str, ImageInfo]) -> None:
    assert images["worker"].size <= 450 * 1_000_000, f"worker is {images['worker'].size / 1e6:.0f} MB"


@pytest.mark.parametrize("name", ["worker", "login"])
def test_openmpi_matches_slurms_mpi_pmix(name: str, hosts: dict[str, Any], flavor: Flavor) -> None:
    """OpenMPI where Slurm has mpi/pmix (24.11), none where it has not (26.05); never AMD's ROCm stack."""
    host = hosts[name]
    has_pmix = host.file("/usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix.so").exists
    assert has_pmix == flavor.mpi_pmix
    for pkg in MPI_PACKAGES:
        assert host.package(pkg).is_installed == flavor.mpi_pmix, pkg
    for pkg in (*MPI_STUBS, "libllvm17t64", *MPI_BUILD_PACKAGES):
        assert not host.package(pkg).is_installed, pkg
    assert host.file("/usr/local/bin/slurmpod-mpi-hello").exists == flavor.mpi_pmix
    if flavor.mpi_pmix:
        assert host.file("/etc/openmpi/openmpi-mca-params.conf").contains("btl_sm_single_copy_mechanism = none")
        # OpenMPI itself reads the start-up defaults: no libfabric probing, yield while waiting
        params = host.run("ompi_info --all --parsable").stdout.splitlines()
        for line in ("mca:btl:base:param:btl:value:^ofi,uct", "mca:mtl:base:param:mtl:value:^ofi",
                     "mca:mpi:base:param:mpi_yield_when_idle:value:true"):
            assert line in params, line
        # the MPI library and Slurm's plugin load the same libpmix
        assert host.run("ldd /usr/lib/x86_64-linux-gnu/libmpi.so.40 | grep -c 'libpmix.so.2 '").stdout.strip() == "1"
        # libmpi loads the libpsm2 stand-in, which has no clock measurement at load; Debian's libpsm2 is
        # still there for a job that sets LD_LIBRARY_PATH to it (Omni-Path, docs/mpi-and-ports.md)
        stand_in, real = "/usr/local/lib/x86_64-linux-gnu/libpsm2.so.2", "/usr/lib/x86_64-linux-gnu/libpsm2.so.2"
        assert f"libpsm2.so.2 => {stand_in} " in host.run("ldd /usr/lib/x86_64-linux-gnu/libmpi.so.40").stdout
        omnipath = host.run("LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu ldd /usr/lib/x86_64-linux-gnu/libmpi.so.40")
        assert f"libpsm2.so.2 => {real} " in omnipath.stdout
        assert host.package("libpsm2-2").is_installed
        hello = host.run("/usr/local/bin/slurmpod-mpi-hello")
        assert hello.rc == 0 and "rank=0 size=1" in hello.stdout, (hello.rc, hello.stdout, hello.stderr)


HWLOC_PLUGINS = "/usr/lib/x86_64-linux-gnu/hwloc"
HWLOC_UNUSED = "/usr/lib/x86_64-linux-gnu/hwloc-unused"


@pytest.mark.parametrize("name", ["worker", "login"])
def test_mpi_ranks_load_hwlocs_pci_plugin_and_not_its_display_or_gpu_runtime_ones(
        name: str, hosts: dict[str, Any], flavor: Flavor) -> None:
    """An MPI rank loads hwloc's pci plugin, not the GL, OpenCL and Level Zero ones (and what they link);
    HWLOC_PLUGINS_PATH brings those back, and the diversion is dpkg's, so an upgrade keeps them aside."""
    host = hosts[name]
    if not flavor.mpi_pmix:
        assert not host.file(HWLOC_UNUSED).exists
        return
    diversions = host.check_output("dpkg-divert --list '*hwloc_*'")
    for plugin in HWLOC_UNUSED_PLUGINS:
        assert not host.file(f"{HWLOC_PLUGINS}/hwloc_{plugin}.so").exists, plugin
        assert host.file(f"{HWLOC_UNUSED}/hwloc_{plugin}.so").exists, plugin
        assert f"{HWLOC_PLUGINS}/hwloc_{plugin}.so to {HWLOC_UNUSED}/hwloc_{plugin}.so by slurmpod" in diversions
    unused = ("hwloc_opencl.so", "libOpenCL.so.1", "hwloc_gl.so", "libX11.so.6", "hwloc_levelzero.so",
              "libze_loader.so.1")
    rank = host.run("LD_DEBUG=files /usr/local/bin/slurmpod-mpi-hello")
    assert rank.rc == 0 and "rank=0 size=1" in rank.stdout, (rank.rc, rank.stdout, rank.stderr[-2000:])
    assert "file=hwloc_pci.so " in rank.stderr.replace(f"{HWLOC_PLUGINS}/", "")
    for lib in unused:
        assert f"file={lib} " not in rank.stderr.replace(f"{HWLOC_PLUGINS}/", ""), lib
    every = host.run(f"HWLOC_PLUGINS_PATH={HWLOC_PLUGINS}:{HWLOC_UNUSED} LD_DEBUG=files "
                     "/usr/local/bin/slurmpod-mpi-hello")
    assert every.rc == 0, every.stderr[-2000:]
    for lib in ("libOpenCL.so.1", "libX11.so.6", "libze_loader.so.1"):
        assert f"file={lib} " in every.stderr, lib


# The worker's size budget: 300 MB with OpenMPI (24.11). 26.05's SSSD comes from sid and brings samba-libs
# and libicu78 (about 65 MB, for sssd_pam) that trixie's does not: docs/images.md.
WORKER_BUDGET_MB = {"24.11": 300, "26.05": 330}


def test_worker_stays_within_its_budget(images: dict[str, ImageInfo], flavor: Flavor) -> None:
    budget = WORKER_BUDGET_MB[flavor.name]
    size = images["worker"].size
    assert size <= budget * 1_000_000, f"worker is {size / 1e6:.0f} MB, budget {budget}"


def test_accounting_image_has_a_fixed_mysql_user_and_no_database(hosts: dict[str, Any]) -> None:
    host = hosts["accounting"]
    u = host.user("mysql")
    assert (u.uid, u.gid) == (64032, 64032)
    # the package's postinst database is removed in its own layer: the db pod initialises its volume
    assert host.run('test ! -e /var/lib/mysql || test -z "$(ls -A /var/lib/mysql)"').rc == 0
    assert not host.file("/etc/slurm/slurmdbd.conf").exists  # rendered at pod start, with the password
    owners = host.check_output("dpkg -S accounting_storage_mysql.so auth_jwt.so")  # storage and JWT plugins
    assert "slurm-wlm-mysql-plugin:" in owners and "slurm-wlm-jwt-plugin:" in owners, owners


def test_restapi_image_has_its_own_user_and_the_jwt_plugins(hosts: dict[str, Any]) -> None:
    host = hosts["restapi"]
    u = host.user("slurmrestd")
    assert (u.uid, u.gid, u.shell) == (64033, 64033, "/usr/sbin/nologin")
    owners = host.check_output("dpkg -S auth_jwt.so rest_auth_jwt.so")  # auth/jwt and rest_auth/jwt
    assert "slurm-wlm-jwt-plugin:" in owners and "slurm-wlm-basic-plugins:" in owners, owners
    assert not host.file("/etc/slurm/jwt_hs256.key").exists  # the key comes from a Secret at pod start


@pytest.mark.parametrize("name", ["controller", "worker", "login"])
def test_only_the_controller_carries_the_kubernetes_client(hosts: dict[str, Any], name: str) -> None:
    """slurmpod[kube] in the controller alone: its daemons talk to the API server, no other pod does."""
    found = hosts[name].run("/opt/slurmpod/bin/python -c 'import kubernetes'").rc == 0
    assert found is (name == "controller")
