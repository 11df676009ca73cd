"""Image metadata and layers: tags, OCI labels, entrypoint, and a scan of every layer for secrets."""

from __future__ import annotations

import argparse
import datetime as dt
import re
from pathlib import Path
from typing import Any

import pytest
from imagekit import layer_members

from slurmpod_host.images import build, flavors, wheelhouse
from slurmpod_host.images.engine import ImageInfo
from slurmpod_host.images.flavors import Flavor

pytestmark = [pytest.mark.docker, pytest.mark.image]

OCI = "org.opencontainers.image."
SECRET = re.compile(r"(^|/)etc/munge/(\.wh\.)?munge\.key$|(^|/)etc/ssh/(\.wh\.)?ssh_host_")


@pytest.mark.parametrize("name", flavors.ALL_IMAGES)
def test_labels(name: str, images: dict[str, ImageInfo], hosts: dict[str, Any], flavor: Flavor,
                repo: Path) -> None:
    got = images[name].labels
    for key in ("version", "revision", "source", "title", "created"):
        assert got.get(OCI + key), f"{name}: label {OCI + key} missing"
    assert got[OCI + "title"] == f"slurmpod-{name}"
    assert got[OCI + "version"] == wheelhouse.project_version(repo)
    assert re.fullmatch(r"[0-9a-f]{40}|unknown", got[OCI + "revision"])
    assert got[OCI + "source"].startswith("https://")
    dt.datetime.strptime(got[OCI + "created"], "%Y-%m-%dT%H:%M:%SZ")
    assert got["io.slurmpod.flavor"] == flavor.name
    installed = hosts[name].package("slurm-client").version
    assert got["io.slurmpod.slurm-package-version"] == installed
    assert installed.startswith(got["io.slurmpod.slurm-version"] + "-")
    assert got["io.slurmpod.slurm-version"].startswith(flavor.name + ".")


@pytest.mark.parametrize("name", flavors.ALL_IMAGES)
def test_both_tags_name_the_same_image(name: str, images: dict[str, ImageInfo], repo: Path,
                                       flavor: Flavor) -> None:
    repository = flavors.repository(name)
    version = wheelhouse.project_version(repo)
    assert {f"{repository}:{t}" for t in flavors.tags(flavor, version)} <= set(images[name].tags)


@pytest.mark.parametrize("name", flavors.ROLES)
def test_entrypoint(name: str, docker_client: Any, images: dict[str, ImageInfo]) -> None:
    config = docker_client.api.inspect_image(images[name].id)["Config"]
    assert config["Entrypoint"] == ["slurmpod", "entrypoint", name]
    assert not config.get("Cmd")


@pytest.mark.parametrize("name", flavors.ROLES)
def test_no_layer_ever_held_a_secret(name: str, docker_client: Any, images: dict[str, ImageInfo]) -> None:
    """`docker save` the image and read every layer tar: a key created and deleted in different
    layers would still be in the first one (or show up as a whiteout in the second)."""
    saved = docker_client.images.get(images[name].id).save(named=False)
    layers: set[str] = set()
    hits = []
    for layer, path in layer_members(saved):
        layers.add(layer)
        if SECRET.search(path):
            hits.append(f"{layer}: {path}")
    assert len(layers) >= 5, "expected the rootfs, base and role layers"
    assert hits == []


def test_secret_pattern() -> None:
    for bad in ("etc/munge/munge.key", "etc/ssh/ssh_host_ed25519_key", "etc/ssh/.wh.ssh_host_rsa_key.pub",
                "./etc/munge/munge.key", "etc/munge/.wh.munge.key"):
        assert SECRET.search(bad), bad
    for fine in ("etc/ssh/sshd_config", "etc/munge/", "usr/share/doc/munge/munge.key.txt"):
        assert not SECRET.search(fine), fine


def test_images_list_command(images: dict[str, ImageInfo], flavor: Flavor,
                             capsys: pytest.CaptureFixture[str]) -> None:
    assert build.list_main(argparse.Namespace()) == 0
    shown = capsys.readouterr().out
    for name, info in images.items():
        row = next(ln for ln in shown.splitlines() if info.id[7:19] in ln)
        assert f"slurmpod/{name}:{flavor.name}" in row
        assert info.labels["io.slurmpod.slurm-version"] in row
