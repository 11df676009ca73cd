"""The chart's values.schema.json, derived from its values.yaml: every mapping the chart reads names its
keys, so Helm refuses a misspelt key (install, upgrade, template, lint) and names it, instead of rendering
as if it were not there. Types and ranges stay with the templates' own checks, which name the key and
the value; this schema only closes the mappings.

- A mapping in values.yaml allows exactly its keys, each as loosely as the templates read it.
- `nodesets.<name>` and `loginsets.<name>`: any name, each entry shaped as the default one (`workers`,
  `login`).
- Mappings whose keys are the user's (environment, resources, annotations, labels, topology settings the
  controller checks at its start) allow any key.
- `policy` allows the keys the policy loader reads, which are more than the defaults show.
Ref: https://helm.sh/docs/topics/charts/#schema-files

`python -P -m slurmpod_host.chart_schema [OUT]` writes it (scripts/render-manifests.sh, `make manifests`);
tests/unit/deploy/test_values_schema.py fails when the committed file and values.yaml drift.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from slurmpod.policy import loader

CHART = Path(__file__).resolve().parents[1] / "deploy" / "helm" / "slurmpod"
KeyPath = tuple[str, ...]
ANY = "*"  # one level of keys the user names (a nodeset, a loginset)

# Mappings whose keys are the user's: Kubernetes resource names, environment variables, annotations and
# labels, and cluster.topology (the controller's cluster spec checks its keys at start, naming them).
OPEN: frozenset[KeyPath] = frozenset({
    ("nodesets", ANY, "slurmd", "env"),
    ("nodesets", ANY, "slurmd", "resources"),
    ("loginsets", ANY, "login", "resources"),
    ("loginsets", ANY, "service", "annotations"),
    ("controller", "slurmctld", "resources"),
    ("accounting", "slurmdbd", "resources"),
    ("accounting", "db", "resources"),
    ("restapi", "slurmrestd", "resources"),
    ("metrics", "service", "annotations"),
    ("metrics", "serviceMonitor", "labels"),
    ("metrics", "grafanaDashboard", "labels"),
    ("cluster", "topology"),
})
# Keyed by the user: the entry every key holds, shaped as this default entry.
ENTRIES: Mapping[KeyPath, str] = {("nodesets",): "workers", ("loginsets",): "login"}
# Keys the chart passes on that its defaults leave out, with what reads them.
EXTRA: Mapping[KeyPath, tuple[str, ...]] = {
    ("policy",): loader.TOP_KEYS,
    ("policy", "topology"): loader.TOPOLOGY_KEYS,
    ("policy", "topology", "optOut"): loader.ACCESS_KEYS,
}


def _closed(value: Mapping[str, Any], path: KeyPath) -> dict[str, Any]:
    keys = dict.fromkeys([*value, *EXTRA.get(path, ())])
    return {"properties": {k: _schema(value.get(k), (*path, k)) for k in keys}, "additionalProperties": False}


def _schema(value: object, path: KeyPath) -> dict[str, Any]:
    """What ``value`` at ``path`` may be. No "type": a value of another kind is the templates' to refuse,
    with their own message; the closed key lists apply only where the value is a mapping."""
    generic = tuple(ANY if i == 1 and path[0] in {p[0] for p in ENTRIES} else part for i, part in enumerate(path))
    if generic in OPEN:
        return {}
    if path in ENTRIES and isinstance(value, Mapping):
        return {"additionalProperties": _schema(value[ENTRIES[path]], (*path, ANY))}
    if isinstance(value, Mapping):
        return _closed(value, path)
    return {}


def schema(values: Mapping[str, Any]) -> dict[str, Any]:
    return {"$schema": "http://json-schema.org/draft-07/schema#", "title": "slurmpod chart values",
            **_closed(values, ())}


def render(chart: Path = CHART) -> str:
    values = yaml.safe_load((chart / "values.yaml").read_text(encoding="utf-8"))
    return json.dumps(schema(values), indent=2) + "\n"


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else CHART / "values.schema.json"
    out.write_text(render(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
