"""deploy/slinky/values.yaml: every key is a value of Slinky's `slurm` chart, documented where it is set.

The chart's key paths are listed in data/slinky_chart_value_paths.txt (from its values.yaml, commit in
the file's header). nodesets.<name> and loginsets.<name> take nodesetDefaults / loginsetDefaults keys;
free-form maps (extraConfMap, prolog/epilog scripts) take any key below them.
"""

from __future__ import annotations

import re
from typing import Any

import paths
import yaml

from slurmpod import well_known as wk

ROOT = paths.REPO
VALUES = ROOT / "deploy/slinky/values.yaml"
PATHS = paths.UNIT / "data/slinky_chart_value_paths.txt"
FREE_FORM = ("controller.extraConfMap", "prologScripts", "epilogScripts")
NAMED = {"nodesets": "nodesetDefaults", "loginsets": "loginsetDefaults"}


def _chart_paths() -> set[str]:
    return {line for line in PATHS.read_text().splitlines() if line and not line.startswith("#")}


def _paths(value: Any, prefix: str = "") -> list[str]:
    out = []
    for key, sub in value.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        out.append(path)
        if isinstance(sub, dict) and not path.startswith(FREE_FORM):
            out += _paths(sub, path)
    return out


def _as_chart_path(path: str) -> str:
    head, _, rest = path.partition(".")
    if head in NAMED and rest:
        _name, _, tail = rest.partition(".")
        return f"{NAMED[head]}.{tail}" if tail else head
    return path


def test_every_key_is_a_chart_value() -> None:
    chart = _chart_paths()
    values = yaml.safe_load(VALUES.read_text())
    unknown = [p for p in _paths(values) if _as_chart_path(p) not in chart]
    assert unknown == []


def test_every_key_says_which_chart_value_it_sets() -> None:
    """A comment on each key's line or just above it; keys inside free-form maps are exempt."""
    lines = VALUES.read_text().splitlines()
    stack: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)([A-Za-z][\w.-]*):", line)
        if not m:
            continue
        indent = len(m.group(1))
        stack = [(n, k) for n, k in stack if n < indent]
        path = ".".join([*(k for _, k in stack), m.group(2)])
        stack.append((indent, m.group(2)))
        if any(path.startswith(f"{f}.") for f in FREE_FORM):
            continue
        assert "#" in line or (i > 0 and lines[i - 1].lstrip().startswith("#")), f"line {i + 1}: {line}"


def test_hooks_and_plugin_point_at_what_our_images_install() -> None:
    values = yaml.safe_load(VALUES.read_text())
    conf = values["controller"]["extraConfMap"]
    assert conf["JobSubmitPlugins"] == "slurmpod"
    assert conf["HealthCheckProgram"] == wk.HEALTHCHECK_BIN
    assert wk.PROLOG_BIN in values["prologScripts"]["slurmpod.sh"]
    assert wk.EPILOG_BIN in values["epilogScripts"]["slurmpod.sh"]
    assert values["nodesets"]["slinky"]["slurmd"]["image"]["repository"] == "slurmpod/worker"


def test_images_pin_sets_only_the_digests() -> None:
    from slurmpod_host.images import pin

    text = VALUES.read_text()
    root = yaml.compose(text)
    chosen = pin.targets(root, None)
    assert [(t.path, t.role) for t in chosen] == [
        ("controller.slurmctld.image", "controller"), ("nodesets.slinky.slurmd.image", "worker"),
        ("loginsets.slinky.login.image", "login")]
    digest = "sha256:" + "ab" * 32

    def lookup(ref: str) -> pin.Built:
        return pin.Built(ref, digest, ())

    out = pin.pin(text, chosen, lookup, "26.05", local_id=True)
    assert out.count(f'"{digest}"') + out.count(f" {digest}") == 3
    assert [a for a in text.splitlines() if "digest" not in a] == [b for b in out.splitlines() if "digest" not in b]
