"""After a Python-only change, rebuilding every role reuses every apt layer and rebuilds only slurmpod's
own layers. How long that takes (the issue's floor: 60 s) is a figure of `make bench` (host/bench/builds.py),
not an assert here: a loaded CI host must not fail a correct build.

The change is made in a copy of the sources (a comment appended to a module), and the images are
tagged under a throw-away repository prefix that is removed afterwards, so the real tags stay as
they are. The roles are built FROM the real base image, as a normal rebuild would.
"""

from __future__ import annotations

import dataclasses
import io
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from imagekit import build_args

from slurmpod_host.images import build, flavors, wheelhouse
from slurmpod_host.images.engine import Engine, ImageInfo
from slurmpod_host.images.flavors import Flavor

pytestmark = [pytest.mark.docker, pytest.mark.image]

PREFIX = "slurmpod-pyonly-test/"


@pytest.fixture
def changed_source(repo: Path, tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    for name in wheelhouse.source_paths(repo):
        origin = repo / name
        if origin.is_dir():
            shutil.copytree(origin, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif origin.is_file():
            shutil.copy2(origin, src / name)
    with (src / "slurmpod" / "__init__.py").open("a") as f:
        f.write(f"# python-only change {uuid.uuid4().hex}\n")
    return src


@pytest.fixture
def cleanup(docker_client: Any) -> Iterator[None]:
    yield
    for image in docker_client.images.list():
        for tag in image.tags:
            if tag.startswith(PREFIX):
                docker_client.images.remove(tag)


@pytest.mark.usefixtures("cleanup")
def test_python_only_rebuild_reuses_apt_layers(
    engine: Engine, images: dict[str, ImageInfo], flavor: Flavor, changed_source: Path, tmp_path: Path
) -> None:
    args = build_args(flavor, log_file=str(tmp_path / "rebuild.log"))
    settings, _ = build.settings_from_args(args, repo=changed_source)
    base = f"{flavors.repository('base')}:{flavor.name}"
    values_file = tmp_path / "values.yaml"
    values_file.write_text("cluster:\n  workers: 2\n")
    settings = dataclasses.replace(settings, prefix=PREFIX, base_ref=base, build_dir=tmp_path / "build",
                                   values_file=values_file)
    out = io.StringIO()
    started = time.monotonic()
    built = build.build(settings, list(flavors.ROLES), out=out, engine=engine)
    took = time.monotonic() - started
    print(out.getvalue())
    assert [b.name for b in built] == list(flavors.ROLES)
    for b in built:
        # Every apt layer above slurmpod's is reused. The controller's plugin layer comes after the wheel
        # on purpose: it compiles job_submit_slurmpod.so with the wheel's build_plugin (about 30 s).
        wheel_at = next(i for i, s in enumerate(b.steps) if s.instruction.startswith("COPY slurmpod-wheel"))
        apt = [s for s in b.steps[:wheel_at] if "apt-get" in s.instruction]
        assert apt and all(s.cached for s in apt), f"{b.name}: an apt layer was rebuilt"
        slurmpod_copy = [s for s in b.steps if s.instruction.startswith("COPY slurmpod-wheel")]
        assert [s.cached for s in slurmpod_copy] == [False], f"{b.name}: the changed wheel was not copied"
        assert b.repository.startswith(PREFIX)
    print(f"Python-only rebuild of all roles took {took:.1f} s (make bench measures it)")
    pinned = yaml.safe_load(values_file.read_text())
    assert pinned["cluster"] == {"workers": 2}
    for b in built:
        want = {"repository": b.repository, "tag": b.tags[-1], "imageId": b.image_id,
                "slurmVersion": b.slurm_version}
        assert pinned["images"][b.name] == want
        assert engine.image(f"{b.repository}:{b.tags[-1]}") == engine.image(b.image_id)

