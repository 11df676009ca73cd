"""Runs in a subprocess (LD_LIBRARY_PATH = the fakes): each case of a JSON table through the real path
(prolog_epilog.main.execute -> pynvml -> fake libnvidia-ml / cffi -> fake libcudart, libnccl) and prints
one JSON report per case. FAKE_NVML_STATE is read by the C fakes with getenv, so it is set per case.

Input (argv[1]): [{"id", "context", "state", "env": {...}, "config", "state_dir"}]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from slurmpod.prolog_epilog import main
from slurmpod.prolog_epilog.result import Context


def run_case(case: dict[str, object]) -> dict[str, object]:
    os.environ["FAKE_NVML_STATE"] = str(case["state"])
    env = {str(k): str(v) for k, v in dict(case.get("env", {})).items()}  # type: ignore[call-overload]
    settings = main.settings_from(env, Context(str(case["context"])), act=False, config_path=str(case["config"]),
                                  state_dir=str(case["state_dir"]), metrics_dir="")
    return main.execute(settings, env, slurm=None).to_json()


if __name__ == "__main__":
    table = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    out = {str(c["id"]): run_case(c) for c in table}
    print(json.dumps(out))
