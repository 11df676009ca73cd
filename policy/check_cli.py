"""`slurmpod policy check --policy P --job J`: the plugin's decision, without Slurm.

Prints the Decision as JSON; exit 0 accept or modify, 1 reject, 2 bad input (raised as BadInput).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path

from slurmpod.errors import BadInput
from slurmpod.policy import decide, loader, request


def main(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    del env
    policy = loader.load(args.policy)
    req = request.from_mapping(_read_json(args.job), "")
    decision = decide.decide(policy, req)
    json.dump(decision.as_dict(), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0 if decision.allowed else 1


def _read_json(path: str) -> object:
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput.one("--job", path, f"not valid JSON: {exc}") from None
