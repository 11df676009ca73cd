"""The agent's socket: only allowed uids are answered (SO_PEERCRED), a bad line gets a refusal, and
the answer is due by the request's deadline."""

from __future__ import annotations

import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from slurmpod.errors import PermanentError
from slurmpod.prolog_epilog.agent import protocol, server
from slurmpod.prolog_epilog.agent.protocol import Answer, Refusal, Request
from slurmpod.prolog_epilog.result import CheckResult, Context, ok
from slurmpod.timing import Deadline, SystemClock

ME = os.geteuid()


def _answers(request: Request, deadline: Deadline) -> Answer | Refusal:
    return Answer(request.context, request.job.job_id, (protocol.Aged(ok("disk", f"{deadline.left():.0f} s left")),))


def _serve(line: bytes, allowed: frozenset[int]) -> bytes:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ours, theirs:
        worker = threading.Thread(target=server.serve_connection, args=(ours, _answers, allowed, SystemClock()))
        worker.start()
        theirs.sendall(line)
        theirs.settimeout(5)
        got = server.read_line(theirs, protocol.MAX_ANSWER_BYTES, 5)
        worker.join(5)
    return got


@pytest.mark.parametrize(("cred", "allowed"), [((1, 0, 0), True), ((1, 64030, 64030), True), ((1, 1000, 1000), False),
                                                ((1, 65534, 0), False)],
                         ids=["root", "slurm", "a-user", "nobody-in-root-group"])
def test_only_root_and_slurm_may_ask(cred: tuple[int, int, int], allowed: bool) -> None:
    if allowed:
        assert server.check_peer(cred, server.DEFAULT_ALLOWED_UIDS).uid == cred[1]
    else:
        with pytest.raises(server.PeerRefused, match=f"peer uid {cred[1]} \\(pid 1\\)"):
            server.check_peer(cred, server.DEFAULT_ALLOWED_UIDS)


def test_the_kernel_names_the_peer() -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        cred = server.peer_cred(a)
    assert (cred.pid, cred.uid, cred.gid) == (os.getpid(), ME, os.getegid())


def test_an_allowed_peer_is_answered() -> None:
    line = protocol.encode_request(Request(Context.PROLOG, deadline_s=7.0))
    answer = protocol.decode_answer(_serve(line, frozenset({ME})))
    assert isinstance(answer, Answer)
    result = answer.verdicts[0].verdict
    assert isinstance(result, CheckResult)
    assert result.reason in {"7 s left", "6 s left"}  # the request's own deadline


def test_a_peer_whose_uid_is_not_allowed_gets_only_a_refusal() -> None:
    line = protocol.encode_request(Request(Context.PROLOG))
    assert protocol.decode_answer(_serve(line, frozenset({ME + 1}))) == Refusal("peer not allowed")


def test_a_bad_request_gets_a_refusal_naming_the_field() -> None:
    answer = protocol.decode_answer(_serve(b'{"v": 1, "context": "nope"}\n', frozenset({ME})))
    assert isinstance(answer, Refusal)
    assert answer.error.startswith("bad request: ")


def test_the_socket_is_0660_and_replaces_only_a_stale_socket(tmp_path: Path) -> None:
    path = tmp_path / "run" / "agent.sock"
    first = server.bind(path, gid=os.getegid())
    first.close()  # an agent that died: its socket file stays
    again = server.bind(path, gid=os.getegid())
    with again:
        assert stat.S_IMODE(path.stat().st_mode) == 0o660
        assert stat.S_ISSOCK(path.stat().st_mode)
    other = tmp_path / "not-a-socket"
    other.write_text("keep me", encoding="utf-8")
    with pytest.raises(PermanentError, match="not a socket"):
        server.bind(other, gid=None)
    assert other.read_text(encoding="utf-8") == "keep me"
