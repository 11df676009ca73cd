"""`slurmpod images pin --values FILE`: write the digests of the built images into a Helm values file.

Works on deploy/helm/slurmpod's values and on Slinky's `slurm` chart values: both put an image object
`{repository, tag, digest}` at controller.slurmctld.image, nodesets.<name>.slurmd.image,
loginsets.<name>.login.image, accounting.slurmdbd.image and restapi.slurmrestd.image (ours also has
accounting.db.image: the db pod runs the accounting image), and render `repository@digest` when digest
is set. Only the `digest` scalars change (or a `digest:` line is added under `tag:`); comments, order and
every other byte stay, because the edit is made on the text at the positions PyYAML's composer reports.

The digest pinned is the image's RepoDigest for the file's `repository` (Docker records one after a
`docker push` to it): the manifest digest a kubelet resolves `repository@digest` against. A locally built
image has none. Its image ID (the config's sha256) names the build exactly, but containerd's CRI does not
resolve `repository@<image ID>` for side-loaded images (they get no repo digest: kind#2734,
containerd/cri#1079), so the ID is written only with --local-id (`local_id`), for traceability.
Ref: https://kubernetes.io/docs/concepts/containers/images/#image-names
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import docker
import yaml

from slurmpod import well_known
from slurmpod.errors import BadInput
from slurmpod_host.images.engine import Engine

# Where both charts keep each role's image object; `*` is any nodeset or loginset name.
ROLE_PATHS = (("controller.slurmctld.image", "controller"), ("nodesets.*.slurmd.image", "worker"),
              ("loginsets.*.login.image", "login"), ("accounting.slurmdbd.image", "accounting"),
              ("accounting.db.image", "accounting"), ("restapi.slurmrestd.image", "restapi"))
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class Target:
    """One image object of the values file and the built image whose digest it gets."""

    path: str  # dotted key path, e.g. nodesets.workers.slurmd.image
    role: str
    repository: str
    node: yaml.MappingNode


@dataclass(frozen=True, slots=True)
class Built:
    """What the engine knows of a built image."""

    ref: str  # slurmpod/<role>:<flavor>
    image_id: str
    repo_digests: tuple[str, ...]

    def digest_for(self, repository: str, local_id: bool) -> str | None:
        for entry in self.repo_digests:
            name, _, digest = entry.partition("@")
            if name == repository and _DIGEST.fullmatch(digest):
                return digest
        return self.image_id if local_id else None


def _walk(node: yaml.Node, prefix: str = "") -> list[tuple[str, yaml.Node]]:
    out: list[tuple[str, yaml.Node]] = []
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            path = f"{prefix}.{key.value}" if prefix else str(key.value)
            out.append((path, value))
            out.extend(_walk(value, path))
    return out


def _get(node: yaml.MappingNode, key: str) -> yaml.Node | None:
    return next((v for k, v in node.value if k.value == key), None)


def _compose(path: Path) -> tuple[str, yaml.Node]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput.one("--values", str(path), f"cannot read: {exc.strerror}") from None
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        raise BadInput.one("--values", str(path), f"not YAML: {exc}") from None
    if not isinstance(root, yaml.MappingNode):
        raise BadInput.one("--values", str(path), "is not a YAML mapping")
    return text, root


def targets(root: yaml.Node, paths: Sequence[tuple[str, str]] | None) -> list[Target]:
    """The image objects to pin: the ``paths`` given (KEYPATH, ROLE), or every one of ROLE_PATHS found."""
    found = dict(_walk(root))
    wanted: list[tuple[str, str]] = []
    if paths:
        for keypath, role in paths:
            if keypath not in found:
                raise BadInput.one("--path", keypath, "no such key path in the values file")
            wanted.append((keypath, role))
    else:
        wanted = [(p, role) for p in found for pattern, role in ROLE_PATHS if fnmatch.fnmatchcase(p, pattern)
                  and p.count(".") == pattern.count(".")]
        if not wanted:
            raise BadInput.one("--values", "", "no image object at " + ", ".join(p for p, _ in ROLE_PATHS))
    out = []
    for keypath, role in wanted:
        node = found[keypath]
        if not isinstance(node, yaml.MappingNode):
            raise BadInput.one(keypath, str(getattr(node, "value", ""))[:60],
                               "must be an image object {repository, tag, digest} to be pinned")
        repo = _get(node, "repository")
        if not isinstance(repo, yaml.ScalarNode) or not repo.value:
            raise BadInput.one(f"{keypath}.repository", "", "required")
        out.append(Target(keypath, role, str(repo.value), node))
    return out


def _edits(text: str, target: Target, digest: str) -> tuple[int, int, str]:
    """(start, end, replacement) that sets the digest of ``target`` in ``text``."""
    node = target.node
    current = _get(node, "digest")
    quoted = f'"{digest}"'
    if current is not None:
        if not isinstance(current, yaml.ScalarNode):
            raise BadInput.one(f"{target.path}.digest", "", "must be a string")
        return current.start_mark.index, current.end_mark.index, quoted
    if node.flow_style:  # {repository: r, tag: t} -> {repository: r, tag: t, digest: "..."}
        close = node.end_mark.index - 1
        return close, close, f", digest: {quoted}"
    last_key, last_value = node.value[-1]
    line_end = text.find("\n", last_value.end_mark.index)
    at = len(text) if line_end < 0 else line_end
    indent = " " * last_key.start_mark.column
    return at, at, f"\n{indent}digest: {quoted}"


def pin(text: str, chosen: Sequence[Target], lookup: Callable[[str], Built | None], flavor: str,
        local_id: bool = False) -> str:
    """``text`` with each target's digest set (pure but for ``lookup``)."""
    edits = []
    for target in chosen:
        ref = f"{well_known.IMAGE_REPOSITORY_PREFIX}{target.role}:{flavor}"
        built = lookup(ref)
        if built is None:
            raise BadInput.one(target.path, ref, "image not built (run `slurmpod images build`)")
        digest = built.digest_for(target.repository, local_id)
        if digest is None:
            raise BadInput.one(f"{target.path}.repository", target.repository,
                               f"{ref} has no RepoDigest there: `docker tag` and `docker push` it to that "
                               "repository and pin again (or --local-id to write its image ID)")
        edits.append(_edits(text, target, digest))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _engine_lookup() -> Callable[[str], Built | None]:
    api = Engine.connect().client.api

    def lookup(ref: str) -> Built | None:
        try:
            attrs: Any = api.inspect_image(ref)
        except docker.errors.ImageNotFound:
            return None
        return Built(ref, str(attrs["Id"]), tuple(attrs.get("RepoDigests") or ()))

    return lookup


def _parse_paths(raw: Sequence[str] | None) -> list[tuple[str, str]] | None:
    if not raw:
        return None
    out = []
    for item in raw:
        keypath, sep, role = item.partition("=")
        if not sep or role not in ("controller", "worker", "login") or not keypath:
            raise BadInput.one("--path", item, "expected KEYPATH=controller|worker|login")
        out.append((keypath, role))
    return out


def run(values: Path, flavor: str, paths: list[tuple[str, str]] | None,
        lookup: Callable[[str], Built | None], *, out: TextIO = sys.stdout, local_id: bool = False) -> None:
    text, root = _compose(values)
    chosen = targets(root, paths)
    new = pin(text, chosen, lookup, flavor, local_id)
    values.write_text(new, encoding="utf-8")
    for t in chosen:
        print(f"pinned {t.path} ({t.role})", file=out)


def main(args: argparse.Namespace) -> int:
    paths = _parse_paths(getattr(args, "path", None))
    values = Path(args.values)
    if not values.is_file():
        raise BadInput.one("--values", str(values), "no such file")
    run(values, args.flavor, paths, _engine_lookup(), local_id=bool(getattr(args, "local_id", False)))
    return 0
