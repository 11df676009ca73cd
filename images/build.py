"""`slurmpod images build` and `slurmpod images list`.

Order of work: root file system (debootstrap + import, once per suite) -> wheelhouse (host pip,
cached) -> slurmpod wheel (host pip, from the source tree) -> base -> roles. Each image is built
in a small temporary context (its Dockerfile and the files it copies), then labeled by a
label-only layer once its Slurm version is known, then tagged ``<flavor>`` and
``<flavor>-<version>``. Every line the builder prints goes to the log file.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from slurmpod import well_known
from slurmpod.errors import BadInput, PermanentError

from . import labels, mirror, rootfs, values, wheelhouse
from .engine import Engine, ImageInfo
from .flavors import (
    ALL_IMAGES,
    BASE,
    DEFAULT_FLAVOR,
    HOOK_BUILD_PACKAGES,
    HWLOC_UNUSED_PLUGINS,
    MPI_BUILD_PACKAGES,
    MPI_STUBS,
    PLUGIN_BUILD_PACKAGES,
    PYTHON_REQUIREMENTS,
    SSSD_SOURCE_PACKAGE,
    Flavor,
    get,
    repository,
    rootfs_image,
    tags,
)
from .progress import StepPrinter, StepRecord, table

HERE = Path(__file__).resolve().parent
DOCKERFILES = HERE / "dockerfiles"
FILES = HERE / "files"
# The OpenMPI layer's script and what it installs (worker and login run the same layer).
MPI_CONTEXT_FILES = ("install-mpi.sh", "mpi_hello.c", "openmpi-mca-params.conf", "psm2_absent.c", "psm2_absent.map")
# The worker's hook programs and the script that builds them.
# slurmd's PrEp plugin and the agent client it shares with the hook programs (the controller's slurmctld
# loads PrEpPlugins too).
PREP_CONTEXT_FILES = ("prep_slurmpod.c", "slurmd_job_env.h", "slurmpod_agent_ask.c", "slurmpod_agent_ask.h")
HOOK_CONTEXT_FILES = ("install-hooks.sh", "slurmpod_hook.c", "slurmpod_spank.c", "slurmpod_task_env.c",
                      "slurmpod_task_env.h", "slurmpod_cpus.c", "slurmpod_cpus.h", *PREP_CONTEXT_FILES)
# Files from images/files each image's context carries (besides its Dockerfile).
CONTEXT_FILES: dict[str, tuple[str, ...]] = {
    "worker": ("sshd_slurmpod.conf", "pam-slurmpod-mkhomedir", *MPI_CONTEXT_FILES, *HOOK_CONTEXT_FILES),
    "login": ("sshd_slurmpod.conf", "pam-slurmpod-mkhomedir", *MPI_CONTEXT_FILES),
    "controller": PREP_CONTEXT_FILES,
}
MB = 1_000_000  # sizes are reported in MB as `docker images` does
GIT_TIMEOUT_S = 10


@dataclass(frozen=True, slots=True)
class BuildSettings:
    flavor: Flavor
    images: tuple[str, ...]
    """What to build, in build order (base first); see `plan_images`."""
    repo: Path
    """Source checkout the slurmpod wheel is built from."""
    build_dir: Path
    """Wheelhouse cache (build/wheelhouse-py3XX) lives here."""
    log_file: Path
    base_image: str | None = None
    """Registry image to start from instead of the debootstrapped root file system."""
    mirror: str | None = None
    """Explicit Debian mirror; None = the host's apt sources (debootstrap only)."""
    values_file: Path | None = None
    prefix: str = well_known.IMAGE_REPOSITORY_PREFIX
    """Repository prefix of the images this run tags (``slurmpod/``)."""
    base_ref: str | None = None
    """Image the roles build FROM; default ``<prefix>base:<flavor>``."""

    def base_from(self) -> str:
        return self.base_ref or f"{repository(BASE, self.prefix)}:{self.flavor.name}"


@dataclass(frozen=True, slots=True)
class Built:
    name: str
    repository: str
    tags: tuple[str, ...]
    image_id: str
    size: int
    seconds: float
    slurm_version: str
    steps: tuple[StepRecord, ...]
    labels_reused: bool

    @property
    def cached_steps(self) -> int:
        return sum(1 for s in self.steps if s.cached)


def plan_images(requested: Sequence[str] | None, base_exists: bool) -> tuple[str, ...]:
    """Requested images in build order; base is added when a role needs it and it is missing."""
    wanted = set(requested or ALL_IMAGES)
    unknown = wanted - set(ALL_IMAGES)
    if unknown:
        raise BadInput.one("role", ",".join(sorted(unknown)), f"expected some of {', '.join(ALL_IMAGES)}")
    if wanted - {BASE} and not base_exists:
        wanted.add(BASE)
    return tuple(n for n in ALL_IMAGES if n in wanted)


def find_repo(start: Sequence[Path] = ()) -> Path:
    """The slurmpod source checkout: next to this module (editable install) or above the cwd."""
    for origin in [*start, HERE, Path.cwd()]:
        for candidate in [origin, *origin.parents]:
            project = candidate / "pyproject.toml"
            if project.is_file():
                name = tomllib.loads(project.read_text(encoding="utf-8")).get("project", {}).get("name")
                if name == "slurmpod":
                    return candidate
    raise PermanentError("building images needs the slurmpod source tree (pyproject.toml): run in a checkout")


def git_revision(repo: Path) -> str:
    """``git rev-parse HEAD`` (read-only), or ``unknown`` outside a git checkout."""
    try:
        proc = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    rev = proc.stdout.strip()
    return rev if proc.returncode == 0 and rev else "unknown"


def project_source(repo: Path) -> str:
    project = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    urls = project.get("urls", {})
    return str(urls.get("Source", "unknown"))


def build_args(settings: BuildSettings, name: str, rootfs_ref: str) -> dict[str, str]:
    """Build arguments of one image's Dockerfile (every ARG it declares without a default)."""
    flavor = settings.flavor
    packages = " ".join(flavor.role_packages(name))
    if name == BASE:
        return {
            "ROOTFS_IMAGE": rootfs_ref,
            "SUITE": flavor.suite,
            "SSSD_SUITE": flavor.sssd_suite,
            "SSSD_SOURCE": SSSD_SOURCE_PACKAGE,
            "APT_CHECK_VALID_UNTIL": "true" if flavor.apt_check_valid_until else "false",
            "APT_MIRROR": settings.mirror or "",
            "SLURM_UID": str(well_known.SLURM_UID),
            "MUNGE_UID": str(well_known.MUNGE_UID),
            "DEMO_USER": well_known.DEMO_USER,
            "DEMO_UID": str(well_known.DEMO_UID),
            "APT_PACKAGES": packages,
            "PYTHON_REQUIREMENTS": " ".join(PYTHON_REQUIREMENTS),
        }
    args = {"BASE_IMAGE": settings.base_from(), "APT_PACKAGES": packages}
    if name == "worker":
        args["CONTRIB_SUITE"] = flavor.nvml_plugin_suite
        args["HOOK_BUILD_PACKAGES"] = " ".join(HOOK_BUILD_PACKAGES)
    if flavor.mpi_packages(name):
        args["MPI_PACKAGES"] = " ".join(flavor.mpi_packages(name))
        args["MPI_STUBS"] = " ".join(MPI_STUBS)
        args["HWLOC_UNUSED_PLUGINS"] = " ".join(HWLOC_UNUSED_PLUGINS)
        args["MPI_BUILD_PACKAGES"] = " ".join(MPI_BUILD_PACKAGES)
    if name == "controller":
        args["BUILD_PACKAGES"] = " ".join(PLUGIN_BUILD_PACKAGES)
    if name == "accounting":
        args["MYSQL_UID"] = str(well_known.MYSQL_UID)
    if name == "restapi":
        args["SLURMRESTD_USER"] = well_known.SLURMRESTD_USER
        args["SLURMRESTD_UID"] = str(well_known.SLURMRESTD_UID)
    return args


def make_context(name: str, into: Path, wheels: Path | None, slurmpod_wheel: Path | None) -> None:
    """The smallest build context: Dockerfile + what its COPY lines name."""
    shutil.copyfile(DOCKERFILES / f"{name}.Dockerfile", into / "Dockerfile")
    for f in CONTEXT_FILES.get(name, ()):
        shutil.copyfile(FILES / f, into / f)
    if name == BASE:
        if wheels is None:
            raise PermanentError("base image build needs the wheelhouse")
        (into / "wheelhouse").mkdir()
        for whl in sorted(wheels.glob("*.whl")):
            shutil.copyfile(whl, into / "wheelhouse" / whl.name)
    else:
        if slurmpod_wheel is None:
            raise PermanentError(f"{name} image build needs the slurmpod wheel")
        (into / "slurmpod-wheel").mkdir()
        shutil.copyfile(slurmpod_wheel, into / "slurmpod-wheel" / slurmpod_wheel.name)


class Builder:
    """One `images build` run: holds the engine, the settings and the open log."""

    def __init__(self, engine: Engine, settings: BuildSettings, out: TextIO, log: TextIO) -> None:
        self.engine = engine
        self.s = settings
        self.out = out
        self.log = log
        self.version = wheelhouse.project_version(settings.repo)
        self.revision = git_revision(settings.repo)
        self.source = project_source(settings.repo)

    def say(self, message: str) -> None:
        print(message, file=self.out, flush=True)
        self.log.write(message + "\n")
        self.log.flush()

    def _log_text(self, text: str) -> None:
        self.log.write(text)

    def _pipe_log(self, lines: list[str]) -> None:
        for chunk in lines:
            self.log.write(chunk if chunk.endswith("\n") else chunk + "\n")
        self.log.flush()

    def rootfs(self) -> str:
        """The image base builds FROM: --base-image, or slurmpod/rootfs:<suite> (debootstrap if missing)."""
        if self.s.base_image:
            return self.s.base_image
        ref = rootfs_image(self.s.flavor, self.s.prefix)
        if self.engine.image(ref) is not None:
            self.say(f"[rootfs {self.s.flavor.suite}] {ref} exists; not running debootstrap again")
            return ref
        source = mirror.check_mirror(self.s.mirror) if self.s.mirror else mirror.host_mirror()
        self.say(f"[rootfs {self.s.flavor.suite}] debootstrap --variant=minbase from {source}")
        started = time.monotonic()
        workdir = rootfs.temp_workdir()
        lines: list[str] = []
        try:
            tar = rootfs.make_rootfs_tar(self.s.flavor, source, workdir, lines)
            self._pipe_log(lines)
            lines.clear()
            repo_name, tag = ref.split(":", 1)
            info = self.engine.import_tar(tar, repo_name, tag, ['CMD ["/bin/bash"]'])
        finally:
            self._pipe_log(lines)
            rootfs.remove_tree(workdir)
        self.say(f"[rootfs {self.s.flavor.suite}] imported {ref} {info.id[7:19]} "
                 f"{info.size / MB:.0f} MB in {time.monotonic() - started:.0f} s")
        return ref

    def build_one(self, name: str, rootfs_ref: str, wheels: Path | None, wheel: Path | None) -> Built:
        label = f"{name} {self.s.flavor.name}"
        started = time.monotonic()
        self.log.write(f"\n===== {repository(name, self.s.prefix)} ({self.s.flavor.name}) =====\n")
        printer = StepPrinter(label, self.out, self.log)
        args = build_args(self.s, name, rootfs_ref)
        self.log.write("build args: " + " ".join(f"{k}={v}" for k, v in sorted(args.items())) + "\n")
        with tempfile.TemporaryDirectory(prefix=f"slurmpod-ctx-{name}.") as ctx:
            make_context(name, Path(ctx), wheels, wheel)
            try:
                content_id = self.engine.build(printer.feed, path=Path(ctx), buildargs=args)
            finally:
                steps = tuple(printer.close())
        query = ["dpkg-query", "--show", "--showformat=${Version}", labels.SLURM_VERSION_PACKAGE]
        pkg_version = self.engine.output(content_id, query).strip()
        repo_name = repository(name, self.s.prefix)
        image_tags = tags(self.s.flavor, self.version)
        wanted = labels.compose(labels.LabelInputs(
            role=name, flavor=self.s.flavor.name, version=self.version, revision=self.revision,
            source=self.source, created=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            slurm_package_version=pkg_version,
            base_name=rootfs_ref if name == BASE else self.s.base_from()))
        existing = self.engine.image(f"{repo_name}:{image_tags[0]}")
        if existing is not None and labels.reusable(existing.parent, existing.labels, content_id, wanted):
            reused, final_id = True, existing.id
            printer.say("content unchanged: keeping the labeled image")
        else:
            reused = False
            self.log.write("label layer:\n")
            text = labels.dockerfile(content_id, wanted)
            final_id = self.engine.build(self._log_text, dockerfile_text=text)
        for tag in image_tags:
            self.engine.tag(final_id, repo_name, tag)
        info = self.engine.image(final_id)
        size = info.size if info else 0
        seconds = time.monotonic() - started
        slurm = labels.upstream_version(pkg_version)
        cached = sum(s.cached for s in steps)
        printer.say(f"built {repo_name}:{image_tags[0]} {final_id[7:19]} {size / MB:.0f} MB slurm {slurm} "
                    f"in {seconds:.1f} s ({cached}/{len(steps)} steps cached)")
        return Built(name, repo_name, image_tags, final_id, size, seconds, slurm, steps, reused)

    def run(self) -> list[Built]:
        lines: list[str] = []
        names = self.s.images
        rootfs_ref = self.rootfs() if BASE in names else ""
        wheels = None
        if BASE in names:
            house = wheelhouse.ensure_wheelhouse(self.s.build_dir, self.s.flavor, lines)
            self._pipe_log(lines)
            lines.clear()
            state = "downloaded" if house.downloaded else "cached"
            self.say(f"[wheelhouse {self.s.flavor.python_tag}] {state}: {house.path}")
            wheels = house.path
        built: list[Built] = []
        with tempfile.TemporaryDirectory(prefix="slurmpod-wheel.") as tmp:
            wheel = None
            if set(names) - {BASE}:
                started = time.monotonic()
                wheel = wheelhouse.build_slurmpod_wheel(self.s.repo, Path(tmp), lines)
                self._pipe_log(lines)
                if wheel.name.split("-")[1] != self.version:
                    raise PermanentError(f"{wheel.name} does not carry the project version {self.version}")
                took = time.monotonic() - started
                self.say(f"[wheel] {wheel.name} built from {self.s.repo} in {took:.1f} s")
            for name in names:
                built.append(self.build_one(name, rootfs_ref, wheels, wheel))
        return built


def summary(built: Sequence[Built], total_seconds: float) -> str:
    rows = [[f"{b.repository}", ",".join(b.tags), b.image_id[7:19], f"{b.size / MB:.0f}", f"{b.seconds:.1f}",
             f"{b.cached_steps}/{len(b.steps)}", b.slurm_version] for b in built]
    head = ["IMAGE", "TAGS", "ID", "SIZE MB", "SECONDS", "CACHED", "SLURM"]
    return table(head, rows) + f"\ntotal {total_seconds:.1f} s"


def settings_from_args(
    args: argparse.Namespace, repo: Path | None = None
) -> tuple[BuildSettings, Sequence[str] | None]:
    """CLI options -> settings and the requested images (None = all)."""
    root = repo or find_repo()
    flavor = get(getattr(args, "flavor", None) or DEFAULT_FLAVOR)
    build_dir = root / "build"
    log_arg = getattr(args, "log_file", None)
    log_file = Path(log_arg) if log_arg else build_dir / f"images-{flavor.name}.log"
    values_file = Path(args.values_file) if getattr(args, "values_file", None) else None
    mirror_url = mirror.check_mirror(args.mirror) if getattr(args, "mirror", None) else None
    settings = BuildSettings(flavor=flavor, images=(), repo=root, build_dir=build_dir, log_file=log_file,
                             base_image=getattr(args, "base_image", None), mirror=mirror_url,
                             values_file=values_file)
    return settings, getattr(args, "role", None)


def build(settings: BuildSettings, requested: Sequence[str] | None, out: TextIO = sys.stdout,
          engine: Engine | None = None) -> list[Built]:
    """Build the requested images (all when None); the function tests and the CLI share."""
    eng = engine or Engine.connect()
    base_exists = eng.image(settings.base_from()) is not None
    images = plan_images(requested, base_exists)
    s = dataclasses.replace(settings, images=images)
    s.log_file.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with s.log_file.open("w", encoding="utf-8") as log:
        builder = Builder(eng, s, out, log)
        builder.say(f"building {', '.join(images)} for flavor {s.flavor.name} (Debian {s.flavor.suite}, "
                    f"Python {s.flavor.python}); full log: {s.log_file}")
        try:
            built = builder.run()
        except PermanentError as exc:
            raise PermanentError(f"{exc}\n(full build log: {s.log_file})") from exc
        text = summary(built, time.monotonic() - started)
        builder.say(text)
    if s.values_file is not None:
        pins = [values.Pin(b.name, b.repository, b.tags[-1], b.image_id, b.slurm_version)
                for b in built if b.name != BASE]
        values.update(s.values_file, pins)
        print(f"wrote image ids to {s.values_file}", file=out)
    return built


def main(args: argparse.Namespace) -> int:
    settings, requested = settings_from_args(args)
    build(settings, requested)
    return 0


def slurmpod_images(
    infos: Sequence[ImageInfo], prefix: str = well_known.IMAGE_REPOSITORY_PREFIX
) -> list[ImageInfo]:
    ours = (i for i in infos if any(t.startswith(prefix) for t in i.tags))
    return sorted(ours, key=lambda i: sorted(i.tags))


def list_table(infos: Sequence[ImageInfo]) -> str:
    rows = [[", ".join(sorted(i.tags)), i.id[7:19], f"{i.size / MB:.0f}",
             i.labels.get(well_known.IMAGE_LABEL_FLAVOR, "-"),
             i.labels.get(well_known.IMAGE_LABEL_SLURM_VERSION, "-"),
             i.labels.get(labels.OCI + "created", i.created[:19])] for i in infos]
    return table(["IMAGE", "ID", "SIZE MB", "FLAVOR", "SLURM", "CREATED"], rows)


def list_main(args: argparse.Namespace) -> int:
    del args
    infos = slurmpod_images(Engine.connect().images())
    print(list_table(infos) if infos else "no slurmpod images; run `slurmpod images build`")
    return 0


