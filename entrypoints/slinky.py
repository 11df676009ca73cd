"""Slinky's worker contract: our worker image started the way SchedMD's slurm-operator starts slurmd.

The operator gives the slurmd container only args and three env values (no command, so the image's
entrypoint runs with them):
  args  ``-Z --conf-server <controller>:6817 --conf '<sorted Key=Val ...>'``, where the --conf value is
        wrapped in single quotes and holds ``Features=<nodeset>[,...]``, ``Topology='"$SLINKY_TOPOLOGY"'``
        and the NodeSet's ExtraConf keys (title-cased);
  env   ``POD_CPUS`` (whole CPUs), ``POD_MEMORY`` (MiB), ``SLINKY_TOPOLOGY`` (the pod's
        topology.slinky.slurm.net/spec annotation);
  file  the shared slurm.key at /etc/slurm/slurm.key (a read-only projected Secret, auth/slurm).
Ref: SlinkyProject/slurm-operator internal/builder/workerbuilder/worker_app.go (slurmdContainer,
slurmdArgs, slurmdConfArgs, getResourceLimits), internal/builder/common/common.go (ConfiglessArgs),
internal/builder/common/const.go (SlurmKeyFile, SlurmEtcDir). Slinky's own image evaluates the args
with bash (SlinkyProject/containers schedmd/slurm/26.05/*/files/usr/local/bin/slurmd-entrypoint.sh and
supervisor's slurmd.conf); we never run them through a shell: the quoting the operator adds is
undone here by rule, the one env reference it writes is resolved by name, and every value is validated
like any other node value (slurmpod.confvalues), so nothing in them can add a key or a line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from slurmpod import confvalues
from slurmpod import well_known as wk
from slurmpod.entrypoints.nodespec import MAX_FEATURES, NodeSpec
from slurmpod.errors import BadInput
from slurmpod.podinfo import PodInfo

ARGS_FIELD = "slurmd args"
# How the operator writes the topology reference (Topology='"$SLINKY_TOPOLOGY"' inside a single-quoted
# --conf), and the plain shell spellings of the same reference.
_TOPOLOGY_REFS = frozenset({
    f"'\"${wk.ENV_SLINKY_TOPOLOGY}\"'", f"\"${wk.ENV_SLINKY_TOPOLOGY}\"",
    f"${wk.ENV_SLINKY_TOPOLOGY}", f"${{{wk.ENV_SLINKY_TOPOLOGY}}}",
})
# Node parameters an operator's --conf may set (matched case-insensitively: the operator title-cases
# ExtraConf keys, so RealMemory arrives as Realmemory). Numeric ones replace ours as integers.
# Ref: https://slurm.schedmd.com/slurm.conf.html#SECTION_NODE-CONFIGURATION
_INTEGER_KEYS = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory",
                 "CoreSpecCount", "MemSpecLimit", "TmpDisk", "Weight")
_TOKEN_KEYS = ("Gres", "CpuSpecList")
_CPU_SHAPE = frozenset({"CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore"})
_CANONICAL = {k.lower(): k for k in (*_INTEGER_KEYS, *_TOKEN_KEYS, "Features", "Topology")}
_CANONICAL["feature"] = "Features"
MAX_INTEGER = 4_294_967_294  # Slurm's uint32 fields; Weight's own maximum


@dataclass(frozen=True, slots=True)
class SlurmdArgs:
    """The operator's slurmd args, validated."""

    conf_server: str  # host:port
    features: tuple[str, ...]
    topology: str | None  # a literal Topology= value; None when absent or a reference to SLINKY_TOPOLOGY
    overrides: tuple[tuple[str, str], ...]  # other node parameters, canonical keys, validated values


def _unquote(value: str) -> str:
    """The operator wraps the whole --conf value in single quotes for its image's shell; undo that one layer."""
    v = value.strip()
    if len(v) >= 2 and v[0] == "'" and v[-1] == "'":
        return v[1:-1]
    return v


def _conf(raw: str) -> tuple[tuple[str, ...], str | None, tuple[tuple[str, str], ...]]:
    features: list[str] = []
    topology: str | None = None
    overrides: dict[str, str] = {}
    seen: set[str] = set()
    if any(ord(c) < 0x20 or c == "\x7f" for c in raw):  # a newline would start another config line
        raise BadInput.one("--conf", raw, "control characters are not allowed")
    for key, value in confvalues.parse_kv_line("--conf", _unquote(raw)):
        field = f"--conf {key}"
        canonical = _CANONICAL.get(key.lower())
        if canonical is None:
            allowed = ", ".join(sorted(set(_CANONICAL.values())))
            raise BadInput.one(field, value, f"not a node parameter a worker accepts (one of {allowed})")
        if canonical != "Features" and canonical in seen:
            raise BadInput.one(field, value, "given twice")
        seen.add(canonical)
        if canonical == "Features":
            features += [confvalues.feature(field, f) for f in value.split(",") if f]
        elif canonical == "Topology":
            topology = None if value in _TOPOLOGY_REFS else confvalues.token(field, value)
        elif canonical in _INTEGER_KEYS:
            overrides[canonical] = str(confvalues.integer(field, value, 0, MAX_INTEGER))
        else:
            overrides[canonical] = confvalues.token(field, value)
    return tuple(features), topology, tuple(overrides.items())


def parse(argv: Sequence[str]) -> SlurmdArgs:
    """``-Z --conf-server HOST:PORT [--conf VALUE]`` (also ``--opt=value``); anything else is bad input."""
    server: str | None = None
    conf = ""
    dynamic = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=")
        if arg == "-Z":
            dynamic = True
        elif name in ("--conf-server", "--conf") and arg.startswith("--"):
            if eq:
                value = inline
            elif i + 1 < len(argv):
                i += 1
                value = argv[i]
            else:
                raise BadInput.one(ARGS_FIELD, name, "needs a value")
            if name == "--conf-server":
                server = confvalues.host("--conf-server", value.strip())
            else:
                conf = value
        else:
            raise BadInput.one(ARGS_FIELD, arg, "not supported (expected -Z --conf-server HOST:PORT --conf VALUE)")
        i += 1
    if not dynamic:
        raise BadInput.one(ARGS_FIELD, " ".join(argv), "-Z missing: workers register as dynamic nodes")
    if server is None:
        raise BadInput.one("--conf-server", "", "required (the controller's host:port)")
    features, topology, overrides = _conf(conf)
    return SlurmdArgs(server, features, topology, overrides)


def pod_env(env: Mapping[str, str], args: SlurmdArgs, hostname: str) -> dict[str, str]:
    """The env our start reads, completed from what the operator gives: the pod's name is its host name
    (NodeSet pods set spec.hostname), the controller is --conf-server, auth is auth/slurm (the only one
    the operator configures) with the key where the operator mounts it."""
    out = dict(env)
    out.setdefault(wk.ENV_POD_NAME, hostname)
    if wk.ENV_CONTROLLER in env and env[wk.ENV_CONTROLLER] != args.conf_server:
        raise BadInput.one(wk.ENV_CONTROLLER, env[wk.ENV_CONTROLLER],
                           f"differs from --conf-server {args.conf_server}")
    out[wk.ENV_CONTROLLER] = args.conf_server
    out.setdefault(wk.ENV_AUTH, wk.AUTH_SLURM)
    out.setdefault("SLURMPOD_SLURM_KEY_FILE", wk.SLURM_KEY)
    return out


def with_topology(pod: PodInfo, args: SlurmdArgs) -> PodInfo:
    """A literal Topology= in the operator's --conf (a NodeSet's ExtraConf) wins over SLINKY_TOPOLOGY."""
    return dataclasses.replace(pod, topology=args.topology) if args.topology is not None else pod


def merge(node: NodeSpec, args: SlurmdArgs) -> NodeSpec:
    """Our node facts with the operator's: its features first (the NodeSet name), then ours; its other
    parameters replace what we derived (a NodeSet's ExtraConf is the user's explicit choice)."""
    features = tuple(dict.fromkeys((*args.features, *node.features)))
    if len(features) > MAX_FEATURES:
        raise BadInput.one("--conf Features", ",".join(features), f"{len(features)} features; at most {MAX_FEATURES}")
    given = dict(args.overrides)
    # A shape or memory set by hand makes our reservations for the pod's limits meaningless.
    core_spec = 0 if given.keys() & _CPU_SHAPE else node.core_spec_count
    mem_spec = 0 if "RealMemory" in given else node.mem_spec_limit_mib
    return dataclasses.replace(node, features=features, overrides=args.overrides,
                               core_spec_count=core_spec, mem_spec_limit_mib=mem_spec)
