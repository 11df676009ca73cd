"""The daemons each role runs under supervisord, as small bash run scripts.

Each script prefixes its output with the program name (for `kubectl logs`), waits with a deadline for
what it depends on (munged's socket before any Slurm daemon), then ``exec``s the daemon so signals
from supervisord reach it directly.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Literal

from slurmpod import well_known as wk
from slurmpod.entrypoints.render import Program

MUNGE_WAIT_SECONDS = 30
HOST_KEY = wk.SSH_HOST_KEY


def _script(name: str, body: Sequence[str], *, prefix: bool = True) -> str:
    head = ["#!/bin/bash", f"# {name}: run script rendered by slurmpod; supervisord restarts it on exit."]
    if prefix:
        # Line-buffered output, block reads: `sed -u` would read() one byte at a time (about 100 syscalls
        # per log line, on the cores the daemons share). stdbuf is coreutils'.
        head.append(f"exec > >(exec stdbuf -oL sed 's/^/[{name}] /') 2>&1")
    return "\n".join([*head, *body]) + "\n"


def _wait_socket(path: str, seconds: int) -> list[str]:
    # munged makes its socket within tens of ms of its start: poll at 10 ms, the wait is on the path to IDLE.
    steps = seconds * 100
    q = shlex.quote(path)
    return [
        f"for _ in $(seq {steps}); do [ -S {q} ] && break; sleep 0.01; done",
        f'[ -S {q} ] || {{ echo "{path} not up after {seconds} s"; exit 1; }}',
    ]


def _cmd(argv: Sequence[str]) -> str:
    return "exec " + " ".join(shlex.quote(a) for a in argv)


def slurmd_argv(controller: str, conf: str, extra: str | None = None) -> tuple[str, ...]:
    """What a worker execs: -D foreground, -Z dynamic node, --conf-server configless, and --extra
    (the node's Extra JSON: its placement, for the controller's topology-sync) when there is one.

    Ref: https://slurm.schedmd.com/slurmd.html
    """
    argv = ("/usr/sbin/slurmd", "-D", "-Z", "--conf-server", conf_server(controller), "--conf", conf)
    return (*argv, "--extra", extra) if extra else argv


def conf_server(controller: str) -> str:
    """host[:port] for --conf-server; slurmctld's default port when none is given."""
    return controller if ":" in controller else f"{controller}:{wk.SLURMCTLD_PORT}"


def munged() -> Program:
    # Ref: munged(8): --foreground; the key is installed by the entrypoint from the secret.
    return Program(
        "munged", _script("munged", [_cmd(["/usr/sbin/munged", "--foreground"])]), priority=10, user="munge"
    )


def _after_auth(auth: str) -> list[str]:
    return _wait_socket(wk.MUNGE_SOCKET, MUNGE_WAIT_SECONDS) if auth == "munge" else []


def slurmctld(auth: str) -> Program:
    # -D: foreground, logs to stderr. Ref: https://slurm.schedmd.com/slurmctld.html
    body = [*_after_auth(auth), _cmd(["/usr/sbin/slurmctld", "-D"])]
    return Program("slurmctld", _script("slurmctld", body), priority=20)


def slurmd(auth: str, controller: str, conf: str, extra: str | None = None) -> Program:
    argv = slurmd_argv(controller, conf, extra)
    body = [*_after_auth(auth), _cmd(argv)]
    return Program("slurmd", _script("slurmd", body), priority=20, argv=argv)


def sackd(auth: str, controller: str) -> Program:
    """sackd caches the configless config for client commands and, with auth/slurm, signs and verifies
    their credentials on /run/slurm/sack.socket (slurmd and slurmctld do that themselves).

    It runs as SlurmUser, as the packaged sackd.service does (User=slurm, RuntimeDirectory=slurm); as root
    it warns "sackd running as root instead of SlurmUser(slurm)".
    Ref: https://slurm.schedmd.com/sackd.html
    Ref: https://slurm.schedmd.com/authentication.html#sack
    """
    server = conf_server(controller)
    body = [*_after_auth(auth), _cmd(["/usr/sbin/sackd", "-D", "--conf-server", server])]
    return Program("sackd", _script("sackd", body), priority=20, user="slurm")


def sshd() -> Program:
    # Host keys are never in an image layer: the login pod installs one from its Secret (start.login_plan);
    # otherwise one is made per pod, ed25519 only, it is fast to generate.
    body = [
        "mkdir -p /run/sshd && chmod 0755 /run/sshd",
        f"[ -s {HOST_KEY} ] || ssh-keygen -q -t ed25519 -N '' -f {HOST_KEY}",
        _cmd(["/usr/sbin/sshd", "-D", "-e"]),
    ]
    return Program("sshd", _script("sshd", body), priority=30)


def slurmpod_task(name: str, args: Sequence[str], *, restart: Literal["true", "false", "unexpected"],
                  delay_s: int = 0) -> Program:
    """A slurmpod helper (node reaper, node reconciliation) run under supervisord.

    No sed prefix: slurmpod's log lines name their logger already, and a one-shot task exits right
    after its last line, when supervisord may close the pipe before sed has passed that line on.
    """
    body = [f"sleep {int(delay_s)}"] if delay_s > 0 else []
    return Program(
        name,
        _script(name, [*body, _cmd(["/usr/local/bin/slurmpod", *args])], prefix=False),
        priority=40,
        restart=restart,
        startsecs=0,
    )
