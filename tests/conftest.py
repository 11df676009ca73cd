"""Shared by every suite: puts the test kits on sys.path.

Tests import with pytest's importlib mode (pyproject.toml), so test files of one name may sit in two
package folders of tests/unit; the kits they share are put on sys.path here, once: tests/ (for `fakes`),
tests/unit/kits, and each container suite's own folder (clusterkit, imagekit, ...).
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
for kit_dir in (TESTS, TESTS / "unit" / "kits", TESTS / "cluster", TESTS / "image", TESTS / "k8s"):
    if str(kit_dir) not in sys.path:
        sys.path.insert(0, str(kit_dir))
