"""Fixtures for the static image tests: the Docker engine, the built images, one container per image.

The flavor comes from SLURMPOD_TEST_FLAVOR (default 24.11). Images are expected to be built
already (`slurmpod images build --flavor F`); a missing one is built here with the same function
the CLI uses. No Docker engine is a test FAILURE, never a skip.
Containers run ``sleep infinity`` instead of the entrypoint, without network, and are removed
at the end of the session. testinfra reaches them with ``docker exec`` (its docker backend).
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import testinfra
from imagekit import CONTAINER_PREFIX, build_args, image_ref

from slurmpod_host.images import build, flavors
from slurmpod_host.images.engine import Engine, ImageInfo
from slurmpod_host.images.flavors import Flavor


@pytest.fixture(scope="session")
def flavor() -> Flavor:
    return flavors.get(os.environ.get("SLURMPOD_TEST_FLAVOR", flavors.DEFAULT_FLAVOR))


@pytest.fixture(scope="session")
def engine() -> Engine:
    try:
        return Engine.connect()
    except Exception as exc:  # any failure to reach dockerd
        pytest.fail(f"these tests need a running Docker engine: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def docker_client(engine: Engine) -> Any:
    return engine.client


@pytest.fixture(scope="session")
def images(engine: Engine, flavor: Flavor) -> dict[str, ImageInfo]:
    """Every slurmpod image of the flavor, built first if any is missing."""
    missing = [n for n in flavors.ALL_IMAGES if engine.image(image_ref(n, flavor)) is None]
    if missing:
        settings, _ = build.settings_from_args(build_args(flavor))
        build.build(settings, missing, out=sys.stderr, engine=engine)
    found = {n: engine.image(image_ref(n, flavor)) for n in flavors.ALL_IMAGES}
    absent = [n for n, info in found.items() if info is None]
    if absent:
        pytest.fail(f"images still missing after a build: {absent}")
    return {n: info for n, info in found.items() if info is not None}


@pytest.fixture(scope="session")
def containers(docker_client: Any, images: dict[str, ImageInfo], flavor: Flavor) -> Iterator[dict[str, str]]:
    """One idle container per image (base and every role), removed afterwards."""
    started: dict[str, Any] = {}
    try:
        for name, info in images.items():
            cname = f"{CONTAINER_PREFIX}{name}-{flavor.name.replace('.', '')}-{uuid.uuid4().hex[:8]}"
            started[name] = docker_client.containers.run(
                info.id, entrypoint=["sleep"], command=["infinity"], name=cname, detach=True,
                network_disabled=True)
        yield {name: c.name for name, c in started.items()}
    finally:
        for c in started.values():
            c.remove(force=True)


@pytest.fixture(scope="session")
def hosts(containers: dict[str, str]) -> dict[str, Any]:
    """testinfra hosts by image name ("base", "controller", "worker", "login")."""
    return {name: testinfra.get_host(f"docker://{cname}") for name, cname in containers.items()}


@pytest.fixture(scope="session")
def repo() -> Path:
    return build.find_repo([Path(__file__).resolve()])
