"""Wheelhouse and slurmpod-wheel command lines; the cache decision; pip itself is faked by a
tiny `python` script at the subprocess boundary (no network in unit tests)."""

from __future__ import annotations

import stat
from pathlib import Path

import paths
import pytest

from slurmpod.errors import PermanentError
from slurmpod_host.images import flavors, wheelhouse


def values_after(cmd: list[str], flag: str) -> list[str]:
    return [cmd[i + 1] for i, a in enumerate(cmd) if a == flag]


@pytest.mark.parametrize(("flavor", "py", "abi"), [("24.11", "3.13", "cp313"), ("26.05", "3.14", "cp314")])
def test_download_command_targets_the_image_python(flavor: str, py: str, abi: str) -> None:
    cmd = wheelhouse.download_command("/usr/bin/python3", Path("/wh"), flavors.get(flavor))
    assert cmd[:4] == ["/usr/bin/python3", "-m", "pip", "download"]
    assert "--only-binary=:all:" in cmd
    assert values_after(cmd, "--python-version") == [py]
    assert values_after(cmd, "--implementation") == ["cp"]
    assert values_after(cmd, "--abi") == [abi, "abi3"]
    assert values_after(cmd, "--dest") == ["/wh"]
    assert {"manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64"} <= set(
        values_after(cmd, "--platform"))
    assert cmd[-8:] == ["jinja2", "pyyaml", "supervisor", "cffi", "nvidia-ml-py", "prometheus-client", "kubernetes",
                        "pip"]
    assert "kubernetes" not in flavors.PYTHON_REQUIREMENTS  # downloaded for the controller, installed there alone


def test_slurmpod_wheel_command_has_no_deps() -> None:
    cmd = wheelhouse.slurmpod_wheel_command("py", Path("/src"), Path("/out"))
    assert cmd[:4] == ["py", "-m", "pip", "wheel"]
    assert "--no-deps" in cmd
    assert values_after(cmd, "--wheel-dir") == ["/out"]
    assert cmd[-1] == "/src"


def test_cache_dir_per_python() -> None:
    assert wheelhouse.wheelhouse_dir(Path("build"), flavors.get("24.11")) == Path("build/wheelhouse-py313")
    assert wheelhouse.wheelhouse_dir(Path("build"), flavors.get("26.05")) == Path("build/wheelhouse-py314")


def fake_python(tmp_path: Path, wheel_name: str = "pip-99.0-py3-none-any.whl") -> str:
    """A `python` that answers `-m pip download --dest D ...` by creating a pip wheel in D."""
    script = tmp_path / "fake-python"
    script.write_text(
        "#!/bin/sh\n"
        'while [ $# -gt 0 ]; do if [ "$1" = --dest ]; then shift; dest=$1; fi; shift; done\n'
        f'touch "$dest/{wheel_name}"; echo "$dest" >> "{tmp_path}/calls"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_wheelhouse_downloads_once_then_reuses_the_cache(tmp_path: Path) -> None:
    f = flavors.get("24.11")
    py = fake_python(tmp_path)
    log: list[str] = []
    first = wheelhouse.ensure_wheelhouse(tmp_path / "build", f, log, python=py)
    assert first.downloaded and first.pip_wheel == "pip-99.0-py3-none-any.whl"
    assert (first.path / wheelhouse.STAMP).read_text() == wheelhouse.stamp_text(f)
    again = wheelhouse.ensure_wheelhouse(tmp_path / "build", f, log, python=py)
    assert not again.downloaded and again.path == first.path
    assert len((tmp_path / "calls").read_text().splitlines()) == 1
    # A changed stamp (other requirements or platforms) downloads again.
    (first.path / wheelhouse.STAMP).write_text("old\n")
    assert wheelhouse.ensure_wheelhouse(tmp_path / "build", f, log, python=py).downloaded
    assert sorted(p.name for p in (tmp_path / "build").iterdir()) == ["wheelhouse-py313"]


def test_download_failure_is_permanent_and_leaves_no_half_cache(tmp_path: Path) -> None:
    with pytest.raises(PermanentError, match="exit 1"):
        wheelhouse.ensure_wheelhouse(tmp_path / "build", flavors.get("26.05"), [], python="/bin/false")
    assert list((tmp_path / "build").iterdir()) == []


def test_source_paths_follow_the_package_dir_mapping(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "slurmpod"\nversion = "1.2.3"\nreadme = "README.md"\n'
        '[tool.setuptools]\npackage-dir = { "slurmpod" = "slurmpod", "slurmpod_host.images" = "images" }\n')
    assert wheelhouse.source_paths(tmp_path) == ["README.md", "images", "pyproject.toml", "slurmpod"]
    assert wheelhouse.project_version(tmp_path) == "1.2.3"


def test_dynamic_version_is_read_from_the_attr_without_importing(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "slurmpod"\ndynamic = ["version"]\n'
        '[tool.setuptools]\npackage-dir = { "slurmpod" = "src/sp" }\n'
        '[tool.setuptools.dynamic]\nversion = { attr = "slurmpod.__version__" }\n')
    (tmp_path / "src/sp").mkdir(parents=True)
    (tmp_path / "src/sp/__init__.py").write_text('"""doc"""\nimport sys\n__version__ = "2.0.1"\n')
    assert wheelhouse.project_version(tmp_path) == "2.0.1"
    (tmp_path / "src/sp/__init__.py").write_text("__version__ = compute()\n")
    with pytest.raises(PermanentError, match="no static version"):
        wheelhouse.project_version(tmp_path)


def test_the_repository_wheel_sources_are_the_pod_side_only() -> None:
    """The wheel the images install holds every pod subpackage and none of the host tools."""
    repo = paths.REPO
    sources = set(wheelhouse.source_paths(repo))
    pod = {"slurmpod", "entrypoints", "prolog_epilog", "topology", "policy", "slurm_plugins"}
    assert pod | {"pyproject.toml"} <= sources
    assert not sources & {"images", "host"}
    assert wheelhouse.project_version(repo)
