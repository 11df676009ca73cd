"""host/commands.py: each command group is one function, listed in host/pyproject.toml's entry points."""

from __future__ import annotations

import argparse
import tomllib
from importlib.metadata import entry_points

import paths

from slurmpod import cli
from slurmpod_host import commands


def test_every_entry_point_is_a_registration_function() -> None:
    project = tomllib.loads((paths.REPO / "host/pyproject.toml").read_text(encoding="utf-8"))
    declared = project["project"]["entry-points"][cli.COMMANDS_GROUP]
    assert declared == {name: f"slurmpod_host.commands:{name}" for name in ("images", "cluster", "demo", "k8s")}
    installed = {e.name: e.value for e in entry_points(group=cli.COMMANDS_GROUP)}
    assert installed.items() >= declared.items()


def test_each_function_adds_its_group_with_twins() -> None:
    for name in ("images", "cluster", "demo", "k8s"):
        parser = argparse.ArgumentParser()
        twins = cli.Twins({})
        getattr(commands, name)(cli.Commands(parser.add_subparsers(dest="command"), twins))
        assert name in cli._choices(parser)
        assert twins.declared and all(t.env.startswith("SLURMPOD_") for t in twins.declared.values())
