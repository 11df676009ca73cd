"""The flavor table: suites, Python versions and package sets checked against the Debian mirror."""

from __future__ import annotations

import pytest

from slurmpod.errors import BadInput
from slurmpod_host.images import flavors


def test_table_matches_the_contract() -> None:
    assert set(flavors.FLAVORS) == {"24.11", "26.05"}
    trixie, forky = flavors.get("24.11"), flavors.get("26.05")
    assert (trixie.suite, trixie.python, trixie.python_tag) == ("trixie", "3.13", "py313")
    assert (forky.suite, forky.python, forky.python_tag) == ("forky", "3.14", "py314")
    assert trixie.debootstrap_script_path is None
    assert forky.debootstrap_script_path == "/usr/share/debootstrap/scripts/sid"
    # The expired snapshot Release file: an explicit flavor option, not a global apt setting.
    assert trixie.apt_check_valid_until is True
    assert forky.apt_check_valid_until is False


@pytest.mark.parametrize("name", sorted(flavors.FLAVORS))
def test_role_packages(name: str) -> None:
    f = flavors.get(name)
    jwt = flavors.JWT_PLUGIN_PACKAGE
    assert f.role_packages("controller") == ("slurmctld", jwt)
    assert f.role_packages("worker") == ("slurmd", "openssh-server", "libpam-slurm-adopt", "slurm-wlm-nvml-plugin",
                                         jwt)
    # auth/jwt wherever slurm.conf is read: the chart's restapi.enabled puts AuthAltTypes=auth/jwt in it
    for role in flavors.ROLES:
        assert jwt in f.role_packages(role), role
    assert {"slurmdbd", "mariadb-server"} <= set(f.role_packages("accounting"))
    assert "slurmrestd" in f.role_packages("restapi")
    login = f.role_packages("login")
    assert {"slurm-client", "openssh-server", "openssh-client"} <= set(login)  # users ssh to their jobs
    assert ("sackd" in login) is f.has_sackd
    base = f.role_packages("base")
    assert {"munge", "python3", "bash", "procps", "iproute2", "slurm-client", "sssd-ldap", "libnss-sss"} <= set(base)
    # No GPU libraries anywhere: the NVIDIA container toolkit mounts the host's (gpu/nvml dlopen()s them).
    for role in flavors.ALL_IMAGES:
        assert not [p for p in f.role_packages(role) if "nvidia" in p or "cuda" in p]


def test_unknown_names_are_bad_input() -> None:
    with pytest.raises(BadInput, match=r"flavor='25\.05'"):
        flavors.get("25.05")
    with pytest.raises(BadInput, match="role='gpu'"):
        flavors.get("24.11").role_packages("gpu")


def test_names_and_tags() -> None:
    f = flavors.get("26.05")
    assert flavors.repository("worker") == "slurmpod/worker"
    assert flavors.tags(f, "0.1.0") == ("26.05", "26.05-0.1.0")
    assert flavors.rootfs_image(f) == "slurmpod/rootfs:forky"


def test_nvml_plugin_suite_has_the_flavors_slurm() -> None:
    # Debian contrib (checked 2026-12-01): trixie 24.11.5-2; forky has none, sid 26.05.5-1.
    assert {n: f.nvml_plugin_suite for n, f in flavors.FLAVORS.items()} == {"24.11": "trixie", "26.05": "sid"}


def test_sssd_suite_is_the_flavors_own_where_debian_has_sssd() -> None:
    # Debian main (checked 2026-12-03): trixie sssd 2.10.1; forky none, sid 2.13.1-3 on forky's libraries.
    assert {n: f.sssd_suite for n, f in flavors.FLAVORS.items()} == {"24.11": "trixie", "26.05": "sid"}
