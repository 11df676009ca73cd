"""Image labels (OCI annotations + slurmpod's own) and the label-only layer that carries them.

Labels are added after the content is built, with a tiny ``FROM <content>`` + ``LABEL`` build:
the Slurm version is only known once the packages are installed, and the volatile labels
(created, revision) then never invalidate the cache of a content layer.
Ref: https://github.com/opencontainers/image-spec/blob/main/annotations.md
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from slurmpod import well_known

OCI = "org.opencontainers.image."
VOLATILE = frozenset({OCI + "created", OCI + "revision"})
SLURM_PACKAGE_VERSION = "io.slurmpod.slurm-package-version"  # Debian's full version string
SLURM_VERSION_PACKAGE = "slurm-client"  # in every image (base installs it)
_DEBIAN_VERSION = re.compile(r"^(?:\d+:)?(?P<upstream>[0-9][0-9A-Za-z.+~-]*?)(?:-[0-9A-Za-z.+~]+)?$")


@dataclass(frozen=True, slots=True)
class LabelInputs:
    role: str
    flavor: str
    version: str
    revision: str
    source: str
    created: str
    slurm_package_version: str
    base_name: str


def upstream_version(debian_version: str) -> str:
    """``24.11.5-4+deb13u1`` -> ``24.11.5``: drop the epoch and the Debian revision.
    Ref: deb-version(7)."""
    m = _DEBIAN_VERSION.match(debian_version.strip())
    if not m:
        raise ValueError(f"not a Debian version: {debian_version!r}")
    return m.group("upstream")


def compose(inputs: LabelInputs) -> dict[str, str]:
    return {
        OCI + "title": f"slurmpod-{inputs.role}",
        OCI + "version": inputs.version,
        OCI + "revision": inputs.revision,
        OCI + "source": inputs.source,
        OCI + "created": inputs.created,
        OCI + "licenses": "Apache-2.0",
        OCI + "base.name": inputs.base_name,
        well_known.IMAGE_LABEL_FLAVOR: inputs.flavor,
        well_known.IMAGE_LABEL_SLURM_VERSION: upstream_version(inputs.slurm_package_version),
        SLURM_PACKAGE_VERSION: inputs.slurm_package_version,
    }


def stable(labels: Mapping[str, str]) -> dict[str, str]:
    """The labels that describe the content (everything but created and revision)."""
    return {k: v for k, v in labels.items() if k not in VOLATILE}


def reusable(existing_parent: str, existing_labels: Mapping[str, str], content_id: str,
             wanted: Mapping[str, str]) -> bool:
    """An existing labeled image can stay when it sits on the same content with the same stable
    labels: rebuilding it would only move ``created`` and change its ID (and so the cache key of
    every image built FROM it)."""
    same = all(existing_labels.get(k) == v for k, v in stable(wanted).items())
    return existing_parent == content_id and same


def dockerfile(content_id: str, labels: Mapping[str, str]) -> str:
    """``FROM <id>`` + one LABEL instruction; keys and values JSON-quoted (Dockerfile strings
    accept the same double-quoted escapes). Ref: https://docs.docker.com/reference/dockerfile/#label"""
    pairs = " \\\n      ".join(f"{json.dumps(k)}={json.dumps(v)}" for k, v in sorted(labels.items()))
    return f"FROM {content_id}\nLABEL {pairs}\n"
