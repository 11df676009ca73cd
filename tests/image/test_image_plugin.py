"""The controller image carries job_submit_slurmpod.so built for its own Slurm, and nothing that built it.

slurmctld loads a plugin only when the plugin's exported ``plugin_version`` equals its own
SLURM_VERSION_NUMBER, micro version included. Ref: https://slurm.schedmd.com/job_submit_plugins.html
The check reads the symbol the way the loader would see it: libslurmfull first (the plugin calls
slurm_xstrdup and friends from it), then the plugin, then ``plugin_version`` from its data.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from slurmpod import well_known as wk
from slurmpod_host.images import flavors
from slurmpod_host.images.flavors import Flavor

pytestmark = [pytest.mark.docker, pytest.mark.image]

PLUGIN_DIR = "/usr/lib/x86_64-linux-gnu/slurm-wlm"  # Debian's PluginDir on amd64
READ_PLUGIN = f"""
import ctypes, json
ctypes.CDLL("{PLUGIN_DIR}/libslurmfull.so", mode=ctypes.RTLD_GLOBAL)
lib = ctypes.CDLL("{PLUGIN_DIR}/{wk.PLUGIN_FILE}")
print(json.dumps({{"version": ctypes.c_uint32.in_dll(lib, "plugin_version").value,
                  "type": (ctypes.c_char * 64).in_dll(lib, "plugin_type").value.decode()}}))
"""


def slurm_version_number(debian_version: str) -> int:
    """SLURM_VERSION_NUMBER of a Debian package version such as ``24.11.5-4+deb13u1``.
    Ref: slurm/slurm_version.h, SLURM_VERSION_NUM(a,b,c) = (a << 16) + (b << 8) + c."""
    major, minor, micro = (int(x) for x in debian_version.split("-", maxsplit=1)[0].split(".")[:3])
    return (major << 16) + (minor << 8) + micro


@pytest.mark.parametrize(("debian", "number"), [("24.11.5-4+deb13u1", 0x180B05), ("26.05.5-1", 0x1A0505)],
                         ids=["trixie", "forky"])
def test_slurm_version_number(debian: str, number: int) -> None:
    assert slurm_version_number(debian) == number


def test_plugin_version_matches_the_installed_slurmctld(hosts: dict[str, Any], flavor: Flavor) -> None:
    host = hosts["controller"]
    installed = host.package("slurmctld").version
    assert installed.startswith(flavor.name + ".")
    out = host.run(f"/opt/slurmpod/bin/python -c '{READ_PLUGIN}'")
    assert out.rc == 0, out.stderr
    found = json.loads(out.stdout)
    print(f"slurmctld {installed}: plugin_version {found['version']:#x}")
    assert found == {"version": slurm_version_number(installed), "type": wk.PLUGIN_TYPE}


def test_plugin_links_the_venvs_libpython(hosts: dict[str, Any]) -> None:
    host = hosts["controller"]
    pyver = host.check_output("/opt/slurmpod/bin/python -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'")
    assert host.package(f"libpython{pyver}").is_installed  # the plugin dlopen()s it in init()
    # the embedded interpreter imports _cffi_backend from Debian's path, before any of our code runs
    assert host.run("/usr/bin/python3 -c 'import _cffi_backend'").rc == 0
    assert host.file(f"{PLUGIN_DIR}/{wk.PLUGIN_FILE}").is_file


@pytest.mark.parametrize("package", flavors.PLUGIN_BUILD_PACKAGES)
def test_plugin_build_tools_are_gone(hosts: dict[str, Any], package: str) -> None:
    assert not hosts["controller"].package(package).is_installed, f"{package} left in the controller image"


def test_job_submit_lua_is_there_for_the_bench(hosts: dict[str, Any]) -> None:
    host = hosts["controller"]
    assert host.file(f"{PLUGIN_DIR}/job_submit_lua.so").is_file
    assert "not found" not in host.check_output(f"ldd {PLUGIN_DIR}/job_submit_lua.so")
