"""`slurmpod entrypoint ROLE`: pod start.

One direction, no back and forth: PodInfo -> (NodeSpec) -> rendered files -> supervisord.
``plan`` reads and validates everything and renders in memory; only when the whole plan is good does
``apply`` write it, and then the process becomes supervisord (PID 1). Bad input writes nothing.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import pwd
import signal
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from slurmpod import confvalues, hardware, mounttable, nvml, podinfo, slurm_version
from slurmpod import well_known as wk
from slurmpod.entrypoints import health_config, nodespec, programs, render, secrets, slinky
from slurmpod.entrypoints.render import Program
from slurmpod.errors import BadInput, TransientError
from slurmpod.prolog_epilog import task_env

if TYPE_CHECKING:
    from slurmpod.entrypoints import cluster_spec

log = logging.getLogger(__name__)

# Seconds reconcile-node waits before its first look (slurmd registers in about 1 s).
RECONCILE_DELAY_S = 3


@dataclass(frozen=True, slots=True)
class OutFile:
    path: str
    content: str
    mode: int = 0o644
    uid: int = 0
    gid: int = 0


@dataclass(frozen=True, slots=True)
class OutDir:
    path: str
    uid: int
    gid: int
    mode: int
    # A home directory on the shared /home volume: made only when missing (an existing one keeps its
    # owner and mode), and a volume that refuses (root-squashed NFS, read-only) costs a warning only.
    home: bool = False


@dataclass(frozen=True, slots=True)
class KeyInstall:
    key: secrets.Key
    dest: str
    user: str


@dataclass(frozen=True, slots=True)
class StartPlan:
    role: str
    pod: podinfo.PodInfo
    node: nodespec.NodeSpec | None
    files: tuple[OutFile, ...]
    dirs: tuple[OutDir, ...]
    keys: tuple[KeyInstall, ...]
    programs: tuple[Program, ...]
    supervisord_conf: str


@dataclass(frozen=True, slots=True)
class Settings:
    """Where the pod's inputs are; each has a SLURMPOD_ environment twin for tests and other layouts."""

    podinfo_dir: Path
    cluster_spec: Path
    munge_key: Path
    slurm_key: Path
    run_dir: Path
    hw_root: Path
    ssh_host_key: Path
    db_password: Path = Path(wk.DB_PASSWORD_SECRET)
    jwt_key: Path = Path(wk.JWT_KEY_SECRET)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        return cls(
            podinfo_dir=Path(env.get(wk.ENV_PODINFO_DIR, wk.PODINFO_DIR)),
            cluster_spec=Path(env.get(wk.ENV_CLUSTER_SPEC, wk.CLUSTER_SPEC_FILE)),
            munge_key=Path(env.get("SLURMPOD_MUNGE_KEY_FILE", wk.MUNGE_KEY_SECRET)),
            slurm_key=Path(env.get("SLURMPOD_SLURM_KEY_FILE", wk.SLURM_KEY_SECRET)),
            run_dir=Path(env.get(wk.ENV_RUN_DIR, wk.RUN_DIR)),
            hw_root=Path(env.get("SLURMPOD_HW_ROOT", "/")),
            ssh_host_key=Path(env.get("SLURMPOD_SSH_HOST_KEY_FILE",
                                      f"{wk.SSH_HOST_KEY_SECRET_DIR}/{wk.SSH_HOST_KEY_FILE}")),
            db_password=Path(env.get("SLURMPOD_DB_PASSWORD_FILE", wk.DB_PASSWORD_SECRET)),
            jwt_key=Path(env.get("SLURMPOD_JWT_KEY_FILE", wk.JWT_KEY_SECRET)),
        )


def _auth(env: Mapping[str, str], spec: cluster_spec.ClusterSpec | None) -> str:
    """munge | slurm: the spec decides on the controller, SLURMPOD_AUTH (the ConfigMap's `auth`) elsewhere.

    Both come from one ConfigMap; on the controller they must agree, or workers would start with an auth
    type slurmctld does not accept (and fail far from the cause).
    """
    value = env.get(wk.ENV_AUTH)
    if value is not None and value not in wk.AUTH_TYPES:
        raise BadInput.one(wk.ENV_AUTH, value, f"must be one of {', '.join(wk.AUTH_TYPES)}")
    if spec is None:
        return value or wk.AUTH_MUNGE
    if value is not None and value != spec.auth:
        raise BadInput.one(wk.ENV_AUTH, value, f"differs from the cluster spec's auth: {spec.auth} "
                           "(set the ConfigMap's `auth` and cluster.yaml's `auth:` alike)")
    return spec.auth


def _homes() -> tuple[OutDir, ...]:
    """Home directories of ordinary users on the shared /home volume, made on first start."""
    out = []
    for user in pwd.getpwall():
        if user.pw_uid >= 1000 and user.pw_dir.startswith("/home/") and user.pw_uid < 60000:
            out.append(OutDir(user.pw_dir, user.pw_uid, user.pw_gid, 0o750, home=True))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class _Common:
    """What every role's builder starts from: the pod, its auth, and the pieces every pod has."""

    pod: podinfo.PodInfo
    auth: str
    keys: tuple[KeyInstall, ...]
    dirs: tuple[OutDir, ...]
    programs: tuple[Program, ...]


@dataclass(frozen=True, slots=True)
class _RolePlan:
    node: nodespec.NodeSpec | None
    files: tuple[OutFile, ...]
    dirs: tuple[OutDir, ...]
    programs: tuple[Program, ...]


def _common(settings: Settings, pod: podinfo.PodInfo, auth: str) -> _Common:
    """The auth daemon (munged) or key (auth/slurm), and the run directory."""
    dirs = [OutDir(str(settings.run_dir / "bin"), 0, 0, 0o755)]
    if auth == wk.AUTH_MUNGE:
        key = KeyInstall(secrets.read_key(settings.munge_key, "munge key secret"), wk.MUNGE_KEY, "munge")
        dirs += [
            OutDir("/run/munge", wk.MUNGE_UID, wk.MUNGE_UID, 0o755),
            OutDir("/var/lib/munge", wk.MUNGE_UID, wk.MUNGE_UID, 0o700),
            OutDir("/var/log/munge", wk.MUNGE_UID, wk.MUNGE_UID, 0o700),
        ]
        return _Common(pod, auth, (key,), tuple(dirs), (programs.munged(),))
    # Configless slurmd and sackd pick the auth type for their first config fetch by this file alone:
    # with /etc/slurm/slurm.key present they use auth/slurm, without it auth/munge (observed with
    # Slurm 24.11.5 and 26.05.5: slurmd without the key fails with "Munge encode failed ... failed to
    # initialize auth plugin"). So the key is installed there before any daemon starts; no flag is needed.
    # Owned by SlurmUser, never readable by others. Ref: https://slurm.schedmd.com/authentication.html#slurm
    slurm_key = secrets.read_key(settings.slurm_key, "slurm key secret")
    if settings.slurm_key == Path(wk.SLURM_KEY):  # Slinky mounts it there, read-only: use it as it is
        return _Common(pod, auth, (), tuple(dirs), ())
    return _Common(pod, auth, (KeyInstall(slurm_key, wk.SLURM_KEY, "slurm"),), tuple(dirs), ())


def common_without_keys(pod: podinfo.PodInfo) -> _Common:
    """For previews (`render node`): the pod without its auth pieces, which do not change the node."""
    return _Common(pod, wk.AUTH_MUNGE, (), (), ())


def _host_env(env: Mapping[str, str], name: str, why: str) -> str:
    value = env.get(name)
    if not value:
        raise BadInput.one(name, "", f"must be set: {why}")
    return confvalues.host(name, value)


def accounting_host(env: Mapping[str, str], spec: cluster_spec.ClusterSpec) -> str | None:
    """slurmdbd's host (the chart: <release>-accounting-0) when the spec enables accounting."""
    if not spec.accounting.enabled:
        return None
    return _host_env(env, wk.ENV_ACCOUNTING_HOST, "the cluster spec enables accounting")


def jwt_key(settings: Settings, needed: bool) -> tuple[KeyInstall, ...]:
    """The auth/jwt key from its Secret, for slurmctld and slurmdbd (SlurmUser, 0400): required when
    ``needed``, else installed only when mounted (an optional Secret mounts as an empty directory)."""
    if not needed and not settings.jwt_key.exists():
        return ()
    return (KeyInstall(secrets.read_key(settings.jwt_key, "jwt key secret"), wk.JWT_KEY, "slurm"),)


def controller_plan(c: _Common, spec: cluster_spec.ClusterSpec, extra_files: tuple[OutFile, ...] = (),
                    accounting: str | None = None, mpi_plugins: frozenset[str] = frozenset()) -> _RolePlan:
    """``mpi_plugins``: the image's MPI plugin types (MpiDefault follows them unless the spec names one)."""
    files = [OutFile(wk.SLURM_CONF, render.slurm_conf(spec, c.pod.name, accounting, mpi_plugins)), *extra_files,
             # Debian's plugstack.conf includes a glob Slurm cannot parse; configless nodes get this one.
             # Ref: https://slurm.schedmd.com/spank.html#SECTION_CONFIGURATION
             OutFile(f"{wk.SLURM_ETC}/plugstack.conf", "# rendered by slurmpod: no SPANK plugins\n"),
             OutFile(f"{wk.SLURM_ETC}/gres.conf", render.gres_conf())]
    if spec.cgroups:
        files.append(OutFile(f"{wk.SLURM_ETC}/cgroup.conf", render.cgroup_conf()))
    dirs = [OutDir(wk.STATE_SAVE_LOCATION, wk.SLURM_UID, wk.SLURM_UID, 0o700)]
    from slurmpod.entrypoints.cluster_spec import Policy  # noqa: PLC0415 - workers never load it

    if spec.policy is Policy.SLURMPOD:
        # The job_submit plugin runs inside slurmctld (SlurmUser) and writes its timing stats here.
        dirs.append(OutDir(wk.PLUGIN_STATS_DIR, wk.SLURM_UID, wk.SLURM_UID, 0o755))
    if c.auth == wk.AUTH_SLURM:
        # slurmctld's SACK socket (client commands in this pod use it). "If not using systemd, create
        # the runtime directories". Ref: https://slurm.schedmd.com/authentication.html#single_key_setup
        dirs.append(OutDir(wk.SLURMCTLD_RUN_DIR, wk.SLURM_UID, wk.SLURM_UID, 0o755))
    progs = [
        programs.slurmctld(c.auth, accounting),
        programs.slurmpod_task(
            "node-reaper", ["daemon", "node-reaper", "--node-timeout", str(spec.node_timeout_seconds)],
            restart="true",
        ),
    ]
    if spec.accounting.enabled:
        # Registers the cluster and makes the spec's QoS in slurmdbd, once it answers.
        progs.append(programs.slurmpod_task("accounting-setup", ["daemon", "accounting-setup"],
                                            restart="unexpected"))
    if spec.topology_plugin != "none":
        # Re-renders the topology as worker pods come and go; reconfigures only on a change.
        progs.append(programs.slurmpod_task("topology-sync", ["daemon", "topology-sync"], restart="true"))
    return _RolePlan(None, tuple(files), tuple(dirs), tuple(progs))


def topology_files(spec: cluster_spec.ClusterSpec, env: Mapping[str, str]) -> tuple[OutFile, ...]:
    """topology.conf (24.11) or topology.yaml (25.05+) before slurmctld starts: TopologyPlugin needs the
    file to exist. With the slurm source no worker has registered yet, so it holds no nodes until the
    first topology-sync pass; with the api source it holds the pods the API lists now."""
    from slurmpod.entrypoints import cluster_spec, topology_sync  # noqa: PLC0415 - the controller's alone
    from slurmpod.slurm import CliSlurmClient  # noqa: PLC0415 - the controller's alone

    tgt = topology_sync.target(spec, slurm_version.detect(env))
    if tgt is None:
        return ()
    source = None
    if spec.topology.source is cluster_spec.TopologySource.API:
        source = topology_sync.source_for(spec, env, CliSlurmClient())
    try:
        text = topology_sync.render_now(tgt, source)
    except TransientError as exc:  # the API is away: start without nodes; topology-sync fills them in
        log.warning("topology rendered without nodes", extra={"ctx": {"err": str(exc)[:200]}})
        text = topology_sync.render_now(tgt, None)
    return (OutFile(str(tgt.path), text),)


def worker_plan(c: _Common, env: Mapping[str, str], settings: Settings,
                operator: slinky.SlurmdArgs | None = None) -> _RolePlan:
    """``operator``: slurmd args a Slinky operator started the pod with, merged into the node."""
    hw = hardware.probe(settings.hw_root, nvml.inventory())
    node = nodespec.build(c.pod, hw, slurm_version.detect(env), env.get(wk.ENV_NODESET) or None)
    if operator is not None:
        node = slinky.merge(node, operator)
    node_conf = node.conf_string()
    files = [OutFile(f"{wk.SLURM_ETC}/gres.conf", node.gres_conf())] if node.gpus else []
    try:
        mounted = mounttable.mount_points((settings.hw_root / "proc/self/mounts").read_text(encoding="utf-8"))
    except OSError:
        mounted = frozenset()
    facts = health_config.NodeFacts(len(node.gpus), c.auth, node.real_memory_mib, health_config.required(mounted))
    files.append(OutFile(wk.HEALTH_CONFIG, health_config.render(facts)))
    # What the TaskProlog exports to each task (prolog_epilog/task_env.py); its scratch base is sticky.
    try:
        routes = (settings.hw_root / "proc/net/route").read_text(encoding="utf-8")
    except OSError:
        routes = ""
    tenv = task_env.from_pod(env, routes, node.placement)
    files.append(OutFile(wk.TASK_ENV_FILE, task_env.render(tenv)))
    scratch = (OutDir(tenv.scratch_base, 0, 0, 0o1777),) if tenv.scratch_base else ()
    progs = [
        programs.slurmd(c.auth, c.pod.controller, node_conf, node.extra),
        programs.sshd(),
        # One-shot, restarted by supervisord if it fails: it waits for the controller however long.
        # It starts once slurmd has had time to register, so its Python start and polls do not compete
        # with slurmd for the CPU on the path to IDLE.
        programs.slurmpod_task("reconcile-node", ["daemon", "reconcile-node", "--expect", node_conf],
                               restart="unexpected", delay_s=RECONCILE_DELAY_S),
    ]
    dirs = (OutDir(wk.SLURMD_SPOOL, 0, 0, 0o755), *scratch, *_homes())
    return _RolePlan(node, tuple(files), dirs, tuple(progs))


def login_plan(c: _Common, settings: Settings) -> tuple[_RolePlan, tuple[KeyInstall, ...]]:
    """sackd and sshd; the ssh host key from its Secret when mounted, so clients keep trusting this pod."""
    # sackd's runtime directory (config cache, sack.socket), owned by SlurmUser as sackd.service's
    # RuntimeDirectory is; sackd warns when it is owned by root. Ref: https://slurm.schedmd.com/sackd.html
    dirs = (OutDir(wk.SLURM_RUN_DIR, wk.SLURM_UID, wk.SLURM_UID, 0o755), *_homes())
    keys: tuple[KeyInstall, ...] = ()
    if settings.ssh_host_key.exists():  # optional Secret: an empty volume when the user made none
        key = secrets.read_key(settings.ssh_host_key, "ssh host key secret")
        keys = (KeyInstall(key, wk.SSH_HOST_KEY, "root"),)
    part = _RolePlan(None, (), dirs, (programs.sackd(c.auth, c.pod.controller), programs.sshd()))
    return part, keys


def db_plan(settings: Settings) -> _RolePlan:
    """MariaDB for slurmdbd: its data on the pod's volume, StorageUser made by the init file."""
    from slurmpod.entrypoints import accounting  # noqa: PLC0415 - the accounting roles' alone

    sql = accounting.init_sql(accounting.read_password(settings.db_password))
    dirs = (OutDir(wk.MARIADB_DATA_DIR, wk.MYSQL_UID, wk.MYSQL_UID, 0o700),
            OutDir(wk.MARIADB_RUN_DIR, wk.MYSQL_UID, wk.MYSQL_UID, 0o755),
            OutDir(str(Path(wk.DB_INIT_FILE).parent), wk.MYSQL_UID, wk.MYSQL_UID, 0o700))
    files = (OutFile(wk.DB_INIT_FILE, sql, 0o600, wk.MYSQL_UID, wk.MYSQL_UID),)
    return _RolePlan(None, files, dirs, (programs.mariadbd(),))


def accounting_plan(c: _Common, env: Mapping[str, str], settings: Settings) -> tuple[_RolePlan, tuple[KeyInstall, ...]]:
    """slurmdbd: slurmdbd.conf (SlurmUser, 0600: it holds StoragePass) from the pod and its Secrets."""
    from slurmpod.entrypoints import accounting  # noqa: PLC0415 - the accounting roles' alone

    keys = jwt_key(settings, needed=False)
    conf = render.SlurmdbdConf(
        auth=c.auth,
        dbd_host=confvalues.host(wk.ENV_POD_NAME, c.pod.name),
        storage_host=_host_env(env, wk.ENV_DB_HOST, "slurmdbd's StorageHost (the db pod)"),
        storage_pass=accounting.read_password(settings.db_password),
        jwt=bool(keys),
    )
    files = (OutFile(wk.SLURMDBD_CONF, render.slurmdbd_conf(conf), 0o600, wk.SLURM_UID, wk.SLURM_UID),)
    dirs = (OutDir(wk.SLURMDBD_RUN_DIR, wk.SLURM_UID, wk.SLURM_UID, 0o755),)
    return _RolePlan(None, files, dirs, (programs.slurmdbd(c.auth),)), keys


def restapi_plan(c: _Common) -> _RolePlan:
    """sackd (configless slurm.conf for slurmrestd, SACK with auth/slurm) and slurmrestd."""
    dirs = (OutDir(wk.SLURM_RUN_DIR, wk.SLURM_UID, wk.SLURM_UID, 0o755),)
    return _RolePlan(None, (), dirs, (programs.sackd(c.auth, c.pod.controller), programs.slurmrestd(c.auth)))


def plan(role: str, env: Mapping[str, str], settings: Settings,
         operator: slinky.SlurmdArgs | None = None) -> StartPlan:
    """Read and validate every input and render every file, in memory.

    ``operator``: a worker started by Slinky's operator (``env`` completed by ``slinky.pod_env``)."""
    if role not in wk.POD_ROLES:
        raise BadInput.one("ROLE", role, f"unknown role; expected one of {', '.join(wk.POD_ROLES)}")
    if operator is not None and role != "worker":
        raise BadInput.one("ROLE", role, "slurmd args are for the worker role only")
    run_dir = confvalues.path(wk.ENV_RUN_DIR, str(settings.run_dir))  # written into supervisord.conf
    pod = podinfo.load(env, settings.podinfo_dir, require_controller=role in ("worker", "login", "restapi"),
                       optional_dir=operator is not None)
    if operator is not None:
        pod = slinky.with_topology(pod, operator)
    spec = None
    if role == "controller":  # the cluster spec (YAML) is the controller's alone: workers never import it
        from slurmpod.entrypoints import cluster_spec  # noqa: PLC0415

        spec = cluster_spec.load(settings.cluster_spec)
    if role == "db":  # no Slurm daemon: no auth key, no munged
        common = _Common(pod, wk.AUTH_MUNGE, (), (OutDir(str(settings.run_dir / "bin"), 0, 0, 0o755),), ())
    else:
        common = _common(settings, pod, _auth(env, spec))
    keys = common.keys
    if spec is not None:
        part = controller_plan(common, spec, topology_files(spec, env), accounting_host(env, spec),
                               slurm_version.mpi_plugins(settings.hw_root))
        keys += jwt_key(settings, needed=spec.restapi.enabled)
    elif role == "db":
        part = db_plan(settings)
    elif role == "accounting":
        part, jwt = accounting_plan(common, env, settings)
        keys += jwt
    elif role == "restapi":
        part = restapi_plan(common)
    elif role == "worker":
        part = worker_plan(common, env, settings, operator)
    else:
        part, host_keys = login_plan(common, settings)
        keys += host_keys
    progs = (*common.programs, *part.programs)
    stop_wait = max(2, pod.grace_seconds // 3)
    conf = render.supervisord_conf(role, progs, stop_wait, run_dir)
    return StartPlan(role, pod, part.node, part.files, (*common.dirs, *part.dirs), keys, progs, conf)


def _write(path: Path, content: str, mode: int, uid: int = 0, gid: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    # Created owner-only: a file that holds a password is never readable by others, not even briefly.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(content)
    if (uid, gid) != (0, 0):
        os.chown(tmp, uid, gid)
    tmp.chmod(mode)
    os.replace(tmp, path)


def apply(p: StartPlan, settings: Settings) -> Path:
    """Write the plan; returns the supervisord.conf path."""
    for d in p.dirs:
        if d.home:
            _make_home(d)
            continue
        path = Path(d.path)
        path.mkdir(parents=True, exist_ok=True)
        os.chown(path, d.uid, d.gid)
        path.chmod(d.mode)
    for k in p.keys:
        user = pwd.getpwnam(k.user)
        secrets.install(k.key, Path(k.dest), user.pw_uid, user.pw_gid)
    for f in p.files:
        _write(Path(f.path), f.content, f.mode, f.uid, f.gid)
    for prog in p.programs:
        _write(settings.run_dir / "bin" / prog.name, prog.script, 0o755)
    conf = settings.run_dir / wk.SUPERVISORD_CONF
    _write(conf, p.supervisord_conf, 0o644)
    return conf


def _make_home(d: OutDir) -> None:
    path = Path(d.path)
    if path.exists():
        return
    try:
        path.mkdir(mode=0o700)  # owner-only until chowned: never briefly open to others
        os.chown(path, d.uid, d.gid)
        path.chmod(d.mode)
    except OSError as exc:  # root-squashed NFS (EACCES/EPERM), read-only /home (EROFS)
        log.warning("home directory not made; users can still run jobs that do not need it",
                    extra={"ctx": {"path": d.path, "err": exc.strerror or str(exc)}})


def describe(p: StartPlan) -> str:
    lines = [f"role: {p.role}", f"pod: {p.pod.name}"]
    if p.node:
        lines.append(f"node: {p.node.conf_string()}")
    lines += [f"file: {f.path}" for f in p.files]
    lines += [f"key: {k.key.source} -> {k.dest} ({k.user}, 0400)" for k in p.keys]
    lines += [f"program: {prog.name}" for prog in p.programs]
    return "\n".join(lines)


def _kick_supervisord(sock: Path, deadline_s: float = 5.0) -> None:
    """Fork a child that connects once to supervisord's control socket as soon as it exists.

    supervisord polls its sockets for up to 1 s before its first pass over the programs, so an idle
    start waits a full second before munged and slurmd are spawned. A connection makes that first poll
    return at once. Ref: supervisor/supervisord.py Supervisor.runforever (poll before transition).
    """
    if os.fork() != 0:
        return
    try:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(1.0)
                    s.connect(str(sock))
                break
            except OSError:  # not there yet, or a stale file from the last start
                time.sleep(0.005)
    finally:
        os._exit(0)


def _end_on_sigterm() -> None:
    """PID 1 ignores signals it has no handler for, so a pod deleted while it starts would wait out its
    whole grace period. Until supervisord takes over, SIGTERM ends the pod at once (nothing is half
    written: every file is written to a temporary name and renamed)."""

    def _exit(signum: int, _frame: object) -> None:
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)


def main(args: argparse.Namespace) -> int:
    _end_on_sigterm()
    env = dict(os.environ)
    operator = None
    rest = list(getattr(args, "slurmd_args", None) or [])
    if rest[:1] == ["--dry-run"]:  # after the role, argparse's REMAINDER takes our own option too
        args.dry_run = True
        rest = rest[1:]
    args.slurmd_args = rest
    if rest:  # started as Slinky's operator starts slurmd
        operator = slinky.parse(args.slurmd_args)
        env = slinky.pod_env(env, operator, socket.gethostname())
        os.environ.update(env)  # the programs supervisord starts (reconcile-node, hooks) read the same
    settings = Settings.from_env(env)
    p = plan(args.role, env, settings, operator)
    if args.dry_run:
        print(describe(p))
        return 0
    conf = apply(p, settings)
    log.info("starting supervisord", extra={"ctx": {"role": p.role, "pod": p.pod.name}})
    sys.stdout.flush()
    sys.stderr.flush()
    _kick_supervisord(settings.run_dir / wk.SUPERVISOR_SOCK)
    return _run_supervisord(conf)


def _run_supervisord(conf: Path) -> int:
    """Become supervisord in this process (PID 1) rather than exec a second interpreter.

    supervisord's main() is what its console script calls; running it here saves a Python start and the
    imports both share, the largest part of what our start adds over a bare slurmd (make bench). It
    installs its own SIGTERM handler; until then ours ends the pod at once. Returns 0 when it shuts down.
    Ref: supervisor/supervisord.py main(args)
    """
    supervisord = importlib.import_module("supervisor.supervisord")
    supervisord.main(["-n", "-c", str(conf)])
    return 0
