"""Where the repository's parts are, for unit tests at any depth below tests/unit."""

from __future__ import annotations

from pathlib import Path

KITS = Path(__file__).resolve().parent
UNIT = KITS.parent
TESTS = UNIT.parent
REPO = TESTS.parent
