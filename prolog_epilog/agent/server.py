"""The agent's Unix stream socket: who may ask, one line in, one line out, one deadline per request.

- The socket is ``0660 root:slurm`` (bound under a private umask, then chmod/chown) in a directory
  only root writes; the peer's credentials are read from the kernel with SO_PEERCRED and only uid 0
  (slurmd runs the hooks as root), SlurmUser, and the agent's own uid are answered. A refused peer gets
  a refusal line, nothing else. Ref: https://man7.org/linux/man-pages/man7/unix.7.html (SO_PEERCRED)
- Each connection is served on a thread of its own, at most ``max_clients`` at a time (more are closed
  at once), so a slow answer never blocks the accept loop. Reading the request has ``read_timeout``;
  the answer is due by the request's ``deadline_s`` (from its arrival); writing it has what is left.
"""

from __future__ import annotations

import logging
import os
import socket
import stat
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from slurmpod import well_known as wk
from slurmpod.errors import PermanentError
from slurmpod.prolog_epilog.agent import protocol
from slurmpod.prolog_epilog.agent.protocol import Answer, HookAnswer, HookRequest, Refusal, Request
from slurmpod.timing import Clock, Deadline

log = logging.getLogger(__name__)
# struct ucred { pid_t pid; uid_t uid; gid_t gid; } — three 32-bit ints on Linux.
# Ref: https://man7.org/linux/man-pages/man7/unix.7.html (SO_PEERCRED)
UCRED = struct.Struct("3i")
SOCKET_MODE = 0o660
READ_TIMEOUT = 1.0  # seconds for the request line: a client writes it as soon as it has connected
MAX_CLIENTS = 16  # connections served at once; a prolog per job at most, and a healthcheck
WRITE_FLOOR = 0.2  # seconds a late answer still gets to be written (the client has given up by then)
# Default uids answered: root (slurmd runs Prolog/Epilog/HealthCheckProgram as root; Ref:
# https://slurm.schedmd.com/prolog_epilog.html) and SlurmUser.
DEFAULT_ALLOWED_UIDS = frozenset({0, wk.SLURM_UID})

Handler = Callable[[Request | HookRequest, Deadline], Answer | HookAnswer | Refusal]


class PeerRefused(PermanentError):
    """The peer's uid is not one the agent answers."""


@dataclass(frozen=True, slots=True)
class PeerCred:
    pid: int
    uid: int
    gid: int


def peer_cred(conn: socket.socket) -> PeerCred:
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, UCRED.size)
    pid, uid, gid = UCRED.unpack(raw)
    return PeerCred(pid, uid, gid)


def check_peer(cred: PeerCred | tuple[int, int, int], allowed: frozenset[int]) -> PeerCred:
    """``cred`` if its uid may ask, else PeerRefused (naming the uid and pid)."""
    c = cred if isinstance(cred, PeerCred) else PeerCred(*cred)
    if c.uid not in allowed:
        raise PeerRefused(f"peer uid {c.uid} (pid {c.pid}) may not ask the health agent; "
                          f"allowed uids: {','.join(map(str, sorted(allowed)))}")
    return c


def read_line(conn: socket.socket, limit: int, timeout: float) -> bytes:
    """Bytes up to and including the first newline; at most ``limit + 1`` bytes are read, so an
    oversized line is returned as is (longer than ``limit``) for the parser to refuse."""
    conn.settimeout(timeout)
    data = bytearray()
    while b"\n" not in data and len(data) <= limit:
        chunk = conn.recv(min(65536, limit + 1 - len(data)))
        if not chunk:
            break
        data += chunk
    end = data.find(b"\n")
    return bytes(data[: end + 1]) if end >= 0 else bytes(data)


def serve_connection(conn: socket.socket, handler: Handler, allowed: frozenset[int], clock: Clock,
                     *, read_timeout: float = READ_TIMEOUT) -> None:
    """One request on ``conn``: the peer check, the line, the handler under the request's deadline, the
    answer. Never raises for what the peer did; closes nothing (the caller owns ``conn``)."""
    try:
        cred = check_peer(peer_cred(conn), allowed)
    except PeerRefused as exc:
        log.warning("refused: %s", exc)
        _send(conn, protocol.encode_answer(Refusal("peer not allowed")), WRITE_FLOOR)
        return
    arrived = clock.monotonic()
    try:
        request = protocol.decode_request(read_line(conn, protocol.MAX_REQUEST_BYTES, read_timeout))
    except protocol.ProtocolError as exc:
        log.warning("bad request: pid=%d uid=%d error=%s", cred.pid, cred.uid, exc)
        _send(conn, protocol.encode_answer(Refusal(f"bad request: {exc}")), WRITE_FLOOR)
        return
    except OSError as exc:  # timeout or reset before a full line
        log.info("no request: pid=%d error=%s", cred.pid, exc)
        return
    deadline = Deadline(clock, request.deadline_s - (clock.monotonic() - arrived), floor=0.0)
    try:
        answer = handler(request, deadline)
    except Exception as exc:  # a bug in the agent is a refusal: the hook runs the checks itself
        log.exception("handler failed: context=%s", request.context.value)
        answer = Refusal(f"agent error: {type(exc).__name__}: {exc}")
    data = protocol.encode_hook_answer(answer) if isinstance(answer, HookAnswer) else protocol.encode_answer(answer)
    _send(conn, data, max(WRITE_FLOOR, deadline.left()))


def _send(conn: socket.socket, data: bytes, timeout: float) -> None:
    try:
        conn.settimeout(timeout)
        conn.sendall(data)
    except OSError as exc:  # the client gave up (its deadline) or went away
        log.info("answer not delivered: %s", exc)


def bind(path: Path, gid: int | None, mode: int = SOCKET_MODE) -> socket.socket:
    """A listening socket at ``path`` with ``mode``, group ``gid`` (when root). A stale socket left by
    an earlier agent is replaced; any other file there is refused."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise PermanentError(f"{path} exists and is not a socket; not replaced")
        path.unlink()
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # no window in which the socket is open to others
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    if gid is not None and os.geteuid() == 0:
        os.chown(path, 0, gid)
    os.chmod(path, mode)
    sock.listen(MAX_CLIENTS)
    return sock


class Server:
    """Accepts on ``sock`` until ``stop``; each connection on a thread of its own."""

    def __init__(self, sock: socket.socket, handler: Handler, allowed: frozenset[int], clock: Clock,
                 max_clients: int = MAX_CLIENTS) -> None:
        self._sock = sock
        self._handler = handler
        self._allowed = allowed
        self._clock = clock
        self._slots = threading.BoundedSemaphore(max_clients)
        self._stopped = threading.Event()

    def serve_forever(self, poll: float = 0.5) -> None:
        self._sock.settimeout(poll)
        while not self._stopped.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError as exc:
                if self._stopped.is_set():
                    return
                log.warning("accept failed: %s", exc)
                continue
            if not self._slots.acquire(blocking=False):
                log.warning("busy: %d requests in flight; connection closed", MAX_CLIENTS)
                conn.close()
                continue
            threading.Thread(target=self._one, args=(conn,), name="agent-request", daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        try:
            serve_connection(conn, self._handler, self._allowed, self._clock)
        finally:
            conn.close()
            self._slots.release()

    def stop(self) -> None:
        self._stopped.set()
