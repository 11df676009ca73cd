"""The pod's input is read once: below the CLI and the typed-input loaders no module reads the process
environment or a downward-API file. An AST walk over every pod-side module, so a new reader fails here
whatever it is called or however it is spelt (``os.environ``, ``from os import getenv`` ...)."""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import paths
import pytest

from slurmpod import well_known as wk

ENV = "reads the process environment"
DOWNWARD = "opens a downward-API file"
# Module (path from the repository root) -> what it may do, and why.
ALLOWED: dict[str, frozenset[str]] = {
    "slurmpod/cli.py": frozenset({ENV}),  # the CLI: one frozen copy, handed to the command
    "slurmpod/task_prolog_cli.py": frozenset({ENV}),  # TaskProlog='s own command line (no arguments)
    "slurmpod/podinfo.py": frozenset({DOWNWARD}),  # the typed-input loader of PodInfo
    "slurmpod/well_known.py": frozenset({DOWNWARD}),  # where the file names are defined
}
ENV_NAMES = frozenset({"environ", "environb", "getenv", "getenvb"})
DOWNWARD_NAMES = frozenset({"PODINFO_LABELS", "PODINFO_ANNOTATIONS"})


@dataclass(frozen=True, slots=True)
class Finding:
    what: str
    line: int
    code: str


def _imported(node: ast.AST, module: str | None, names: frozenset[str]) -> bool:
    """``from MODULE import NAME`` (any module when ``module`` is None) of one of ``names``."""
    return isinstance(node, ast.ImportFrom) and module in (None, node.module) and \
        bool({a.name for a in node.names} & names)


def _kind(node: ast.AST, os_aliases: set[str]) -> str | None:
    if isinstance(node, ast.Attribute) and node.attr in ENV_NAMES and isinstance(node.value, ast.Name):
        return ENV if node.value.id in os_aliases else None
    if _imported(node, "os", ENV_NAMES):
        return ENV
    if isinstance(node, ast.Import) and any(a.name == "posix" for a in node.names):
        return ENV  # posix.environ is where os.environ comes from
    if isinstance(node, ast.Attribute) and node.attr in DOWNWARD_NAMES:
        return DOWNWARD
    if isinstance(node, ast.Name) and node.id in DOWNWARD_NAMES:
        return DOWNWARD
    if _imported(node, None, DOWNWARD_NAMES):
        return DOWNWARD
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(wk.PODINFO_DIR):
        return DOWNWARD
    return None


def findings(source: str) -> Iterator[Finding]:
    """Every read of the environment and every reference to a downward-API file in ``source``."""
    tree = ast.parse(source)
    os_aliases = {"os"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            os_aliases |= {a.asname or a.name for a in node.names if a.name == "os"}
    for node in ast.walk(tree):
        kind = _kind(node, os_aliases)
        if kind is not None:
            code = repr(node.value) if isinstance(node, ast.Constant) else ast.unparse(node)
            yield Finding(kind, getattr(node, "lineno", 0), code)


def pod_modules() -> list[Path]:
    """Every module of the pod distribution (pyproject.toml's package-dir), relative to the repository."""
    project = tomllib.loads((paths.REPO / "pyproject.toml").read_text(encoding="utf-8"))
    folders = sorted(set(project["tool"]["setuptools"]["package-dir"].values()))
    return sorted(p.relative_to(paths.REPO) for folder in folders for p in (paths.REPO / folder).rglob("*.py"))


MODULES = pod_modules()


def test_the_walk_covers_every_pod_package() -> None:
    tops = {m.parts[0] for m in MODULES}
    assert tops == {"slurmpod", "entrypoints", "prolog_epilog", "topology", "policy", "slurm_plugins"}
    assert len(MODULES) > 80
    assert {Path(p) for p in ALLOWED} <= set(MODULES)


@pytest.mark.parametrize("module", MODULES, ids=[str(m) for m in MODULES])
def test_no_module_below_the_cli_and_the_loaders_reads_pod_input(module: Path) -> None:
    allowed = ALLOWED.get(str(module), frozenset())
    found = [f for f in findings((paths.REPO / module).read_text(encoding="utf-8")) if f.what not in allowed]
    assert found == [], "take the value from the command's settings or PodInfo instead: " + "; ".join(
        f"{module}:{f.line} {f.what}: {f.code}" for f in found)


@pytest.mark.parametrize("module", sorted(ALLOWED), ids=sorted(ALLOWED))
def test_every_allowance_is_still_used(module: str) -> None:
    used = {f.what for f in findings((paths.REPO / module).read_text(encoding="utf-8"))}
    assert used == ALLOWED[module]


@pytest.mark.parametrize(
    ("source", "what"),
    [
        ("import os\nos.environ.get('POD_NAME')", ENV),
        ("import os as o\no.getenv('POD_NAME')", ENV),
        ("from os import environ", ENV),
        ("from os import getenv as g", ENV),
        ("import os\nos.environb[b'X']", ENV),
        ("import posix", ENV),
        ("from slurmpod import well_known as wk\nopen(wk.PODINFO_LABELS)", DOWNWARD),
        ("from slurmpod.well_known import PODINFO_ANNOTATIONS", DOWNWARD),
        ("open('/etc/podinfo/labels')", DOWNWARD),
    ],
    ids=["environ", "getenv-alias", "from-environ", "from-getenv", "environb", "posix", "labels", "annotations",
         "literal-path"],
)
def test_the_walk_sees_each_spelling(source: str, what: str) -> None:
    assert [f.what for f in findings(source)] == [what]


def test_the_walk_lets_mappings_and_other_names_be() -> None:
    source = "def f(env):\n    return env.get('POD_NAME'), env['X']\nimport os\nos.path.join('a')\n"
    assert list(findings(source)) == []
