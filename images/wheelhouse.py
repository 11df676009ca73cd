"""Python wheels for the images, made on the host: pip cannot reach PyPI from inside a build.

HTTPS fails certificate checks inside containers here, and air-gapped sites have no index at all,
so the images install only from a wheelhouse with ``--no-index``. The host downloads binary wheels
for the image's Python (not the host's) and builds the slurmpod wheel from the source tree.
Ref: https://pip.pypa.io/en/stable/cli/pip_download/ (--python-version, --platform, --abi).
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from slurmpod.errors import PermanentError

from .flavors import CONTROLLER_REQUIREMENTS, PYTHON_REQUIREMENTS, Flavor

# manylinux tags the suites' glibc (2.41+) accepts; pip matches platform tags exactly, so list
# each one a wheel might carry. Ref: https://peps.python.org/pep-0600/
PLATFORMS: tuple[str, ...] = (
    "manylinux2014_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_34_x86_64",
)
STAMP = "requirements.txt"  # what the cached wheelhouse was downloaded for
DOWNLOAD_TIMEOUT_S = 600
WHEEL_TIMEOUT_S = 300
# Fixed zip timestamps so the same source gives a byte-identical wheel, and Docker's COPY cache
# (keyed on file content) is hit when nothing changed. Ref: https://reproducible-builds.org/specs/source-date-epoch/
SOURCE_DATE_EPOCH = "315532800"  # 1980-01-01, the earliest time a zip file can carry


@dataclass(frozen=True, slots=True)
class Wheelhouse:
    path: Path
    pip_wheel: str
    """File name of pip's own wheel: images run pip from it (``python pip.whl/pip install``)."""
    downloaded: bool


def wheelhouse_dir(build_dir: Path, flavor: Flavor) -> Path:
    return build_dir / f"wheelhouse-{flavor.python_tag}"


def requirements(flavor: Flavor) -> tuple[str, ...]:
    return (*PYTHON_REQUIREMENTS, *CONTROLLER_REQUIREMENTS, "pip")


def stamp_text(flavor: Flavor) -> str:
    """Stamp naming what the wheelhouse holds; a different stamp means download again."""
    lines = [f"# python {flavor.python} platforms {' '.join(PLATFORMS)}", *requirements(flavor)]
    return "\n".join(lines) + "\n"


def download_command(python: str, dest: Path, flavor: Flavor) -> list[str]:
    """``pip download`` of binary wheels for the image's CPython, not the host's."""
    abi = "cp" + flavor.python.replace(".", "")
    cmd = [python, "-m", "pip", "download", "--disable-pip-version-check", "--no-input",
           "--dest", str(dest), "--only-binary=:all:",
           "--python-version", flavor.python, "--implementation", "cp", "--abi", abi, "--abi", "abi3"]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    return [*cmd, *requirements(flavor)]


def slurmpod_wheel_command(python: str, source: Path, dest: Path) -> list[str]:
    """``pip wheel --no-deps``: only slurmpod itself; its dependencies come from the wheelhouse."""
    return [python, "-m", "pip", "wheel", "--disable-pip-version-check", "--no-input", "--no-deps",
            "--wheel-dir", str(dest), str(source)]


def _run(cmd: Sequence[str], timeout: float, log: list[str], env: dict[str, str] | None = None) -> None:
    log.append("$ " + " ".join(cmd))
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, check=False, env=env)
    log.append(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        raise PermanentError(f"{cmd[2:4]} failed (exit {proc.returncode}):\n" + "\n".join(tail))


def find_pip_wheel(path: Path) -> str | None:
    found = sorted(p.name for p in path.glob("pip-*-py3-none-any.whl"))
    return found[-1] if found else None


def ensure_wheelhouse(build_dir: Path, flavor: Flavor, log: list[str],
                      python: str = sys.executable) -> Wheelhouse:
    """Reuse ``build/wheelhouse-py3XX`` when its stamp matches, else download it afresh."""
    path = wheelhouse_dir(build_dir, flavor)
    stamp = path / STAMP
    pip_wheel = find_pip_wheel(path) if path.is_dir() else None
    if pip_wheel and stamp.is_file() and stamp.read_text(encoding="utf-8") == stamp_text(flavor):
        return Wheelhouse(path, pip_wheel, downloaded=False)
    build_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=path.name + ".", dir=build_dir))
    try:
        _run(download_command(python, tmp, flavor), DOWNLOAD_TIMEOUT_S, log)
        (tmp / STAMP).write_text(stamp_text(flavor), encoding="utf-8")
        pip_wheel = find_pip_wheel(tmp)
        if pip_wheel is None:
            raise PermanentError(f"pip download left no pip wheel in {tmp}")
        shutil.rmtree(path, ignore_errors=True)
        tmp.rename(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Wheelhouse(path, pip_wheel, downloaded=True)


def source_paths(repo: Path) -> list[str]:
    """Files and folders a wheel build needs: pyproject, readme and every mapped package folder."""
    project = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    mapping: dict[str, str] = project.get("tool", {}).get("setuptools", {}).get("package-dir", {})
    readme = project.get("project", {}).get("readme")
    names = {"pyproject.toml", *(d.split("/")[0] for d in mapping.values())}
    if isinstance(readme, str):
        names.add(readme)
    return sorted(names)


def project_version(repo: Path) -> str:
    """The project version without importing or building it: ``[project] version``, or the string
    assigned to the ``tool.setuptools.dynamic.version.attr`` module attribute.
    Ref: https://setuptools.pypa.io/en/latest/userguide/pyproject_config.html#dynamic-metadata"""
    doc = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    version = doc.get("project", {}).get("version")
    if isinstance(version, str):
        return version
    tool = doc.get("tool", {}).get("setuptools", {})
    attr = tool.get("dynamic", {}).get("version", {}).get("attr")
    if isinstance(attr, str) and "." in attr:
        module, _, name = attr.rpartition(".")
        found = _module_string(repo, tool.get("package-dir", {}), module, name)
        if found:
            return found
    raise PermanentError(f"{repo}/pyproject.toml: no static version and no readable version attr")


def _module_string(repo: Path, package_dir: dict[str, str], module: str, name: str) -> str | None:
    """The string literal assigned to ``name`` at the top of ``module``'s source file."""
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        if prefix in package_dir:
            base = repo / package_dir[prefix] / Path(*parts[i:])
            break
    else:
        base = repo / Path(*parts)
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                         for t in node.targets)
                        and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
                    return node.value.value
    return None


def build_slurmpod_wheel(repo: Path, dest: Path, log: list[str], python: str = sys.executable) -> Path:
    """Build the slurmpod wheel from a clean copy of the sources (never a stale build/ tree)."""
    dest.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".*")
    with tempfile.TemporaryDirectory(prefix="slurmpod-src.") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        for name in source_paths(repo):
            origin = repo / name
            if origin.is_dir():
                shutil.copytree(origin, src / name, ignore=ignore)
            elif origin.is_file():
                shutil.copy2(origin, src / name)
        env = {**os.environ, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}
        _run(slurmpod_wheel_command(python, src, dest), WHEEL_TIMEOUT_S, log, env=env)
    wheels = sorted(dest.glob("slurmpod-*.whl"))
    if len(wheels) != 1:
        raise PermanentError(f"expected one slurmpod wheel in {dest}, found {[w.name for w in wheels]}")
    return wheels[0]
