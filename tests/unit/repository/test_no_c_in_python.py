"""No Python module holds more than 40 lines of C: C lives in .c/.h files, where a compiler and an editor
see it (slurm_plugins/*.c, tests/fakes/*).

An AST walk over every string constant (docstrings, f-string parts and implicitly joined literals
included) of every .py in the pod packages (pyproject's package-dir), images/, host/ and scripts/.
A string looks like C when at least a third of its non-blank lines are C-shaped: a preprocessor line
(#include, #define, #if...), or a line ending in ``;``, ``{`` or ``}``. Prose, YAML, shell and Slurm
config lines rarely end that way, and a docstring with the odd ``;`` stays far below a third. Every
non-blank line of a C-looking string counts as C; a module's strings are summed, so C cut into many
small strings is counted whole. cffi declarations of a few functions (prolog_epilog/cudalib.py) are C
too, and fit.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import paths
import pytest

MAX_C_LINES = 40
C_LINE = re.compile(r"^\s*#\s*(include|define|undef|if|ifdef|ifndef|elif|else|endif|error|pragma)\b|[;{}]\s*$")


def c_lines(text: str) -> int:
    """How many lines of C ``text`` holds: all its non-blank lines when it looks like C, else 0."""
    lines = [line for line in text.splitlines() if line.strip()]
    shaped = sum(1 for line in lines if C_LINE.search(line))
    return len(lines) if lines and shaped * 3 >= len(lines) else 0


def module_c_lines(source: str) -> int:
    return sum(c_lines(node.value) for node in ast.walk(ast.parse(source))
               if isinstance(node, ast.Constant) and isinstance(node.value, str))


def _python_files() -> list[Path]:
    project = tomllib.loads((paths.REPO / "pyproject.toml").read_text(encoding="utf-8"))
    roots = {*project["tool"]["setuptools"]["package-dir"].values(), "images", "host", "scripts"}
    skip = {paths.REPO / "build", paths.REPO / "host" / "build"}
    return sorted(p for root in roots for p in (paths.REPO / root).rglob("*.py")
                  if not any(s in p.parents for s in skip))


FILES = _python_files()


def test_the_walk_covers_the_pod_packages_and_the_host() -> None:
    tops = {p.relative_to(paths.REPO).parts[0] for p in FILES}
    assert {"slurmpod", "entrypoints", "prolog_epilog", "topology", "policy", "slurm_plugins", "host",
            "images"} <= tops


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(paths.REPO)))
def test_no_module_holds_more_than_40_lines_of_c(path: Path) -> None:
    found = module_c_lines(path.read_text(encoding="utf-8"))
    assert found <= MAX_C_LINES, f"{found} lines of C in Python strings: move them to a .c/.h file"


def test_the_plugins_own_c_reads_as_c() -> None:
    """The heuristic recognizes real C: each of the plugin's sources, put in a string, is too much."""
    for source in ("job_submit_slurmpod.c", "fastpath.c"):
        text = (paths.REPO / "slurm_plugins" / source).read_text(encoding="utf-8")
        assert module_c_lines(f"C = {text!r}\n") > MAX_C_LINES, source


def test_prose_and_config_do_not_read_as_c() -> None:
    prose = '"""Build the plugin; then load it.\n\nIt never fails: jobs are rejected instead.\n- one;\n- two\n"""\n'
    conf = 'CONF = """\nNodeName=w-0 CPUs=8\nPartitionName=main Nodes=ALL Default=YES\n""" * 30\n'
    assert module_c_lines(prose) == 0 and module_c_lines(conf) == 0
    joined = "".join(f'P{i} = "int x{i};\\n"\n' for i in range(MAX_C_LINES + 1))
    assert module_c_lines(joined) == MAX_C_LINES + 1  # C cut into small strings is counted whole
