"""Image labels, the label-only layer, the Helm values pin file (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from slurmpod import well_known
from slurmpod.errors import BadInput
from slurmpod_host.images import labels, values

INPUTS = labels.LabelInputs(role="worker", flavor="24.11", version="0.1.0", revision="abc123",
                            source="https://github.com/slurmpod/slurmpod", created="2026-11-30T07:00:00Z",
                            slurm_package_version="24.11.5-4+deb13u1", base_name="slurmpod/base:24.11")


@pytest.mark.parametrize(
    ("debian", "upstream"),
    [("24.11.5-4+deb13u1", "24.11.5"), ("26.05.5-1", "26.05.5"), ("1:2.0-1", "2.0"),
     ("26.05.0~rc1-1", "26.05.0~rc1"), ("1.2-3-4", "1.2-3"), ("24.11.5", "24.11.5")],
)
def test_upstream_version(debian: str, upstream: str) -> None:
    assert labels.upstream_version(debian) == upstream


@pytest.mark.parametrize("bad", ["", "not a version", "-1"])
def test_upstream_version_rejects_garbage(bad: str) -> None:
    with pytest.raises(ValueError, match="not a Debian version"):
        labels.upstream_version(bad)


def test_compose_has_oci_and_slurmpod_labels() -> None:
    got = labels.compose(INPUTS)
    for key in ("version", "revision", "source", "title", "created"):
        assert got["org.opencontainers.image." + key]
    assert got["org.opencontainers.image.title"] == "slurmpod-worker"
    assert got[well_known.IMAGE_LABEL_SLURM_VERSION] == "24.11.5"
    assert got[well_known.IMAGE_LABEL_FLAVOR] == "24.11"
    assert got[labels.SLURM_PACKAGE_VERSION] == "24.11.5-4+deb13u1"


def test_reuse_only_same_content_and_same_stable_labels() -> None:
    wanted = labels.compose(INPUTS)
    later = {**wanted, labels.OCI + "created": "2030-01-01T00:00:00Z", labels.OCI + "revision": "def456"}
    assert labels.reusable("sha256:c", later, "sha256:c", wanted)  # only volatile labels differ
    assert not labels.reusable("sha256:other", later, "sha256:c", wanted)
    bumped = {**wanted, labels.OCI + "version": "0.2.0"}
    assert not labels.reusable("sha256:c", wanted, "sha256:c", bumped)
    assert not labels.reusable("", {}, "sha256:c", wanted)


def test_label_dockerfile_quotes_every_pair() -> None:
    text = labels.dockerfile("sha256:abc", {"b.key": 'va"l', "a.key": "x y"})
    assert text == 'FROM sha256:abc\nLABEL "a.key"="x y" \\\n      "b.key"="va\\"l"\n'


def test_values_merge_keeps_unrelated_keys_and_other_roles() -> None:
    doc = {"cluster": {"workers": 2}, "images": {"login": {"repository": "old"}}}
    pins = [values.Pin("worker", "slurmpod/worker", "24.11-0.1.0", "sha256:1", "24.11.5")]
    got = values.merge(doc, pins)
    assert got["cluster"] == {"workers": 2}
    assert got["images"]["login"] == {"repository": "old"}
    assert got["images"]["worker"] == {"repository": "slurmpod/worker", "tag": "24.11-0.1.0",
                                       "imageId": "sha256:1", "slurmVersion": "24.11.5"}
    assert doc["images"] == {"login": {"repository": "old"}}, "input not mutated"


def test_values_update_writes_and_rejects_non_mappings(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "values.yaml"
    values.update(path, [values.Pin("controller", "slurmpod/controller", "t", "sha256:2", "26.05.5")])
    values.update(path, [values.Pin("login", "slurmpod/login", "t", "sha256:3", "26.05.5")])
    doc = yaml.safe_load(path.read_text())
    assert sorted(doc["images"]) == ["controller", "login"]
    path.write_text("- a list\n")
    with pytest.raises(BadInput, match="values-file="):
        values.update(path, [])
