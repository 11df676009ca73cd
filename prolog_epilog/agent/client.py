"""What the hooks ask the health agent through: connect, one request line, one answer line, all within
one deadline. Any failure (no socket, nothing listening, a refusal, a late or garbled answer) is None:
the hook then runs the checks itself, so a node never goes unchecked. It is logged, never raised.

A thin client in C (for a prolog without Python) speaks the same lines; see protocol.py.
"""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path

from slurmpod.prolog_epilog.agent import protocol
from slurmpod.prolog_epilog.agent.protocol import Answer, Refusal, Request

log = logging.getLogger(__name__)
# Time kept back from the agent's own deadline for the answer to reach us.
TRANSIT_S = 0.1


class Client:
    def __init__(self, path: Path) -> None:
        self.path = path

    def ask(self, request: Request, timeout: float) -> Answer | None:
        """The agent's answer within ``timeout`` seconds, or None (why is logged)."""
        end = time.monotonic() + timeout
        sent = Request(request.context, request.job, request.recheck, max(0.05, timeout - TRANSIT_S))
        try:
            line = self._exchange(protocol.encode_request(sent), end)
            answer = protocol.decode_answer(line)
        except FileNotFoundError:
            log.info("no health agent socket: path=%s", self.path)
            return None
        except ConnectionRefusedError:
            log.info("health agent not listening: path=%s", self.path)
            return None
        except TimeoutError:
            log.warning("health agent did not answer within %.3g s: path=%s", timeout, self.path)
            return None
        except protocol.ProtocolError as exc:
            log.warning("health agent answer not understood: %s", exc)
            return None
        except OSError as exc:
            log.warning("health agent unreachable: path=%s error=%s", self.path, exc)
            return None
        if isinstance(answer, Refusal):
            log.warning("health agent refused: %s", answer.error)
            return None
        return answer

    def _exchange(self, data: bytes, end: float) -> bytes:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(_left(end))
            sock.connect(str(self.path))
            sock.settimeout(_left(end))
            sock.sendall(data)
            buf = bytearray()
            while b"\n" not in buf and len(buf) <= protocol.MAX_ANSWER_BYTES:
                sock.settimeout(_left(end))
                chunk = sock.recv(65536)
                if not chunk:
                    break
                buf += chunk
            return bytes(buf)


def _left(end: float) -> float:
    left = end - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline reached")
    return left
