"""The pod CLI knows no host command: host distributions register theirs (``slurmpod.commands`` entry
points), read only for a command that is not a pod command."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import paths
import pytest

from slurmpod import cli
from slurmpod import well_known as wk

SLURMPOD = Path(sys.executable).with_name("slurmpod")
POD_COMMANDS = {"entrypoint", "render", "probe", "prestop", "daemon", "topology", "policy", "check", "prolog",
                "epilog", "healthcheck", "task-prolog"}


def _commands(parser: object) -> set[str]:
    return set(cli._choices(parser))  # type: ignore[arg-type]


def test_the_pod_parser_has_the_pod_commands_alone() -> None:
    assert _commands(cli.build_parser({}, host=False)[0]) == POD_COMMANDS


def test_the_host_distribution_adds_its_command_groups() -> None:
    assert _commands(cli.build_parser({})[0]) >= POD_COMMANDS | {"images", "cluster", "demo"}


def test_the_cli_names_no_host_module() -> None:
    tree = ast.parse((paths.REPO / "slurmpod/cli.py").read_text(encoding="utf-8"))
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert [s for s in strings if "slurmpod_host" in s] == []
    for flag in ("--flavor", "--workers", "--base-image", "--manifests"):
        assert all(flag not in s for s in strings), flag


@pytest.mark.parametrize(("argv", "host"), [(["probe", "ready"], False), (["--log-format", "json", "prestop"], False),
                                            (["images", "list"], True), (["--help"], True), ([], True)],
                         ids=["pod", "pod-after-option", "host", "help", "none"])
def test_entry_points_are_read_only_for_other_commands(argv: list[str], host: bool) -> None:
    code = ("import sys; from slurmpod import cli; cli._parser_for(sys.argv[1:], {}); "
            "print('importlib.metadata' in sys.modules)")
    done = subprocess.run([sys.executable, "-P", "-c", code, *argv], capture_output=True, text=True, timeout=60,
                          check=True)
    assert done.stdout.strip() == str(host)


def test_a_command_no_one_registered_exits_2_naming_it(tmp_path: Path) -> None:
    log = tmp_path / "termination-log"
    log.write_text("")
    env = {"PATH": "/usr/bin:/bin", wk.ENV_TERMINATION_LOG: str(log)}
    proc = subprocess.run([str(SLURMPOD), "k9s", "up"], env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("slurmpod: bad input: COMMAND='k9s': not a pod command")
    assert "slurmpod-host" in line and log.read_text() == line


def test_command_word_skips_the_top_level_option() -> None:
    assert cli.command_word(["--log-format", "json", "probe", "ready"]) == "probe"
    assert cli.command_word(["--log-format=json", "images"]) == "images"
    assert cli.command_word(["-h"]) is None
    assert cli.command_word([]) is None
