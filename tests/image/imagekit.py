"""Helpers shared by the image tests (plain functions; fixtures live in conftest.py)."""

from __future__ import annotations

import argparse
import io
import tarfile
from collections.abc import Iterator
from typing import Any

from slurmpod_host.images import flavors
from slurmpod_host.images.flavors import Flavor

CONTAINER_PREFIX = "slurmpod-imagetest-"


def image_ref(name: str, flavor: Flavor) -> str:
    return f"{flavors.repository(name)}:{flavor.name}"


def build_args(flavor: Flavor, log_file: str | None = None) -> argparse.Namespace:
    """The namespace `slurmpod images build --flavor F` parses to (every other option at its default)."""
    return argparse.Namespace(flavor=flavor.name, role=None, base_image=None, mirror=None, log_file=log_file,
                              values_file=None)


class ChunkReader(io.RawIOBase):
    """A file object over the byte chunks `docker save` streams (for tarfile's stream mode)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        while not self._pending:
            try:
                self._pending = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(buf), len(self._pending))
        buf[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


def layer_members(saved: Iterator[bytes]) -> Iterator[tuple[str, str]]:
    """(layer, path) for every file in every layer of a `docker save` stream, read sequentially.
    Ref: https://github.com/moby/moby/blob/master/image/spec/v1.2.md (layer.tar per layer)."""
    with tarfile.open(fileobj=io.BufferedReader(ChunkReader(saved)), mode="r|") as outer:
        for member in outer:
            if not member.name.endswith("layer.tar"):
                continue
            layer = outer.extractfile(member)
            if layer is None:
                continue
            with tarfile.open(fileobj=layer, mode="r|") as inner:
                for entry in inner:
                    yield member.name, entry.name
