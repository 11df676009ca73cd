"""GPU inventory through the real pynvml path against a fake libnvidia-ml.so.1 built from C.

The library is loaded by the dynamic linker from LD_LIBRARY_PATH, so each case runs in a fresh
Python process; nothing in slurmpod or pynvml is patched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import paths
import pytest

from slurmpod import nvml

FAKE_SRC = paths.TESTS / "fakes" / "nvml" / "fake_nvml.c"

PROBE = """
import json
from slurmpod import nvml as gpus
print(json.dumps([[g.index, g.minor, g.uuid, g.name, list(g.cpu_affinity)] for g in gpus.inventory()]))
"""


@pytest.fixture(scope="module")
def fake_nvml_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.fail("a C compiler is needed for the fake libnvidia-ml.so.1 (bootstrap-host.sh installs gcc)")
    out = tmp_path_factory.mktemp("fake-nvml")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(out / "libnvidia-ml.so.1"), str(FAKE_SRC)],
                   check=True, timeout=60)
    return out


def _inventory(lib_dir: Path | None, **env: str) -> list[list[object]]:
    run_env = {**os.environ, **env}
    run_env.pop("LD_LIBRARY_PATH", None)
    if lib_dir is not None:
        run_env["LD_LIBRARY_PATH"] = str(lib_dir)
    proc = subprocess.run([sys.executable, "-P", "-c", PROBE], capture_output=True, text=True, env=run_env,
                          timeout=60, check=True)
    result: list[list[object]] = json.loads(proc.stdout)
    return result


def test_no_library_means_no_gpus() -> None:
    assert _inventory(None) == []


def test_two_gpus_with_minor_numbers_and_affinity(fake_nvml_dir: Path) -> None:
    gpus = _inventory(fake_nvml_dir)
    assert gpus == [
        [0, 4, "GPU-00000000-0000-0000-0000-000000000000", "NVIDIA H100 80GB HBM3", [0, 1]],
        [1, 5, "GPU-00000000-0000-0000-0000-000000000001", "NVIDIA H100 80GB HBM3", [2, 3]],
    ]


def test_gpu_count_follows_the_library(fake_nvml_dir: Path) -> None:
    assert len(_inventory(fake_nvml_dir, FAKE_NVML_GPUS="8")) == 8


def test_failing_init_registers_without_gpus(fake_nvml_dir: Path) -> None:
    assert _inventory(fake_nvml_dir, FAKE_NVML_FAIL_INIT="1") == []


def test_render_node_reports_gres_from_nvml(fake_nvml_dir: Path, tmp_path: Path) -> None:
    podinfo = tmp_path / "podinfo"
    podinfo.mkdir()
    (podinfo / "labels").write_text('slurmpod.io/nodeset="gpu"\n', encoding="utf-8")
    env = {**os.environ, "LD_LIBRARY_PATH": str(fake_nvml_dir), "POD_NAME": "gpu-0",
           "SLURMPOD_CONTROLLER": "ctl", "SLURMPOD_SLURM_VERSION": "24.11"}
    slurmpod = Path(sys.executable).with_name("slurmpod")
    proc = subprocess.run([str(slurmpod), "render", "node", "--podinfo", str(podinfo), "--static"],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert " Gres=gpu:2 " in f" {proc.stdout.strip()} ", proc.stdout


def test_loaded_from_names_the_soname_beside_the_mapped_file(tmp_path: Path) -> None:
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r--p 00000000 08:01 11 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f02-7f03 r-xp 00001000 08:01 12 /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15\n"
        "7f04-7f05 rw-p 00000000 00:00 0 \n", encoding="utf-8")
    assert nvml.loaded_from(maps=maps) == Path("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1")


def test_loaded_from_is_none_without_the_library_mapped(tmp_path: Path) -> None:
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r--p 00000000 08:01 11 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
                    "7f04-7f05 rw-p 00000000 00:00 0 [heap]\n", encoding="utf-8")
    assert nvml.loaded_from(maps=maps) is None
    assert nvml.loaded_from(maps=tmp_path / "absent") is None
