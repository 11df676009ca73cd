"""Golden files: rendered text pinned byte for byte in tests/unit/golden/.

SLURMPOD_UPDATE_GOLDEN=1 rewrites a differing file and still fails the test, so a run that rewrote
goldens can never pass.
"""

from __future__ import annotations

import os

import paths
import pytest

from slurmpod import __version__

GOLDEN = paths.UNIT / "golden"
UPDATE = os.environ.get("SLURMPOD_UPDATE_GOLDEN") == "1"


def check_golden(name: str, text: str) -> None:
    """Pass only when the golden file already holds ``text``. With SLURMPOD_UPDATE_GOLDEN=1 a differing
    file is rewritten and the test still fails, so a run that rewrote goldens can never pass."""
    text = text.replace(f"slurmpod {__version__} ", "slurmpod VERSION ")
    path = GOLDEN / name
    old = path.read_text(encoding="utf-8") if path.exists() else None
    if text == old:
        return
    if UPDATE:
        path.write_text(text, encoding="utf-8")
        pytest.fail(f"{name} rewritten; review `git diff {path}`, then rerun without SLURMPOD_UPDATE_GOLDEN")
    assert old is not None, f"{path} missing; run with SLURMPOD_UPDATE_GOLDEN=1 to create it"
    assert text == old, f"{name} changed; SLURMPOD_UPDATE_GOLDEN=1 to accept"
