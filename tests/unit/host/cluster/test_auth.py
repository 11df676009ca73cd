"""`cluster up --auth`: one set of manifests, the applied data set for munge or auth/slurm (pure)."""

from __future__ import annotations

import base64
import ipaddress
import os
import uuid
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from slurmpod import cli
from slurmpod import well_known as wk
from slurmpod.entrypoints import cluster_spec
from slurmpod.errors import BadInput
from slurmpod_host.cluster import applied, manifests, podspec
from slurmpod_host.cluster import auth as cluster_auth
from slurmpod_host.cluster.plan import PodPlan

BUNDLE = manifests.load(manifests.default_dir())
PARAMS = podspec.ClusterParams(name="demo", subnet=ipaddress.IPv4Network("10.213.9.0/24"),
                               cluster_uid=uuid.UUID(int=7),
                               created=datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
                               node_cpu=Fraction(2), node_memory=Fraction(24 * 2**30), flavor="26.05", workers=2)


def _fail(n: int) -> bytes:
    raise AssertionError("nothing left to generate")


def _resolved(auth: str) -> manifests.Bundle:
    return applied.resolve_secrets(cluster_auth.configure(BUNDLE, auth), os.urandom)


def _data(bundle: manifests.Bundle, kind: str, name: str) -> dict[str, str]:
    doc = bundle.find(kind, name)
    assert doc is not None
    return dict(doc.body.get("data") or {})


def _payload(plan: PodPlan, volume: str) -> dict[str, tuple[bytes, int]]:
    """Files (not links, not dirs) of one of the pod's volumes: name -> (content, mode)."""
    base = f"pods/{plan.name}/volumes/{volume}/"
    return {Path(f.path).name: (f.content, f.mode) for f in plan.files
            if f.path.startswith(base) and f.symlink_to is None and not f.directory}


@pytest.mark.parametrize("auth", wk.AUTH_TYPES)
def test_config_map_and_spec_agree(auth: str) -> None:
    bundle = cluster_auth.configure(BUNDLE, auth)
    data = _data(bundle, "ConfigMap", wk.CONFIG_MAP_CLUSTER)
    assert data[wk.CONFIG_MAP_KEY_AUTH] == auth
    spec = cluster_spec.parse(yaml.safe_load(data[wk.CONFIG_MAP_KEY_SPEC]))
    assert spec.auth == auth
    assert cluster_auth.spec_auth(bundle) == auth
    # only the value changed: every other line of cluster.yaml is as shipped
    shipped = _data(BUNDLE, "ConfigMap", wk.CONFIG_MAP_CLUSTER)[wk.CONFIG_MAP_KEY_SPEC].splitlines()
    got = data[wk.CONFIG_MAP_KEY_SPEC].splitlines()
    assert [a for a, b in zip(shipped, got, strict=True) if a != b] == ([] if auth == "munge" else ["auth: munge"])


@pytest.mark.parametrize(("auth", "used", "unused"), [
    ("munge", (wk.SECRET_MUNGE, "munge.key"), (wk.SECRET_SLURM_KEY, "slurm.key")),
    ("slurm", (wk.SECRET_SLURM_KEY, "slurm.key"), (wk.SECRET_MUNGE, "munge.key")),
])
def test_only_the_chosen_key_is_generated(auth: str, used: tuple[str, str], unused: tuple[str, str]) -> None:
    calls: list[int] = []

    def gen(n: int) -> bytes:
        calls.append(n)
        return os.urandom(n)

    bundle = applied.resolve_secrets(cluster_auth.configure(BUNDLE, auth), gen)
    assert calls == [1024]
    assert len(base64.b64decode(_data(bundle, "Secret", used[0])[used[1]])) == 1024
    assert bundle.find("Secret", unused[0]) is None  # not created: its optional volume stays empty


def test_input_bundle_not_mutated() -> None:
    before = repr(BUNDLE)
    cluster_auth.configure(BUNDLE, "slurm")
    assert repr(BUNDLE) == before


def test_auth_slurm_pods() -> None:
    """Every pod gets SLURMPOD_AUTH=slurm and the same 0400 slurm.key; the munge volume is empty."""
    plans = podspec.plan_cluster(_resolved("slurm"), PARAMS, _fail)
    keys = set()
    for plan in plans:
        assert plan.env_map()[wk.ENV_AUTH] == "slurm", plan.name
        assert _payload(plan, "munge-key") == {}
        ((name, (content, mode)),) = _payload(plan, "slurm-key").items()
        assert (name, len(content), mode) == ("slurm.key", 1024, 0o400)
        keys.add(content)
    assert len(keys) == 1
    controller = next(p for p in plans if p.role == "controller")
    spec_text, _ = _payload(controller, "cluster-spec")["cluster.yaml"]
    assert cluster_spec.parse(yaml.safe_load(spec_text)).auth == "slurm"


def test_recreated_pod_plans_the_same_key(tmp_path: Path) -> None:
    """lifecycle.plan_pod re-plans from applied.json: same key, no new one generated."""
    bundle = _resolved("slurm")
    applied.save(tmp_path, applied.Applied(PARAMS, bundle))
    loaded = applied.load(tmp_path)
    first = {p.name: p for p in podspec.plan_cluster(bundle, PARAMS, _fail)}["demo-worker-1"]
    again = podspec.plan_pod(loaded.bundle, loaded.params, "demo-worker", 1, ip=first.ip, generate=_fail)
    assert _payload(again, "slurm-key") == _payload(first, "slurm-key")
    assert again.env_map()[wk.ENV_AUTH] == "slurm"


def test_spec_without_auth_line_gets_one() -> None:
    text = "clusterName: x  # comment kept\n"
    out = cluster_auth.set_spec_auth(text, "slurm")
    assert out == "clusterName: x  # comment kept\nauth: slurm\n"
    assert cluster_auth.set_spec_auth(out, "munge") == "clusterName: x  # comment kept\nauth: munge\n"


def test_spec_whose_auth_cannot_be_set_is_refused() -> None:
    with pytest.raises(BadInput, match=r"cluster\.yaml"):
        cluster_auth.set_spec_auth("{clusterName: x, auth: munge}", "slurm")


def test_unknown_auth_refused() -> None:
    with pytest.raises(BadInput) as err:
        cluster_auth.configure(BUNDLE, "kerberos")
    assert err.value.problems[0].field == "--auth"


def test_manifests_that_ship_a_secret_are_refused() -> None:
    shipped = cluster_auth.user_secret(wk.SECRET_MUNGE, {"munge.key": ""})
    bundle = manifests.Bundle(BUNDLE.namespace, (*BUNDLE.documents, manifests.Document("secret.yaml", shipped.body)))
    with pytest.raises(BadInput, match="must not ship Secrets"):
        cluster_auth.configure(bundle, "munge")


def test_login_host_key_secret_is_created_with_the_key() -> None:
    key = b"-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n"
    bundle = cluster_auth.configure(BUNDLE, "munge", ssh_host_key=key)
    assert base64.b64decode(_data(bundle, "Secret", wk.SECRET_SSH_HOST_KEYS)[wk.SSH_HOST_KEY_FILE]) == key


def test_cli_option_and_env_twin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(wk.ENV_AUTH, raising=False)
    assert cli.build_parser()[0].parse_args(["cluster", "up"]).auth == "munge"
    assert cli.build_parser()[0].parse_args(["cluster", "up", "--auth", "slurm"]).auth == "slurm"
    monkeypatch.setenv(wk.ENV_AUTH, "slurm")
    assert cli.build_parser()[0].parse_args(["cluster", "up"]).auth == "slurm"
    with pytest.raises(SystemExit):
        cli.build_parser()[0].parse_args(["cluster", "up", "--auth", "kerberos"])
