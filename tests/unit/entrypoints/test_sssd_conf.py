"""The site's sssd.conf: checked like the keys (mode, owner), validated before start, errors naming the key;
and what pod start adds with it (SSSD first, sshd's key lookup, homes on first login), nothing without it."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import podkit
import pytest

from slurmpod import well_known as wk
from slurmpod.entrypoints import programs, sssd_conf, start
from slurmpod.errors import BadInput

SLURMPOD = Path(sys.executable).with_name("slurmpod")

GOOD = """\
[sssd]
services = nss, ssh
domains = example

[domain/example]
id_provider = ldap
ldap_uri = ldap://ldap.example.org
ldap_search_base = dc=example,dc=org
cache_credentials = true
entry_cache_timeout = 60
"""


def _write(path: Path, text: str = GOOD, mode: int = 0o400) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def _read(path: Path, role: str) -> sssd_conf.SssdConf | None:
    binary = path.parent / "sssd-binary"
    binary.write_text("")
    return sssd_conf.read(path, role, binary)


def _problems(err: pytest.ExceptionInfo[BadInput]) -> list[tuple[str, str]]:
    return [(p.field, p.value) for p in err.value.problems]


def test_a_good_file_is_read_with_its_domains_and_services(tmp_path: Path) -> None:
    conf = _read(_write(tmp_path / "sssd.conf"), "login")
    assert conf is not None
    assert (conf.domains, conf.services, conf.text) == (("example",), ("nss", "ssh"), GOOD)


def test_no_secret_is_no_sssd(tmp_path: Path) -> None:
    assert _read(tmp_path / "sssd.conf", "worker") is None


def test_an_image_without_sssd_refuses_a_mounted_config(tmp_path: Path) -> None:
    path = _write(tmp_path / "sssd.conf")
    with pytest.raises(BadInput) as err:
        sssd_conf.read(path, "login", tmp_path / "no-sssd")
    assert _problems(err) == [("sssd.conf secret", str(path))]
    assert "this image has no SSSD" in str(err.value)
    assert sssd_conf.read(tmp_path / "absent.conf", "login", tmp_path / "no-sssd") is None  # nothing asked


def test_a_dangling_link_is_a_broken_mount_not_no_secret(tmp_path: Path) -> None:
    (tmp_path / "sssd.conf").symlink_to(tmp_path / "..data/sssd.conf")
    with pytest.raises(BadInput, match="missing"):
        _read(tmp_path / "sssd.conf", "worker")


@pytest.mark.parametrize("mode", [0o440, 0o640, 0o644, 0o604], ids=oct)
def test_a_group_or_world_readable_file_exits_2_naming_the_mode(tmp_path: Path, mode: int) -> None:
    with pytest.raises(BadInput) as err:
        _read(_write(tmp_path / "sssd.conf", mode=mode), "login")
    assert err.value.exit_code == 2
    assert _problems(err) == [("sssd.conf secret mode", f"{mode:04o}")]


def test_a_file_not_roots_exits_2_naming_the_owner(tmp_path: Path) -> None:
    path = _write(tmp_path / "sssd.conf")
    os.chown(path, 5001, 5001)
    with pytest.raises(BadInput) as err:
        _read(path, "login")
    assert _problems(err) == [("sssd.conf secret owner", "5001")]


def test_an_unreadable_path_exits_2_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "sssd.conf").mkdir()  # a Secret without the sssd.conf key, mounted with items: a directory
    with pytest.raises(BadInput) as err:
        _read(tmp_path / "sssd.conf", "login")
    assert _problems(err) == [("sssd.conf secret", str(tmp_path / "sssd.conf"))]


@pytest.mark.parametrize("data", [b"", b"\xff\xfe[sssd]\n", b"x" * (sssd_conf.MAX_BYTES + 1)],
                         ids=["empty", "not-utf8", "too-big"])
def test_an_empty_binary_or_huge_file_exits_2(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "sssd.conf"
    path.write_bytes(data)
    path.chmod(0o400)
    with pytest.raises(BadInput) as err:
        _read(path, "login")
    assert _problems(err) == [("sssd.conf secret", str(path))]


@pytest.mark.parametrize(("text", "field", "value"), [
    ("[nss]\n", "[sssd]", ""),
    ("[sssd]\nservices = nss, ssh\n", "[sssd] domains", ""),
    ("[sssd]\nservices = nss, ssh\ndomains = ,\n", "[sssd] domains", ","),
    ("[sssd]\nservices = nss, ssh\ndomains = a\n", "[domain/a]", ""),
    ("[sssd]\nservices = nss, ssh\ndomains = a\n[domain/a]\nid_provider = ad\n", "[domain/a] id_provider", "ad"),
    ("[sssd]\nservices = nss, ssh\ndomains = a\n[domain/a]\n", "[domain/a] id_provider", ""),
    ("[sssd]\nservices = nss\ndomains = a\n[domain/a]\nid_provider = ldap\n", "[sssd] services", "nss"),
    ("[sssd]\ndomains = a\n[domain/a]\nid_provider = ldap\n", "[sssd] services", ""),
    ("[sssd]\nservices = nss, ssh\ndomains = a\n[domain/a]\nid_provider = ldap\n"
     "ldap_tls_cacert = /nonexistent/ca.crt\n", "[domain/a] ldap_tls_cacert", "/nonexistent/ca.crt"),
], ids=["no-sssd-section", "no-domains", "empty-domains", "domain-without-section", "ad-provider",
        "no-id-provider", "no-ssh-responder", "no-services", "missing-ca"])
def test_a_bad_config_exits_2_naming_the_file_and_key(tmp_path: Path, text: str, field: str, value: str) -> None:
    path = _write(tmp_path / "sssd.conf", text)
    with pytest.raises(BadInput) as err:
        _read(path, "login")
    assert (f"{path} {field}", value) in _problems(err)


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    text = "[sssd]\ndomains = a, b\n[domain/a]\nid_provider = files\n"
    with pytest.raises(BadInput) as err:
        _read(_write(tmp_path / "sssd.conf", text), "worker")
    fields = [f.removeprefix(f"{tmp_path / 'sssd.conf'} ") for f, _ in _problems(err)]
    assert fields == ["[sssd] services", "[domain/a] id_provider", "[domain/b]"]


def test_the_controller_needs_only_the_nss_responder(tmp_path: Path) -> None:
    text = GOOD.replace("services = nss, ssh", "services = nss")
    conf = _read(_write(tmp_path / "sssd.conf", text), "controller")
    assert conf is not None and conf.services == ("nss",)


def test_a_ca_bundle_that_is_mounted_is_accepted(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    conf = _read(_write(tmp_path / "sssd.conf", GOOD + f"ldap_tls_cacert = {ca}\n"), "login")
    assert conf is not None


@pytest.mark.parametrize("text", ["domains = a\n[sssd]\n", "[sssd]\n[sssd]\n", "[sssd]\ndomains = a\ndomains = b\n",
                                  "[sssd\n"], ids=["before-section", "dup-section", "dup-option", "bad-header"])
def test_a_file_that_is_not_ini_exits_2_naming_the_file(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path / "sssd.conf", text)
    with pytest.raises(BadInput) as err:
        _read(path, "login")
    ((field, _),) = _problems(err)
    assert field == str(path)


@pytest.mark.parametrize("byte", ["\x00", "\r"], ids=["nul", "cr"])
def test_nul_or_carriage_return_bytes_are_refused(tmp_path: Path, byte: str) -> None:
    path = _write(tmp_path / "sssd.conf", GOOD.replace("ldap_uri", f"ldap_uri{byte}"))
    with pytest.raises(BadInput, match="NUL or carriage return"):
        _read(path, "login")


# --- what pod start makes of it ---


def _plan(tmp_path: Path, role: str, text: str | None = GOOD, **env: str) -> start.StartPlan:
    pod = podkit.make_pod(tmp_path, role)
    if text is not None:
        _write(pod.sssd_conf, text)
    return podkit.plan(role, pod.env(role, **env))


@pytest.mark.parametrize("role", ["login", "worker", "controller", "restapi"])
def test_without_the_secret_nothing_changes(tmp_path: Path, role: str) -> None:
    p = _plan(tmp_path, role, None)
    assert "sssd" not in [prog.name for prog in p.programs]
    assert not {wk.SSSD_CONF, wk.SSHD_SSSD_DROPIN, wk.PAM_MKHOMEDIR} & {f.path for f in p.files}
    assert all(wk.SSSD_NSS_PIPE not in prog.script for prog in p.programs)


@pytest.mark.parametrize(("role", "users"), [("login", "sshd"), ("worker", "slurmd"), ("worker", "sshd"),
                                             ("controller", "slurmctld"), ("restapi", "slurmrestd")])
def test_sssd_runs_first_and_the_daemons_that_resolve_users_wait_for_it(tmp_path: Path, role: str, users: str) -> None:
    text = GOOD if role in ("login", "worker") else GOOD.replace("services = nss, ssh", "services = nss")
    p = _plan(tmp_path, role, text)
    first = min(p.programs, key=lambda prog: prog.priority)
    assert first.name == "sssd"
    assert shlex.split(first.script.rstrip("\n").splitlines()[-1]) == ["exec", "/usr/sbin/sssd", "-i",
                                                                       "--logger=stderr"]
    (daemon,) = [prog for prog in p.programs if prog.name == users]
    lines = daemon.script.splitlines()
    waits = [i for i, line in enumerate(lines) if wk.SSSD_NSS_PIPE in line]
    assert waits and max(waits) < len(lines) - 1  # before the exec
    assert f"seq {programs.SSSD_WAIT_SECONDS * 10}" in lines[waits[0]]  # bounded: start goes on without it
    (conf,) = [f for f in p.files if f.path == wk.SSSD_CONF]
    assert (conf.content, conf.mode, conf.uid) == (text, 0o600, 0)


def test_an_sssd_that_never_comes_up_does_not_hold_the_daemon(tmp_path: Path) -> None:
    """The wait script, run: no nss pipe, a 0.1 s bound, then the daemon's command runs anyway."""
    body = programs._after_directory(True)
    script = "\n".join(body).replace(f"seq {programs.SSSD_WAIT_SECONDS * 10}", "seq 1") + "\necho started\n"
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=10, check=False)
    assert done.stdout.splitlines()[-1] == "started"
    assert "not up after" in done.stdout


@pytest.mark.parametrize("role", ["login", "worker"])
def test_ssh_keys_come_from_the_directory_on_the_pods_users_ssh_into(tmp_path: Path, role: str) -> None:
    p = _plan(tmp_path, role)
    (dropin,) = [f for f in p.files if f.path == wk.SSHD_SSSD_DROPIN]
    assert dropin.content.splitlines() == ["AuthorizedKeysCommand /usr/bin/sss_ssh_authorizedkeys %u",
                                           "AuthorizedKeysCommandUser nobody"]
    assert wk.PAM_MKHOMEDIR not in {f.path for f in p.files}  # homes made on first login only when asked


def test_homes_on_first_login_when_the_site_asks(tmp_path: Path) -> None:
    p = _plan(tmp_path, "login", **{wk.ENV_SSSD_MKHOMEDIR: "true"})
    (pam,) = [f for f in p.files if f.path == wk.PAM_MKHOMEDIR]
    assert pam.content == "session optional pam_mkhomedir.so umask=0077\n"


def test_a_bad_mkhomedir_value_exits_2_naming_it(tmp_path: Path) -> None:
    with pytest.raises(BadInput) as err:
        _plan(tmp_path, "login", **{wk.ENV_SSSD_MKHOMEDIR: "yes\nUsePAM no"})
    assert _problems(err) == [(wk.ENV_SSSD_MKHOMEDIR, "yes\nUsePAM no")]


def test_the_accounting_pods_never_read_it(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path, "db")
    _write(pod.sssd_conf, "[nss]\n")  # would be refused if read
    inp = start.load("db", pod.env("db"), start.Settings.from_env(pod.env("db")))
    assert inp.sssd is None


@pytest.mark.parametrize(("text", "mode", "named"), [
    ("[sssd]\nservices = nss, ssh\n", 0o400, "[sssd] domains"),
    (GOOD, 0o640, "sssd.conf secret mode"),
], ids=["no-domains", "group-readable"])
def test_pod_start_with_a_bad_file_exits_2_naming_it_and_writes_nothing(tmp_path: Path, text: str, mode: int,
                                                                       named: str) -> None:
    pod = podkit.make_pod(tmp_path, "login")
    _write(pod.sssd_conf, text, mode)
    done = subprocess.run([str(SLURMPOD), "entrypoint", "login"], env=pod.env("login"), capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert named in done.stderr
    assert list(pod.run_dir.iterdir()) == []
