"""`slurmpod images pin`: only the digests of a values file change (golden), bad input exits 2 naming it."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import paths
import pytest
import yaml

from slurmpod.errors import BadInput
from slurmpod_host.images import pin

ROOT = paths.REPO
CHART_VALUES = ROOT / "deploy" / "helm" / "slurmpod" / "values.yaml"
GOLDEN = paths.UNIT / "golden" / "pin"
IDS = {"controller": "sha256:" + "c" * 64, "worker": "sha256:" + "a" * 64, "login": "sha256:" + "d" * 64,
       "accounting": "sha256:" + "b" * 64, "restapi": "sha256:" + "f" * 64}
PUSHED_WORKER = "sha256:" + "e" * 64


def _lookup(ref: str) -> pin.Built | None:
    role = ref.split("/")[1].split(":", 1)[0]
    assert ref.endswith(":24.11")
    digests = (f"registry.example.com/slurmpod/worker@{PUSHED_WORKER}",) if role == "worker" else ()
    return pin.Built(ref, IDS[role], digests)


def _run(path: Path, paths: list[tuple[str, str]] | None = None, local_id: bool = True) -> str:
    pin.run(path, "24.11", paths, _lookup, out=io.StringIO(), local_id=local_id)
    return path.read_text()


def test_chart_values_change_only_in_their_digests(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    shutil.copy(CHART_VALUES, values)
    original = CHART_VALUES.read_text()
    expected = original
    for role in ("controller", "worker", "login", "accounting", "accounting", "restapi"):  # the file's order
        expected = expected.replace('digest: ""', f'digest: "{IDS[role]}"', 1)
    assert expected != original
    assert _run(values) == expected


def test_pinned_chart_values_render_digests(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    shutil.copy(CHART_VALUES, values)
    _run(values)
    helm = str(ROOT / ".tools/bin/helm")
    done = subprocess.run([helm, "template", "x", str(CHART_VALUES.parent), "-f", str(values),
                           "--set=accounting.enabled=true", "--set=restapi.enabled=true"],
                          capture_output=True, text=True, timeout=60, check=True)
    images = {c["image"] for d in yaml.safe_load_all(done.stdout) if d and d["kind"] == "StatefulSet"
              for c in d["spec"]["template"]["spec"]["containers"]}
    assert images == {f"slurmpod/{role}@{digest}" for role, digest in IDS.items()}


def test_slinky_values_golden(tmp_path: Path) -> None:
    """Slinky's layout, block and flow image objects, an existing digest, comments: only digests change.

    The worker was pushed (it has a RepoDigest for the file's repository), so its manifest digest is pinned;
    the others fall back to the local image ID.
    """
    values = tmp_path / "values.yaml"
    shutil.copy(GOLDEN / "slinky-values.yaml", values)
    assert _run(values) == (GOLDEN / "slinky-values.pinned.yaml").read_text()


def test_explicit_path(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    shutil.copy(CHART_VALUES, values)
    text = _run(values, [("loginsets.login.login.image", "login")])
    parts = CHART_VALUES.read_text().split('digest: ""')
    seps = ['digest: ""'] * (len(parts) - 1)
    seps[2] = f'digest: "{IDS["login"]}"'  # the third image object of the file (controller, worker, login, ...)
    assert text == parts[0] + "".join(sep + part for sep, part in zip(seps, parts[1:], strict=True))


@pytest.mark.parametrize(("content", "paths", "field", "value"), [
    ("a: 1\n", [("controller.slurmctld.image", "controller")], "--path", "controller.slurmctld.image"),
    ("a: 1\n", None, "--values", ""),
    ("controller: {slurmctld: {image: slurmpod/controller:24.11}}\n", None, "controller.slurmctld.image",
     "slurmpod/controller:24.11"),
    ("- a\n", None, "--values", None),
])
def test_bad_input_names_it(tmp_path: Path, content: str, paths: list[tuple[str, str]] | None, field: str,
                            value: str | None) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(content)
    with pytest.raises(BadInput) as exc:
        _run(values, paths)
    (problem,) = exc.value.problems
    assert problem.field == field
    if value is not None:
        assert problem.value == value
    assert values.read_text() == content  # nothing written


def test_without_a_repo_digest_only_local_id_pins(tmp_path: Path) -> None:
    """An image never pushed has no manifest digest a kubelet could pull; refuse unless --local-id."""
    values = tmp_path / "values.yaml"
    shutil.copy(CHART_VALUES, values)
    with pytest.raises(BadInput) as exc:
        _run(values, local_id=False)
    assert (exc.value.problems[0].field, exc.value.problems[0].value) == \
        ("controller.slurmctld.image.repository", "slurmpod/controller")
    assert values.read_text() == CHART_VALUES.read_text()
    slinky = tmp_path / "slinky.yaml"
    shutil.copy(GOLDEN / "slinky-values.yaml", slinky)
    _run(slinky, [("nodesets.gpu.slurmd.image", "worker")], local_id=False)  # pushed: its RepoDigest
    assert f'digest: "{PUSHED_WORKER}"' in slinky.read_text()


def test_image_not_built(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    shutil.copy(CHART_VALUES, values)
    with pytest.raises(BadInput) as exc:
        pin.run(values, "26.05", None, lambda ref: None, out=io.StringIO(), local_id=True)
    assert (exc.value.problems[0].field, exc.value.problems[0].value) == \
        ("controller.slurmctld.image", "slurmpod/controller:26.05")
    assert values.read_text() == CHART_VALUES.read_text()


def test_cli_exits_2_on_a_missing_file(tmp_path: Path) -> None:
    cmd = [str(ROOT / ".venv/bin/slurmpod"), "images", "pin", "--values", str(tmp_path / "nope.yaml")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert "--values" in done.stderr and "nope.yaml" in done.stderr
