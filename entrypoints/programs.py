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
SLURMDBD_WAIT_SECONDS = 180  # the db pod initialising an empty volume, then slurmdbd making its tables
CONF_WAIT_SECONDS = 60
# claim-placeholder's own deadline (daemons.CLAIM_DEADLINE, its last call included) and its Python start.
CLAIM_DEADLINE_SECONDS = 30
SSSD_WAIT_SECONDS = 30  # sssd makes its responders' sockets within seconds, the directory reachable or not
HOST_KEY = wk.SSH_HOST_KEY


def _script(name: str, body: Sequence[str], *, prefix: bool = True) -> str:
    head = ["#!/bin/bash", f"# {name}: run script rendered by slurmpod; supervisord restarts it on exit."]
    if prefix:
        # Line-buffered output, block reads: `sed -u` would read() one byte at a time (about 100 syscalls
        # per log line, on the cores the daemons share). stdbuf is coreutils'.
        head.append(f"exec > >(exec stdbuf -oL sed 's/^/[{name}] /') 2>&1")
    return "\n".join([*head, *body]) + "\n"


def _wait_socket(path: str, seconds: int, *, polls_per_s: int = 100, otherwise: str | None = None) -> list[str]:
    """Poll for a socket at most ``seconds``; then ``otherwise`` runs if it is not there (default: exit 1).
    munged makes its socket within tens of ms of its start: 10 ms polls, the wait is on the path to IDLE."""
    q = shlex.quote(path)
    return [
        f"for _ in $(seq {seconds * polls_per_s}); do [ -S {q} ] && break; sleep {1 / polls_per_s:g}; done",
        f"[ -S {q} ] || " + (otherwise or f'{{ echo "{path} not up after {seconds} s"; exit 1; }}'),
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


def _after_directory(directory: bool) -> list[str]:
    """With SSSD, wait (bounded) for its nss responder, so the daemon's first lookups of directory users
    are answered; then start either way: sssd answers from its cache, or offline, once it is up."""
    if not directory:
        return []
    return _wait_socket(wk.SSSD_NSS_PIPE, SSSD_WAIT_SECONDS, polls_per_s=10, otherwise=(
        f'echo "sssd: {wk.SSSD_NSS_PIPE} not up after {SSSD_WAIT_SECONDS} s; starting without it"'))


def sssd() -> Program:
    """SSSD in the foreground (-i), logging to stderr, before every daemon that resolves users (priority 5:
    before munged). Its config is the site's, installed by pod start. Ref: sssd(8)"""
    body = [_cmd(["/usr/sbin/sssd", "-i", "--logger=stderr"])]
    return Program("sssd", _script("sssd", body), priority=5)


def _wait_port(host: str, port: int, seconds: int, then: str) -> list[str]:
    """Poll a TCP port (bash's /dev/tcp) once a second, at most ``seconds``; ``then`` runs either way."""
    q = shlex.quote(f"/dev/tcp/{host}/{port}")
    return [
        f"for _ in $(seq {seconds}); do (exec 3<>{q}) 2>/dev/null && break; sleep 1; done",
        then,
    ]


def slurmctld(auth: str, accounting_host: str | None = None, directory: bool = False) -> Program:
    """-D: foreground, logs to stderr. Ref: https://slurm.schedmd.com/slurmctld.html

    With accounting, slurmctld's first start needs slurmdbd (without its TRES and no state saved yet it
    exits), so the script waits for slurmdbd's port first, bounded; supervisord restarts a slurmctld that
    exits anyway."""
    body = [*_after_auth(auth), *_after_directory(directory)]
    if accounting_host:
        body += _wait_port(accounting_host, wk.SLURMDBD_PORT, SLURMDBD_WAIT_SECONDS,
                           f'echo "slurmdbd {accounting_host}:{wk.SLURMDBD_PORT} reachable (or waited '
                           f'{SLURMDBD_WAIT_SECONDS} s)"')
    body.append(_cmd(["/usr/sbin/slurmctld", "-D"]))
    return Program("slurmctld", _script("slurmctld", body), priority=20)


def slurmdbd(auth: str) -> Program:
    """As SlurmUser, which alone may read slurmdbd.conf (mode 0600). -D: foreground.
    Ref: https://slurm.schedmd.com/slurmdbd.html"""
    body = [*_after_auth(auth), _cmd(["/usr/sbin/slurmdbd", "-D"])]
    return Program("slurmdbd", _script("slurmdbd", body), priority=20, user="slurm")


def mariadbd() -> Program:
    """MariaDB as its own user; an empty volume is initialised first (no test database, root only through
    the local socket), and the init file makes StorageUser and its database at every start.
    Ref: https://mariadb.com/kb/en/mariadb-install-db/ Ref: https://mariadb.com/kb/en/mariadbd-options/"""
    data = shlex.quote(wk.MARIADB_DATA_DIR)
    body = [
        f"if [ ! -d {data}/mysql ]; then",
        f"  mariadb-install-db --datadir={data} --skip-test-db --auth-root-authentication-method=socket "
        "> /dev/null || exit 1",
        "fi",
        _cmd(["/usr/sbin/mariadbd", f"--datadir={wk.MARIADB_DATA_DIR}", "--bind-address=0.0.0.0",
              f"--port={wk.MARIADB_PORT}", f"--socket={wk.MARIADB_RUN_DIR}/mysqld.sock",
              f"--init-file={wk.DB_INIT_FILE}", "--skip-name-resolve",
              # small and fast to start: slurmdbd's tables are small (Ref: slurm accounting.html#database-configuration)
              "--innodb-buffer-pool-size=128M", "--innodb-log-file-size=64M", "--innodb-lock-wait-timeout=900"]),
    ]
    return Program("mariadbd", _script("mariadbd", body), priority=20, user="mysql")


def slurmrestd(auth: str, directory: bool = False) -> Program:
    """slurmrestd on all addresses, JWT auth only, as its own user (it refuses root and SlurmUser).
    It reads the slurm.conf sackd fetched (configless), so it waits for that first.
    Ref: https://slurm.schedmd.com/slurmrestd.html Ref: https://slurm.schedmd.com/rest.html"""
    conf = f"{wk.SLURM_RUN_DIR}/conf/slurm.conf"
    q = shlex.quote(conf)
    body = [
        *_after_auth(auth),
        *_after_directory(directory),
        f"for _ in $(seq {CONF_WAIT_SECONDS * 10}); do [ -s {q} ] && break; sleep 0.1; done",
        f'[ -s {q} ] || {{ echo "{conf} not fetched by sackd after {CONF_WAIT_SECONDS} s"; exit 1; }}',
        f"export SLURM_CONF={q}",
        # slurmrestd unshares its file table and System V IPC namespace before serving, which a container
        # without CAP_SYS_ADMIN may not ("Unable to unshare ...: Operation not permitted"). The pod is its own
        # IPC and mount namespace already. Ref: https://slurm.schedmd.com/slurmrestd.html#OPT_SLURMRESTD_SECURITY
        "export SLURMRESTD_SECURITY=disable_unshare_sysv,disable_unshare_files",
        # Tokens pass through to slurmctld/slurmdbd as auth/jwt, not the cluster's AuthType (without it,
        # auth/munge refuses them: "Rejecting thread config token"). Ref: https://slurm.schedmd.com/jwt.html
        "export SLURM_JWT=daemon",
        _cmd(["/usr/sbin/slurmrestd", "-a", "rest_auth/jwt", f"0.0.0.0:{wk.SLURMRESTD_PORT}"]),
    ]
    return Program("slurmrestd", _script("slurmrestd", body), priority=30, user=wk.SLURMRESTD_USER)


# The PMIx server slurmstepd starts for each `--mpi=pmix` step keeps the job's data in the gds/hash store
# unless the pod's environment names another: gds/shmem2 first builds shared-memory segments for it, which
# cost 25-30 ms of every MPI step's start here (the tasks start after it), to spare each rank a copy that
# is small below thousands of ranks. PMIx tells the ranks which store to read (PMIX_GDS_MODULE).
# Ref: https://docs.openpmix.org/en/latest/ (MCA parameters: PMIX_MCA_<name> in the environment)
PMIX_GDS_DEFAULT = "hash"


def claim_placeholder(controller: str) -> str:
    """The line before slurmd: `slurmpod daemon claim-placeholder`, bounded, whatever it returns. scontrol
    fetches slurm.conf from SLURM_CONF_SERVER, as slurmd has not yet.
    Ref: https://slurm.schedmd.com/configless_slurm.html"""
    argv = ["timeout", str(CLAIM_DEADLINE_SECONDS), "/usr/local/bin/slurmpod", "daemon", "claim-placeholder"]
    return (f"SLURM_CONF_SERVER={shlex.quote(conf_server(controller))} "
            + " ".join(shlex.quote(a) for a in argv) + " || true")


# slurmd's locked-memory limit, which its tasks keep (slurm.conf PropagateResourceLimitsExcept=MEMLOCK), raised
# from the container's soft limit to its hard one; raising the hard limit would need CAP_SYS_RESOURCE.
# Ref: https://slurm.schedmd.com/faq.html#memlock
MEMLOCK_TO_HARD = 'ulimit -S -l "$(ulimit -H -l)"'


def slurmd(auth: str, controller: str, conf: str, extra: str | None = None, directory: bool = False, *,
           claim: bool = False) -> Program:
    """``claim``: claim the pod's placeholder first (a nodeset slurmpod's autoscaler keeps placeholders for;
    elsewhere there is none, and the claim would only delay slurmd)."""
    argv = slurmd_argv(controller, conf, extra)
    gds = f'export PMIX_MCA_gds="${{PMIX_MCA_gds:-{PMIX_GDS_DEFAULT}}}"'
    first = [claim_placeholder(controller)] if claim else []
    body = [*_after_auth(auth), *_after_directory(directory), *first, gds, MEMLOCK_TO_HARD, _cmd(argv)]
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


def sshd(directory: bool = False) -> Program:
    # Host keys are never in an image layer: the login pod installs one from its Secret (start.login_plan);
    # otherwise one is made per pod, ed25519 only, it is fast to generate.
    body = [
        *_after_directory(directory),
        "mkdir -p /run/sshd && chmod 0755 /run/sshd",
        f"[ -s {HOST_KEY} ] || ssh-keygen -q -t ed25519 -N '' -f {HOST_KEY}",
        _cmd(["/usr/sbin/sshd", "-D", "-e"]),
    ]
    return Program("sshd", _script("sshd", body), priority=30)


def health_agent(metrics_port: int) -> Program:
    """The worker's health agent (prolog_epilog/agent), restarted by supervisord whenever it exits; the
    hooks run the checks themselves meanwhile. Before slurmd (priority 15 < 20), so its metrics port is
    bound before any job runs."""
    body = [_cmd(["/usr/local/bin/slurmpod", "daemon", "health-agent", "--metrics-port", str(int(metrics_port))])]
    return Program("health-agent", _script("health-agent", body, prefix=False), priority=15, restart="true")


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
