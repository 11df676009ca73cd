"""The site's sssd.conf, from its Secret: checked like the keys, then parsed and validated before start.

Users and groups come from the organisation's directory (LDAP, Active Directory) through SSSD on the
login, worker, controller and restapi pods (docs/directory.md). Without the Secret the pod keeps the
image's local users and nothing here runs. A bad file stops pod start with exit 2 naming the file and the
key, so SSSD never starts on a config it would reject or misread.
Ref: sssd.conf(5) (https://man.archlinux.org/man/sssd.conf.5), sssd-ldap(5)
"""

from __future__ import annotations

import configparser
import os
from dataclasses import dataclass
from pathlib import Path

from slurmpod.entrypoints import secrets
from slurmpod.errors import BadInput, Problem

FIELD = "sssd.conf secret"
MAX_BYTES = 64 << 10
# The providers these images carry (sssd-ldap). Active Directory is reached through it with
# `ldap_schema = ad` (docs/directory.md); sssd-ad and sssd-ipa are not installed.
ID_PROVIDERS = ("ldap",)
# No systemd in a pod to start SSSD's responders on demand: sssd starts those listed in `services`.
# nss resolves users and groups; ssh answers sss_ssh_authorizedkeys (sshd's AuthorizedKeysCommand).
# Ref: sssd.conf(5), the [sssd] section, `services`
NEEDED_SERVICES = {"login": ("nss", "ssh"), "worker": ("nss", "ssh"), "controller": ("nss",), "restapi": ("nss",)}


@dataclass(frozen=True, slots=True)
class SssdConf:
    text: str
    source: str
    domains: tuple[str, ...]
    services: tuple[str, ...]


def _list(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _key(path: Path, section: str, option: str = "") -> str:
    return f"{path} [{section}]" + (f" {option}" if option else "")


def parse(text: str, path: Path, role: str) -> SssdConf:
    """Validate sssd.conf's text; BadInput lists every problem, each naming the file, section and key."""
    if "\x00" in text or "\r" in text:
        raise BadInput.one(str(path), repr("\x00" if "\x00" in text else "\r"), "a NUL or carriage return byte")
    ini = configparser.ConfigParser(interpolation=None, strict=True, empty_lines_in_values=False,
                                    default_section="\x00none")
    try:
        ini.read_string(text, source=str(path))
    except configparser.Error as exc:  # duplicate section or option, a line before any section
        first = str(exc).splitlines()[0]
        raise BadInput.one(str(path), first[:200], "not an sssd.conf (INI) file") from None
    problems: list[Problem] = []
    if not ini.has_section("sssd"):
        raise BadInput.one(_key(path, "sssd"), "", "missing: the [sssd] section names the domains")
    domains = _list(ini.get("sssd", "domains", fallback=""))
    if not domains:
        problems.append(Problem(_key(path, "sssd", "domains"), ini.get("sssd", "domains", fallback=""),
                                "no domains: list the [domain/NAME] sections to use"))
    services = _list(ini.get("sssd", "services", fallback=""))
    missing = [s for s in NEEDED_SERVICES[role] if s not in services]
    if missing:
        problems.append(Problem(_key(path, "sssd", "services"), ", ".join(services),
                                f"must list {', '.join(missing)} on {role} pods (no systemd here to start "
                                "responders on demand)"))
    for name in domains:
        section = f"domain/{name}"
        if not ini.has_section(section):
            problems.append(Problem(_key(path, section), "", f"missing: [sssd] domains names {name}"))
            continue
        provider = ini.get(section, "id_provider", fallback="")
        if provider not in ID_PROVIDERS:
            why = ("not installed: reach Active Directory with id_provider = ldap and ldap_schema = ad"
                   if provider == "ad" else f"must be one of {', '.join(ID_PROVIDERS)}")
            problems.append(Problem(_key(path, section, "id_provider"), provider, why))
        cacert = ini.get(section, "ldap_tls_cacert", fallback="")
        if cacert and not Path(cacert).is_file():
            problems.append(Problem(_key(path, section, "ldap_tls_cacert"), cacert,
                                    "no such file (is the CA ConfigMap mounted? sssd.caConfigMap)"))
    if problems:
        raise BadInput(problems)
    return SssdConf(text, str(path), domains, services)


def read(path: Path, role: str, binary: Path) -> SssdConf | None:
    """The mounted sssd.conf, validated; None when there is none (an optional Secret mounts as an empty
    directory). Root's and not readable by others, as sssd itself demands of its config. ``binary``: the
    image's sssd, refused when absent rather than started without the users the site asked for."""
    if not os.path.lexists(path):  # a dangling link is a broken mount, not "no Secret": refused below
        return None
    if not binary.is_file():
        raise BadInput.one(FIELD, str(path), f"this image has no SSSD ({binary}); run slurmpod's images, "
                           "which carry it, or turn sssd.enabled off")
    st = secrets.secret_file_stat(path, FIELD)
    if st.st_uid != 0:
        raise BadInput.one(f"{FIELD} owner", st.st_uid, "must be root (uid 0): sssd refuses another owner")
    if st.st_size == 0 or st.st_size > MAX_BYTES:
        raise BadInput.one(FIELD, str(path), f"{st.st_size} bytes: must be 1 to {MAX_BYTES}")
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise BadInput.one(FIELD, str(path), f"cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise BadInput.one(FIELD, str(path), "not UTF-8") from None
    return parse(text, path, role)
