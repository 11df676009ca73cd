"""`slurmpod topology render` through the installed console script: output and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import paths
import pytest
import topokit

from slurmpod import well_known as wk

SLURMPOD = Path(sys.executable).with_name("slurmpod")
GOLDEN = paths.UNIT / "golden" / "topology"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SLURMPOD_")}
    return subprocess.run([str(SLURMPOD), "topology", "render", *args], capture_output=True, text=True,
                          timeout=60, check=False, env={**clean, **(env or {})})


def write(tmp_path: Path, name: str, doc: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(("fmt", "golden"), [("tree", "tree.conf"), ("block", "block.conf"), ("yaml", "block.yaml")],
                         ids=["tree", "block", "yaml"])
def test_render_prints_the_golden_file(fmt: str, golden: str) -> None:
    result = run("--nodes", str(GOLDEN / "gke" / "nodes.json"), "--format", fmt)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (GOLDEN / "gke" / golden).read_text(encoding="utf-8")


def test_env_twins_stand_in_for_flags() -> None:
    result = run(env={"SLURMPOD_TOPOLOGY_NODES": str(GOLDEN / "slinky" / "nodes.json"),
                      "SLURMPOD_TOPOLOGY_FORMAT": "yaml", "SLURMPOD_TOPOLOGY_YAML_PLUGIN": "tree"})
    assert result.returncode == 0, result.stderr
    assert result.stdout == (GOLDEN / "slinky" / "tree.yaml").read_text(encoding="utf-8")


def test_pods_make_the_worker_pods_the_slurm_nodes(tmp_path: Path) -> None:
    pods = topokit.pod_list([topokit.pod("slurm-worker-0", "worker-0"), topokit.pod("slurm-worker-1", "worker-2"),
                             topokit.pod("slurm-worker-2", None),  # pending: not a Slurm node yet
                             topokit.pod("slurm-login-0", "worker-1", role="login")])
    result = run("--nodes", str(GOLDEN / "slinky" / "nodes.json"), "--pods", write(tmp_path, "pods.json", pods),
                 "--format", "block")
    assert result.returncode == 0, result.stderr
    assert "BlockName=b1 Nodes=slurm-worker-0\nBlockName=b2 Nodes=slurm-worker-1\nBlockSizes=1,2\n" in result.stdout


def test_explicit_provider_ignores_other_labels() -> None:
    result = run("--nodes", str(GOLDEN / "gke" / "nodes.json"), "--format", "block", "--provider", "eks")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:] == ["BlockName=unplaced Nodes=gke-a3-pool-[0-7],gke-default-pool-0",
                                              "BlockSizes=9"]


@pytest.mark.parametrize(
    ("labels", "needle"),
    [
        ({wk.LABEL_GKE_BLOCK: "b1", wk.LABEL_GKE_SUBBLOCK: "s 1"}, f"node bad-0 label {wk.LABEL_GKE_SUBBLOCK}"),
        ({wk.LABEL_TOPOLOGY: "spine/blk\nSwitchName=evil"}, f"node bad-0 label {wk.LABEL_TOPOLOGY}"),
        ({f"{wk.LABEL_EKS_LAYER_PREFIX}1": "a", f"{wk.LABEL_EKS_LAYER_PREFIX}2": "b",
          f"{wk.LABEL_EKS_LAYER_PREFIX}3": "c=d"}, f"node bad-0 label {wk.LABEL_EKS_LAYER_PREFIX}3"),
    ],
    ids=["space", "newline", "equals"],
)
def test_malformed_label_exits_2_naming_node_and_label(tmp_path: Path, labels: dict[str, str], needle: str) -> None:
    nodes = topokit.node_list([topokit.node("bad-0", labels), topokit.node("good-0")])
    result = run("--nodes", write(tmp_path, "nodes.json", nodes), "--format", "tree")
    assert result.returncode == 2
    assert needle in result.stderr
    assert result.stdout == ""


def test_malformed_slinky_annotation_exits_2(tmp_path: Path) -> None:
    nodes = topokit.node_list([topokit.node("bad-0", annotations={wk.ANNOTATION_SLINKY_TOPOLOGY: "no-colon"})])
    result = run("--nodes", write(tmp_path, "nodes.json", nodes), "--format", "block", "--provider", "slinky")
    assert result.returncode == 2
    assert f"node bad-0 annotation {wk.ANNOTATION_SLINKY_TOPOLOGY}" in result.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--unplaced", "error"], "node gke-default-pool-0"),
        (["--block-sizes", "2,6"], "--block-sizes"),
        (["--block-sizes", "4"], "larger than the smallest block"),
        (["--block-sizes", "two"], "--block-sizes"),
    ],
    ids=["unplaced-error", "not-power-of-two", "base-too-big", "not-a-number"],
)
def test_bad_choices_exit_2(args: list[str], needle: str) -> None:
    result = run("--nodes", str(GOLDEN / "gke" / "nodes.json"), "--format", "block", *args)
    assert result.returncode == 2
    assert needle in result.stderr


@pytest.mark.parametrize(
    ("content", "needle"),
    [(None, "cannot read"), ("{not json", "not JSON"), ('{"kind": "PodList", "items": []}', "must be NodeList")],
    ids=["missing", "not-json", "wrong-kind"],
)
def test_bad_nodes_file_exits_2(tmp_path: Path, content: str | None, needle: str) -> None:
    path = tmp_path / "nodes.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    result = run("--nodes", str(path), "--format", "tree")
    assert result.returncode == 2
    assert "--nodes" in result.stderr and needle in result.stderr


def test_slinky_topology_picks_the_pair() -> None:
    # The fixture's annotations read "topo-block:bN,topo-switch:s1": the switch pair puts all in s1.
    result = run("--nodes", str(GOLDEN / "slinky" / "nodes.json"), "--format", "block",
                 "--slinky-topology", "topo-switch")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:] == ["BlockName=s1 Nodes=worker-[0-3]", "BlockSizes=4"]
