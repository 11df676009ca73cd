"""The one place that talks to the Docker engine (Python docker SDK, API 1.41, classic builder).

Everything the build needs from Docker is a method here, returning plain frozen data; the rest of
slurmpod_host.images never touches the SDK. Ref: https://docker-py.readthedocs.io/en/stable/api.html
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker  # host-side dependency (the `host` extra): images are built on the host
import docker.errors

from slurmpod.errors import PermanentError

API_VERSION = "1.41"  # Debian's docker.io 20.10; the SDK would negotiate it, pinning makes it explicit
HTTP_TIMEOUT_S = 1800  # per socket read: a quiet build step (apt unpacking) may print nothing for minutes
BUILD_CONTAINER_PREFIX = "slurmpod-build-"


@dataclass(frozen=True, slots=True)
class ImageInfo:
    id: str
    tags: tuple[str, ...]
    size: int
    """Uncompressed bytes of all layers, as `docker images` shows."""
    parent: str
    """The image this one was built on (set for locally built images only)."""
    created: str
    labels: Mapping[str, str] = field(default_factory=dict)


def _info(attrs: Mapping[str, Any]) -> ImageInfo:
    config = attrs.get("Config") or {}
    return ImageInfo(
        id=str(attrs["Id"]),
        tags=tuple(attrs.get("RepoTags") or ()),
        size=int(attrs.get("Size") or 0),
        parent=str(attrs.get("Parent") or ""),
        created=str(attrs.get("Created") or ""),
        labels=dict(config.get("Labels") or attrs.get("Labels") or {}),
    )


class BuildFailed(PermanentError):
    """The builder reported an error; the message carries the step output before it."""


class Engine:
    """Thin wrapper over ``docker.DockerClient``."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._api = client.api

    @property
    def client(self) -> Any:
        """The underlying ``docker.DockerClient`` (for tests that inspect images directly)."""
        return self._client

    @classmethod
    def connect(cls) -> Engine:
        try:
            client = docker.from_env(version=API_VERSION, timeout=HTTP_TIMEOUT_S)
            client.ping()
        except Exception as exc:
            raise PermanentError(f"Docker engine not reachable ({exc}); is dockerd running?") from exc
        return cls(client)

    def image(self, ref: str) -> ImageInfo | None:
        try:
            return _info(self._api.inspect_image(ref))
        except docker.errors.ImageNotFound:
            return None

    def images(self) -> list[ImageInfo]:
        found = []
        for summary in self._api.images():
            info = self.image(summary["Id"])
            if info is not None:
                found.append(info)
        return found

    def build(self, on_text: Callable[[str], None], *, path: Path | None = None,
              dockerfile_text: str | None = None, buildargs: Mapping[str, str] | None = None) -> str:
        """Build with the classic builder, streaming text to ``on_text``; returns the image ID."""
        kwargs: dict[str, Any] = {"rm": True, "forcerm": True, "decode": True, "pull": False,
                                  "buildargs": dict(buildargs or {}), "use_config_proxy": False}
        if path is not None:
            kwargs["path"] = str(path)
        else:
            kwargs["fileobj"] = io.BytesIO((dockerfile_text or "").encode())
        image_id = ""
        tail: list[str] = []
        for chunk in self._api.build(**kwargs):
            if "stream" in chunk:
                text = str(chunk["stream"])
                tail = (tail + text.splitlines())[-40:]
                on_text(text)
            elif "error" in chunk:
                on_text("ERROR: " + str(chunk["error"]) + "\n")
                raise BuildFailed("\n".join([*tail[-25:], str(chunk["error"]).strip()]))
            elif "aux" in chunk and isinstance(chunk["aux"], dict) and "ID" in chunk["aux"]:
                image_id = str(chunk["aux"]["ID"])
            elif "status" in chunk:
                on_text(str(chunk["status"]) + "\n")
        if not image_id:
            raise BuildFailed("the builder finished without reporting an image ID:\n" + "\n".join(tail[-25:]))
        return image_id

    def import_tar(self, tar: Path, repository: str, tag: str, changes: list[str]) -> ImageInfo:
        """``docker import``: a root file system tarball becomes a one-layer image."""
        self._api.import_image_from_file(str(tar), repository=repository, tag=tag, changes=changes)
        info = self.image(f"{repository}:{tag}")
        if info is None:
            raise PermanentError(f"docker import of {tar} produced no image {repository}:{tag}")
        return info

    def tag(self, image_id: str, repository: str, tag: str) -> None:
        if not self._api.tag(image_id, repository, tag, force=True):
            raise PermanentError(f"could not tag {image_id} as {repository}:{tag}")

    def output(self, image: str, argv: list[str], timeout: float = 120) -> str:
        """Run ``argv`` in a throw-away container (no network) and return its stdout.

        create/start/wait/logs rather than ``containers.run``: run() follows the log stream while
        the container may already have exited and then sometimes returns nothing."""
        name = BUILD_CONTAINER_PREFIX + uuid.uuid4().hex[:12]
        container = self._client.containers.create(image, entrypoint=argv[:1], command=argv[1:], name=name,
                                                   network_disabled=True)
        try:
            container.start()
            status = int(container.wait(timeout=timeout).get("StatusCode", -1))
            out = bytes(container.logs(stdout=True, stderr=False)).decode("utf-8", errors="replace")
            if status != 0:
                err = bytes(container.logs(stdout=False, stderr=True)).decode("utf-8", errors="replace")
                raise PermanentError(f"{argv} in {image} exited {status}: {err.strip()[-500:]}")
            return out
        finally:
            container.remove(force=True)
