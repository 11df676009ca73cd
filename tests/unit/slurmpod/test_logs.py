"""slurmpod's log lines: one line per record whatever a value holds, and a second destination for hooks."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurmpod import logs

HOSTILE = "job 7\nslurmpod info fake: forged=1\r\x1b[2Jend\x7f"


@pytest.fixture
def root() -> Iterator[logging.Logger]:
    logger = logging.getLogger("slurmpod")
    saved = logger.handlers[:], logger.level, logger.propagate
    yield logger
    for handler in logger.handlers:
        if handler not in saved[0]:
            handler.close()
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_value_with_control_characters_stays_on_one_line(fmt: str, root: logging.Logger, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    logs.setup(fmt)
    logging.getLogger("slurmpod.test").warning(HOSTILE, extra={"ctx": {"why": HOSTILE, "k\nforged": "v"}})
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert not any(ord(c) < 32 or ord(c) == 127 for c in lines[0])
    if fmt == "json":
        doc = json.loads(lines[0])
        assert doc["msg"] == HOSTILE and doc["why"] == HOSTILE  # escaped in the line, intact when read
    else:
        assert "why=job 7\\nslurmpod info fake: forged=1\\r\\x1b[2Jend\\x7f" in lines[0]
        assert " k\\nforged=v" in lines[0]


def test_mirror_to_writes_the_same_lines_to_a_second_stream(root: logging.Logger, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    logs.setup("json")
    stream = tmp_path / "pid1-stderr"
    stream.touch()
    assert logs.mirror_to(str(stream))
    logging.getLogger("slurmpod.entrypoints.prestop").info("prestop done", extra={"ctx": {"node": "w-0"}})
    for handler in root.handlers:
        handler.flush()
    mirrored = stream.read_text(encoding="utf-8").splitlines()
    assert mirrored == capsys.readouterr().err.splitlines()
    assert json.loads(mirrored[0])["node"] == "w-0"


def test_mirror_to_a_stream_it_cannot_open_adds_nothing(root: logging.Logger, tmp_path: Path) -> None:
    logs.setup("text")
    before = root.handlers[:]
    assert not logs.mirror_to(str(tmp_path / "no-such-dir" / "stderr"))
    assert root.handlers == before
