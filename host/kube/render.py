"""Fill the template files in ./templates (``${name}`` placeholders, string.Template) and write them."""

from __future__ import annotations

import string
from collections.abc import Mapping
from importlib import resources
from pathlib import Path


def text(template: str, values: Mapping[str, str]) -> str:
    """The template file ``template`` with every placeholder filled; KeyError names a missing one."""
    source = resources.files("slurmpod_host.kube.templates").joinpath(template).read_text(encoding="utf-8")
    return string.Template(source).substitute(values)


def write(path: Path, template: str, values: Mapping[str, str], mode: int = 0o600) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text(template, values), encoding="utf-8")
    tmp.chmod(mode)
    tmp.replace(path)
    return path
