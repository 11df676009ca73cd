"""The policy is plain Python: nothing in slurmpod.policy imports the plugin that hosts it (an AST walk).

slurmpod.slurm_plugins imports the policy, never the other way round, so the policy and `slurmpod policy
check` work where no plugin is built and no cffi is installed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import paths
import pytest

POLICY = paths.REPO / "policy"
FORBIDDEN = ("slurmpod.slurm_plugins", "cffi", "_slurmpod_job_submit")


def _imports(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return names


@pytest.mark.parametrize("path", sorted(POLICY.glob("*.py")), ids=lambda p: p.name)
def test_the_policy_does_not_import_the_plugin(path: Path) -> None:
    found = [name for name in _imports(ast.parse(path.read_text(encoding="utf-8")))
             if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)]
    assert not found, f"{path.name} imports {found}"
