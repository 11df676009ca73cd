"""The plugin's C, compiled file by file with every warning an error (gcc -Wall -Wextra -Werror).

Each .c in slurm_plugins/ against the stand-in Slurm headers (tests/fakes/slurm/include) and the -D
values build_plugin passes; each header on its own, so every one includes what it uses. The build in
the controller image compiles the same files against the image's own Slurm headers.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import paths
import pytest

from slurmpod.slurm_plugins import bridge, build_plugin, embedded

FAKE_INCLUDE = paths.TESTS / "fakes" / "slurm" / "include"
STRICT = ["-std=gnu11", "-O2", "-fPIC", "-Wall", "-Wextra", "-Werror"]
HEADERS = sorted(p.name for p in build_plugin.C_DIR.glob("*.h"))
SHIM = "job_submit_slurmpod.c"


def _cc() -> str:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.fail("a C compiler is needed to compile the plugin (bootstrap-host.sh installs gcc)")
    return cc


def _compile(args: list[str]) -> None:
    done = subprocess.run([_cc(), *STRICT, "-I", str(FAKE_INCLUDE), "-I", str(build_plugin.C_DIR), *args],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def test_the_build_lists_every_c_file_in_the_package() -> None:
    assert sorted(p.name for p in build_plugin.C_DIR.glob("*.c")) == sorted(build_plugin.SOURCES)
    assert set(build_plugin.CDEF_HEADERS) | {build_plugin.EMBEDDING_HEADER} == set(HEADERS)


@pytest.mark.parametrize("source", build_plugin.SOURCES)
def test_each_source_compiles_with_warnings_as_errors(source: str, tmp_path: Path) -> None:
    defines = [f"-D{name}={value}" for name, value in build_plugin.macros("libpython3.so.1.0")]
    _compile([*defines, "-c", str(build_plugin.C_DIR / source), "-o", str(tmp_path / "out.o")])


@pytest.mark.parametrize("header", HEADERS)
def test_each_header_stands_alone(header: str) -> None:
    _compile(["-fsyntax-only", "-x", "c", str(build_plugin.C_DIR / header)])


def test_the_plugin_refuses_to_compile_without_the_build_values(tmp_path: Path) -> None:
    done = subprocess.run([_cc(), *STRICT, "-I", str(FAKE_INCLUDE), "-c", str(build_plugin.C_DIR / SHIM), "-o",
                           str(tmp_path / "out.o")], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0 and "build with slurmpod.slurm_plugins.build_plugin" in done.stderr


def test_cdef_declarations_hold_no_preprocessor_lines() -> None:
    text = build_plugin.declarations(*build_plugin.CDEF_HEADERS, build_plugin.EMBEDDING_HEADER)
    assert "slurmpod_req_t" in text and "slurmpod_fast_decide" in text and "slurmpod_py_start" in text
    assert not [line for line in text.splitlines() if line.lstrip().startswith("#")]


def test_the_bits_and_codes_c_and_python_share_agree() -> None:
    """cffi's cdef cannot read the SP_SET_* macros, so embedded keeps their twins: they must match."""
    job_h = (build_plugin.C_DIR / "slurmpod_job.h").read_text(encoding="utf-8")
    bits = {name.lower(): 1 << int(shift) for name, shift in re.findall(r"#define SP_SET_(\w+) \(1u << (\d+)\)", job_h)}
    assert bits == embedded.SET_BITS
    verdicts = dict(re.findall(r"#define SP_VERDICT_(\w+) (\d+)", job_h))
    assert {v.name: str(code) for v, code in bridge.VERDICT_CODES.items()} == verdicts
    api_h = (build_plugin.C_DIR / build_plugin.EMBEDDING_HEADER).read_text(encoding="utf-8")
    ok = re.search(r"#define SP_OK (0x[0-9A-Fa-f]+)", api_h)
    assert ok is not None and int(ok[1], 16) == embedded.OK
