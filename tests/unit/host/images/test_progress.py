"""Build-progress parsing and printing (pure: fed recorded builder output)."""

from __future__ import annotations

import io

import pytest

from slurmpod_host.images import progress
from slurmpod_host.images.progress import Kind

# What Docker 20.10's classic builder streams (the `stream` texts, as chunks arrive).
STREAM = [
    "Step 1/4 : FROM slurmpod/base:24.11\n",
    " ---> 2ef479282de1\n",
    "Step 2/4 : RUN apt-get update;     apt-get install -y slurmd\n",  # continuations arrive joined
    " ---> Using cache\n ---> 0a1b2c3d4e5f\n",
    "Step 3/4 : COPY slurmpod-wheel/ /tmp/slurmpod-wheel/\n",
    " ---> 77aa\n",
    "Step 4/4 : RUN pip install ",  # a line split across chunks
    "x\n ---> Running in 99ff\nProcessing /tmp/x.whl\n",
    "Removing intermediate container 99ff\n ---> 88bb\nSuccessfully built 88bb\n",
]


@pytest.mark.parametrize(
    ("line", "kind", "step", "total", "text"),
    [
        ("Step 3/9 : RUN apt-get install -y x", Kind.STEP, 3, 9, "RUN apt-get install -y x"),
        (" ---> Using cache", Kind.CACHED, 0, 0, " ---> Using cache"),
        (" ---> Running in 1234", Kind.OUTPUT, 0, 0, " ---> Running in 1234"),
        ("Get:1 http://deb.debian.org/debian trixie InRelease", Kind.OUTPUT, 0, 0,
         "Get:1 http://deb.debian.org/debian trixie InRelease"),
    ],
)
def test_classify(line: str, kind: Kind, step: int, total: int, text: str) -> None:
    assert progress.classify(line) == progress.Line(kind, text, step, total)


def test_printer_reports_each_step_once_with_cache_hits_and_logs_everything() -> None:
    out, log = io.StringIO(), io.StringIO()
    printer = progress.StepPrinter("worker 24.11", out, log)
    for chunk in STREAM:
        printer.feed(chunk)
    steps = printer.close()
    assert [(s.number, s.cached) for s in steps] == [(1, False), (2, True), (3, False), (4, False)]
    shown = out.getvalue().splitlines()
    assert shown == [
        "[worker 24.11] step 1/4: FROM slurmpod/base:24.11",
        "[worker 24.11] step 2/4: RUN apt-get update; apt-get install -y slurmd  [cache hit]",
        "[worker 24.11] step 3/4: COPY slurmpod-wheel/ /tmp/slurmpod-wheel/",
        "[worker 24.11] step 4/4: RUN pip install x",
    ]
    assert log.getvalue() == "".join(STREAM)


def test_one_line_shortens_long_instructions() -> None:
    text = "RUN " + "a " * 100
    short = progress.one_line(text, 40)
    assert len(short) == 40 and short.endswith("...")
    assert progress.one_line("RUN a \\\n    b") == "RUN a b"


def test_table_aligns_and_right_aligns_numbers() -> None:
    text = progress.table(["IMAGE", "SIZE MB"], [["slurmpod/worker", "221"], ["slurmpod/base", "6"]])
    assert text.splitlines() == [
        "IMAGE            SIZE MB",
        "slurmpod/worker      221",
        "slurmpod/base          6",
    ]
