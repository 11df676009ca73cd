"""`cluster up --secret-file NAME:KEY=PATH`: the site's own Secrets, made as kubectl makes them."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from slurmpod import well_known as wk
from slurmpod.errors import BadInput
from slurmpod_host.cluster import auth as cluster_auth
from slurmpod_host.cluster import manifests, secret_files

BUNDLE = manifests.load(manifests.default_dir())


def test_files_become_secrets_with_their_bytes(tmp_path: Path) -> None:
    (tmp_path / "sssd.conf").write_bytes(b"[sssd]\ndomains = example\n")
    (tmp_path / "ca.pem").write_bytes(b"\x00\xffpem")
    parsed = secret_files.parse([f"ldap-sssd:sssd.conf={tmp_path / 'sssd.conf'}",
                                 f"ldap-sssd:ca.pem={tmp_path / 'ca.pem'}"])
    assert parsed == {"ldap-sssd": {"sssd.conf": b"[sssd]\ndomains = example\n", "ca.pem": b"\x00\xffpem"}}
    bundle = cluster_auth.configure(BUNDLE, wk.AUTH_MUNGE, from_files=parsed)
    secret = bundle.find("Secret", "ldap-sssd")
    assert secret is not None and secret.source == cluster_auth.USER_CREATED
    assert {k: base64.b64decode(v) for k, v in secret.body["data"].items()} == parsed["ldap-sssd"]


@pytest.mark.parametrize(("arg", "reason"), [
    ("ldap-sssd", "must be NAME:KEY=PATH"),
    ("Ldap:sssd.conf=/dev/null", "must be NAME:KEY=PATH"),
    ("ldap:sssd/conf=/dev/null", "must be NAME:KEY=PATH"),
    ("ldap:..=/dev/null", "must be NAME:KEY=PATH"),
    ("ldap\nx:k=/dev/null", "must be NAME:KEY=PATH"),
    ("ldap:k=/nonexistent/file", "cannot read /nonexistent/file: No such file or directory"),
])
def test_a_bad_argument_is_refused_naming_it(arg: str, reason: str) -> None:
    with pytest.raises(BadInput) as raised:
        secret_files.parse([arg])
    assert f"{secret_files.FIELD}={arg!r}: {reason}" in str(raised.value)


def test_a_key_given_twice_or_a_file_over_a_secrets_limit_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * (secret_files.MAX_BYTES + 1))
    with pytest.raises(BadInput) as raised:
        secret_files.parse(["s:k=/dev/null", "s:k=/dev/null", f"s:big={big}"])
    assert len(raised.value.problems) == 2, raised.value
    assert "key k of Secret s given twice" in str(raised.value)
    assert f"{secret_files.MAX_BYTES + 1} bytes: a Secret holds at most" in str(raised.value)


def test_a_secret_cluster_up_makes_itself_cannot_be_replaced() -> None:
    with pytest.raises(BadInput) as raised:
        cluster_auth.configure(BUNDLE, wk.AUTH_MUNGE, from_files={wk.SECRET_SSH_HOST_KEYS: {"k": b"x"}},
                               ssh_host_key=b"key")
    assert f"{secret_files.FIELD}='{wk.SECRET_SSH_HOST_KEYS}': this Secret is made by `cluster up` itself" in str(
        raised.value)
