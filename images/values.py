"""Write the built images into a Helm-values-style YAML file, pinned by local image ID.

With no registry there is no repository digest; the local image ID (``sha256:...``) is the pin.
Only ``images.<role>`` entries are replaced; every other key of an existing file is kept
(comments are not: PyYAML does not keep them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from slurmpod.errors import BadInput


@dataclass(frozen=True, slots=True)
class Pin:
    role: str
    repository: str
    tag: str
    image_id: str
    slurm_version: str


def merge(document: Mapping[str, Any] | None, pins: Iterable[Pin]) -> dict[str, Any]:
    """Return ``document`` with ``images.<role>`` set for every pin (pure)."""
    out: dict[str, Any] = dict(document or {})
    images = dict(out.get("images") or {})
    for pin in pins:
        images[pin.role] = {
            "repository": pin.repository,
            "tag": pin.tag,
            "imageId": pin.image_id,
            "slurmVersion": pin.slurm_version,
        }
    out["images"] = images
    return out


def update(path: Path, pins: Iterable[Pin]) -> None:
    document: Any = None
    if path.is_file():
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        if document is not None and not isinstance(document, dict):
            raise BadInput.one("values-file", str(path), "exists but is not a YAML mapping")
        if document is not None and not isinstance(document.get("images") or {}, dict):
            raise BadInput.one("values-file", str(path), "its `images` key is not a mapping")
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(merge(document, pins), sort_keys=False, default_flow_style=False)
    path.write_text(text, encoding="utf-8")
