"""The state kept between runs (NVLink counters, XID totals, the clean-run count, our last drain).

One small JSON file per key under the state dir, each written atomically (temp file + rename), so a
run killed mid-write leaves the previous file. An unreadable file is treated as absent and logged.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a private temporary file beside ``path``, then rename it over ``path``.

    Not tempfile.mkstemp: importing tempfile (shutil, random, bz2, lzma) costs every prolog ~10 ms. One
    process writes one file at a time, so the pid makes the name unique; O_EXCL refuses a leftover.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # left by a killed run of an earlier process with this pid
        tmp.unlink()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class StateDir:
    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self, key: str) -> dict[str, Any]:
        file = self.path / f"{key}.json"
        try:
            doc = json.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("state file unreadable, starting afresh: path=%s error=%s", file, exc)
            return {}
        return doc if isinstance(doc, dict) else {}

    def write(self, key: str, doc: dict[str, Any]) -> None:
        write_atomic(self.path / f"{key}.json", json.dumps(doc, sort_keys=True))
