"""`slurmpod topology render`: NODES.json [+ PODS.json] -> topology.conf or topology.yaml on stdout."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from slurmpod import confvalues
from slurmpod.errors import BadInput
from slurmpod.slurm_version import SlurmVersion
from slurmpod.topology import kube, sync
from slurmpod.topology.model import Format, Provider, Unplaced

AUTO = "auto"
# topology.yaml needs 25.05+; which version only decides the file kind, so any 25.05+ will do here.
YAML_VERSION = SlurmVersion(25, 5)
CONF_VERSION = SlurmVersion(24, 11)


def _load(flag: str, path: str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise BadInput.one(flag, path, f"cannot read: {exc.strerror}") from None
    except ValueError as exc:
        raise BadInput.one(flag, path, f"not JSON: {exc}") from None


def block_sizes(raw: str | None) -> tuple[int, ...]:
    """``--block-sizes 2,4`` -> (2, 4); the rules are checked against the blocks later."""
    if not raw:
        return ()
    return tuple(confvalues.integer("--block-sizes", part, 1, 1_000_000) for part in raw.split(","))


def main(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    del env
    fmt = Format(args.format)
    plugin = Format(args.yaml_plugin) if fmt is Format.YAML else fmt
    settings = sync.Settings(
        plugin=plugin,
        provider=None if args.provider == AUTO else Provider(args.provider),
        unplaced=Unplaced(args.unplaced),
        block_sizes=block_sizes(args.block_sizes),
        slinky_topology=confvalues.name("--slinky-topology", args.slinky_topology) if args.slinky_topology else None,
    )
    nodes = kube.parse_nodes(_load("--nodes", args.nodes), source=f"--nodes {args.nodes}")
    pods = None if args.pods is None else kube.parse_worker_pods(_load("--pods", args.pods),
                                                                 source=f"--pods {args.pods}")
    text, _ = sync.render(nodes, pods, settings, YAML_VERSION if fmt is Format.YAML else CONF_VERSION)
    sys.stdout.write(text)
    return 0
