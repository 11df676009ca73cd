"""`slurmpod entrypoint ROLE`: pod start.

One direction, no back and forth: input (entrypoints/inputs.py) -> the role's plan (entrypoints/roles/)
-> rendered files -> supervisord. ``plan`` renders everything in memory from the input it is given;
only when the whole plan is good does entrypoints/writer.py write it, and then the process becomes
supervisord (entrypoints/pid1.py). Bad input writes nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

from slurmpod import well_known as wk
from slurmpod.entrypoints import pid1, programs, render, roles, secrets, slinky, sssd_conf, writer
from slurmpod.entrypoints.inputs import Adapters, Settings, StartInput, load
from slurmpod.entrypoints.render import Program
from slurmpod.entrypoints.roles.worker import RECONCILE_DELAY_S
from slurmpod.entrypoints.startplan import Common, KeyInstall, OutDir, OutFile, StartPlan

__all__ = ["RECONCILE_DELAY_S", "Adapters", "OutDir", "OutFile", "Settings", "StartInput", "StartPlan",
           "common", "describe", "load", "main", "plan"]

log = logging.getLogger(__name__)


# sshd asks SSSD for a directory user's keys, after the user's authorized_keys. Ref: sshd_config(5),
# AuthorizedKeysCommand; sss_ssh_authorizedkeys(1). pam_mkhomedir: ref pam_mkhomedir(8).
SSHD_SSSD = "AuthorizedKeysCommand /usr/bin/sss_ssh_authorizedkeys %u\nAuthorizedKeysCommandUser nobody\n"
PAM_MKHOMEDIR = "session optional pam_mkhomedir.so umask=0077\n"


def directory(inp: StartInput) -> tuple[tuple[OutFile, ...], tuple[Program, ...]]:
    """SSSD's part of the pod when the site's sssd.conf is mounted: nothing otherwise."""
    if inp.sssd is None:
        return (), ()
    files = [OutFile(wk.SSSD_CONF, inp.sssd.text, 0o600)]
    if "ssh" in sssd_conf.NEEDED_SERVICES[inp.role]:  # the pods users ssh into
        files.append(OutFile(wk.SSHD_SSSD_DROPIN, SSHD_SSSD))
        if inp.mkhomedir:
            files.append(OutFile(wk.PAM_MKHOMEDIR, PAM_MKHOMEDIR))
    return tuple(files), (programs.sssd(),)


def common(inp: StartInput) -> Common:
    """What every pod has: the run directory, the auth daemon (munged) or key (auth/slurm), and SSSD
    where the site's sssd.conf is mounted."""
    c = _common(inp)
    files, progs = directory(inp)
    return dataclasses.replace(c, files=files, programs=(*progs, *c.programs), directory=bool(progs))


def _common(inp: StartInput) -> Common:
    settings, pod, auth = inp.settings, inp.pod, inp.auth
    dirs = [OutDir(str(settings.run_dir / "bin"), 0, 0, 0o755)]
    if not roles.REGISTRY[inp.role].auth:  # no Slurm daemon: no auth key, no munged
        return Common(pod, auth, (), tuple(dirs), ())
    if auth == wk.AUTH_MUNGE:
        key = KeyInstall(secrets.read_key(settings.munge_key, "munge key secret"), wk.MUNGE_KEY, "munge")
        dirs += [
            OutDir("/run/munge", wk.MUNGE_UID, wk.MUNGE_UID, 0o755),
            OutDir("/var/lib/munge", wk.MUNGE_UID, wk.MUNGE_UID, 0o700),
            OutDir("/var/log/munge", wk.MUNGE_UID, wk.MUNGE_UID, 0o700),
        ]
        return Common(pod, auth, (key,), tuple(dirs), (programs.munged(),))
    # Configless slurmd and sackd pick the auth type for their first config fetch by this file alone:
    # with /etc/slurm/slurm.key present they use auth/slurm, without it auth/munge (observed with
    # Slurm 24.11.5 and 26.05.5: slurmd without the key fails with "Munge encode failed ... failed to
    # initialize auth plugin"). So the key is installed there before any daemon starts; no flag is needed.
    # Owned by SlurmUser, never readable by others. Ref: https://slurm.schedmd.com/authentication.html#slurm
    slurm_key = secrets.read_key(settings.slurm_key, "slurm key secret")
    if settings.slurm_key == Path(wk.SLURM_KEY):  # Slinky mounts it there, read-only: use it as it is
        return Common(pod, auth, (), tuple(dirs), ())
    return Common(pod, auth, (KeyInstall(slurm_key, wk.SLURM_KEY, "slurm"),), tuple(dirs), ())


def child_environment(inp: StartInput) -> tuple[tuple[str, str], ...]:
    """What the programs supervisord starts (reconcile-node, topology-sync, the hooks slurmd runs) learn
    of the pod, as pod start resolved it (Slinky's pods included), rendered into supervisord.conf."""
    pod = inp.pod
    env = [(wk.ENV_POD_NAME, pod.name)]
    if pod.namespace:
        env.append((wk.ENV_POD_NAMESPACE, pod.namespace))
    if pod.controller:
        env.append((wk.ENV_CONTROLLER, pod.controller))
    if roles.REGISTRY[inp.role].auth:
        env.append((wk.ENV_AUTH, inp.auth))
    return tuple(env)


def plan(inp: StartInput, adapters: Adapters) -> StartPlan:
    """Render every file of the pod, in memory, from its validated input."""
    c = common(inp)
    part = roles.REGISTRY[inp.role].build(inp, c, adapters)
    progs = (*c.programs, *part.programs)
    stop_wait = max(2, inp.pod.grace_seconds // 3)
    conf = render.supervisord_conf(inp.role, progs, stop_wait, str(inp.settings.run_dir),
                                   environment=child_environment(inp))
    return StartPlan(inp.role, inp.pod, part.node, (*c.files, *part.files), (*c.dirs, *part.dirs),
                     (*c.keys, *part.keys), progs, conf)


def describe(p: StartPlan) -> str:
    lines = [f"role: {p.role}", f"pod: {p.pod.name}"]
    if p.node:
        lines.append(f"node: {p.node.conf_string()}")
    lines += [f"file: {f.path}" for f in p.files]
    lines += [f"key: {k.key.source} -> {k.dest} ({k.user}, 0400)" for k in p.keys]
    lines += [f"program: {prog.name}" for prog in p.programs]
    return "\n".join(lines)


def main(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    pid1.end_on_sigterm()
    operator = None
    rest = list(getattr(args, "slurmd_args", None) or [])
    if rest[:1] == ["--dry-run"]:  # after the role, argparse's REMAINDER takes our own option too
        args.dry_run = True
        rest = rest[1:]
    args.slurmd_args = rest
    if rest:  # started as Slinky's operator starts slurmd
        operator = slinky.parse(args.slurmd_args)
        env = slinky.pod_env(env, operator, socket.gethostname())
    settings = Settings.from_env(env)
    p = plan(load(args.role, env, settings, operator), Adapters())
    if args.dry_run:
        print(describe(p))
        return 0
    conf = writer.apply(p, settings.run_dir)
    log.info("starting supervisord", extra={"ctx": {"role": p.role, "pod": p.pod.name}})
    sys.stdout.flush()
    sys.stderr.flush()
    pid1.kick_supervisord(settings.run_dir / wk.SUPERVISOR_SOCK)
    return pid1.run_supervisord(conf)
