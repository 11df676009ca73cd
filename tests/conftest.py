"""Shared by every suite: puts the test kits on sys.path.

Tests import with pytest's importlib mode (pyproject.toml), so test files of one name may sit in two
package folders of tests/unit; the kits they share are put on sys.path here, once: tests/ (for `fakes`),
tests/unit/kits, and each container suite's own folder (clusterkit, imagekit, ...).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent
for kit_dir in (TESTS, TESTS / "unit" / "kits", TESTS / "cluster", TESTS / "image", TESTS / "k8s"):
    if str(kit_dir) not in sys.path:
        sys.path.insert(0, str(kit_dir))


@pytest.fixture(scope="session")
def docker_client() -> Any:
    """The Docker engine the container suites need: no engine is a test failure, never a skip."""
    from slurmpod.errors import PermanentError
    from slurmpod_host.cluster import runtime

    try:
        return runtime.connect()
    except PermanentError as exc:
        pytest.fail(f"these tests need a running Docker engine: {exc}", pytrace=False)
