"""Jinja2 rendering of the files a pod writes at start. Deterministic: same input, same bytes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import jinja2
from slurmpod.entrypoints.cluster_spec import ClusterSpec

from slurmpod import __version__
from slurmpod import well_known as wk


@dataclass(frozen=True, slots=True)
class Program:
    """One supervisord program: a rendered run script under RUN_DIR/bin."""

    name: str
    script: str  # body of the bash run script
    priority: int
    user: str | None = None
    restart: bool = True
    startsecs: int = 1


@cache
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("slurmpod.entrypoints", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # noqa: S701 - config files, not HTML; values are validated by confvalues
    )


def slurm_conf(spec: ClusterSpec, controller: str) -> str:
    preempt = any(p.preempt_mode != "OFF" for p in spec.partitions)
    return _env().get_template("slurm.conf.j2").render(
        spec=spec, controller=controller, preempt=preempt, version=__version__,
        state_save_location=wk.STATE_SAVE_LOCATION,
    )


def cgroup_conf() -> str:
    return _env().get_template("cgroup.conf.j2").render()


def supervisord_conf(role: str, programs: Sequence[Program], stop_wait: int) -> str:
    rows = [
        {
            "name": p.name,
            "command": f"{wk.RUN_DIR}/bin/{p.name}",
            "user": p.user,
            "priority": p.priority,
            "restart": p.restart,
            "startsecs": p.startsecs,
            "environment": None,
        }
        for p in sorted(programs, key=lambda p: (p.priority, p.name))
    ]
    return _env().get_template("supervisord.conf.j2").render(
        role=role, programs=rows, run_dir=wk.RUN_DIR, stop_wait=stop_wait
    )
