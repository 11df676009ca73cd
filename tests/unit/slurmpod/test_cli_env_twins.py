"""Every option of `slurmpod` has one SLURMPOD_* environment twin with one meaning, parsed like the flag."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurmpod import cli
from slurmpod import well_known as wk

SLURMPOD = Path(sys.executable).with_name("slurmpod")
ENV_IN_HELP = re.compile(r"\s*\[env ([A-Z0-9_]+)\]$")


def _parsers(parser: argparse.ArgumentParser, path: str = "slurmpod") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _parsers(child, f"{path} {name}")


def _options() -> list[tuple[str, argparse.Action]]:
    parser, _ = cli.build_parser({})
    return [(f"{where} {action.option_strings[-1]}", action)
            for where, p in _parsers(parser) for action in p._actions
            if action.option_strings and not isinstance(action, argparse._HelpAction)]


def test_the_walk_sees_every_command() -> None:
    commands = {where for where, _ in _parsers(cli.build_parser({})[0])}
    assert {"slurmpod images build", "slurmpod cluster up", "slurmpod cluster down", "slurmpod probe",
            "slurmpod prestop", "slurmpod daemon node-reaper", "slurmpod daemon reconcile-node",
            "slurmpod render node", "slurmpod entrypoint"} <= commands
    assert len(_options()) >= 20


def test_every_option_has_a_slurmpod_twin() -> None:
    missing = [where for where, action in _options() if not ENV_IN_HELP.search(action.help or "")]
    assert missing == []
    twins = {ENV_IN_HELP.search(a.help or "").group(1) for _, a in _options()}  # type: ignore[union-attr]
    assert all(name.startswith("SLURMPOD_") for name in twins)


def test_no_twin_has_two_meanings() -> None:
    meanings: dict[str, set[str]] = {}
    for _, action in _options():
        help_text = action.help or ""
        match = ENV_IN_HELP.search(help_text)
        assert match is not None
        meanings.setdefault(match.group(1), set()).add(help_text[:match.start()] + f" type={action.type}")
    shared = {name: m for name, m in meanings.items() if len(m) > 1}
    assert shared == {}


def test_a_second_meaning_is_refused_when_declared() -> None:
    twins = cli.Twins({})
    twins.declare(cli.Twin("SLURMPOD_TIMEOUT", "--timeout", "seconds the probe may take"))
    twins.declare(cli.Twin("SLURMPOD_TIMEOUT", "--timeout", "seconds the probe may take"))  # same meaning: fine
    with pytest.raises(AssertionError, match="SLURMPOD_TIMEOUT"):
        twins.declare(cli.Twin("SLURMPOD_TIMEOUT", "--timeout", "seconds to wait for the workers"))


@pytest.mark.parametrize(
    ("env", "argv", "attr", "value"),
    [
        ({"SLURMPOD_PROBE_TIMEOUT": "7.5"}, ["probe", "ready"], "timeout", 7.5),
        ({"SLURMPOD_FLAVOR": "26.05"}, ["images", "build"], "flavor", "26.05"),
        ({"SLURMPOD_DRY_RUN": "yes"}, ["entrypoint", "worker"], "dry_run", True),
        ({"SLURMPOD_DRY_RUN": "0"}, ["entrypoint", "worker"], "dry_run", False),
        ({"SLURMPOD_BUILD_ROLES": "worker, login"}, ["images", "build"], "role", ["worker", "login"]),
        ({wk.ENV_GRACE_SECONDS: "90"}, ["prestop"], "grace", 90.0),
        ({"SLURMPOD_PROBE_TIMEOUT": "7.5"}, ["probe", "ready", "--timeout", "2"], "timeout", 2.0),
    ],
    ids=["float", "choice", "bool-true", "bool-false", "append", "grace", "flag-wins"],
)
def test_env_value_is_parsed_like_the_flag(env: dict[str, str], argv: list[str], attr: str, value: object) -> None:
    parser, twins = cli.build_parser(env)
    assert twins.problems == []
    assert getattr(parser.parse_args(argv), attr) == value


@pytest.mark.parametrize(
    ("name", "value", "argv", "why"),
    [
        ("SLURMPOD_PROBE_TIMEOUT", "soon", ["probe", "ready"], "not a valid float"),
        ("SLURMPOD_FLAVOR", "23.02", ["images", "list"], "expected one of 24.11, 26.05"),
        ("SLURMPOD_DRY_RUN", "maybe", ["entrypoint", "worker"], "expected true or false"),
        ("SLURMPOD_BUILD_ROLES", "worker,gpu", ["images", "list"], "expected one of"),
        (wk.ENV_GRACE_SECONDS, "30s", ["prestop"], "not a valid float"),
        ("SLURMPOD_WORKERS", "two", ["cluster", "status"], "not a valid int"),
    ],
    ids=["probe-timeout-not-a-number", "flavor-bad-choice", "dry-run-bad-boolean", "roles-bad-item",
         "grace-not-a-number", "workers-not-an-int"],
)
def test_bad_env_value_exits_2_naming_variable_and_value(tmp_path: Path, name: str, value: str, argv: list[str],
                                                         why: str) -> None:
    log = tmp_path / "termination-log"
    log.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURMPOD_")}
    env.update({name: value, wk.ENV_TERMINATION_LOG: str(log), wk.ENV_RUN_DIR: str(tmp_path / "run"),
                wk.ENV_PODINFO_DIR: str(tmp_path / "podinfo")})
    proc = subprocess.run([str(SLURMPOD), *argv], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert lines[0].startswith("slurmpod: bad input: ")
    assert f"{name}={value!r}" in lines[0] and why in lines[0]
    assert log.read_text() == lines[0]  # kubelet shows it as the termination message
    assert not (tmp_path / "run").exists()  # nothing ran
