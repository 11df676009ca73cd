"""Logging set-up: key=value text for terminals, JSON lines for pods (SLURMPOD_LOG_FORMAT=json)."""

from __future__ import annotations

import json
import logging
import os
import sys
import time

# Control characters written as escapes in text lines: a value from a job or a node record never
# starts a line of its own. JSON lines escape them already.
_ESCAPES = {c: f"\\x{c:02x}" for c in range(32)} | {ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t", 127: "\\x7f"}


def _clean(value: object) -> str:
    return str(value).translate(_ESCAPES)


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        doc.update(getattr(record, "ctx", {}))
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, sort_keys=True)


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ctx = getattr(record, "ctx", {})
        extra = "".join(f" {_clean(k)}={_clean(v)}" for k, v in sorted(ctx.items()))
        line = f"slurmpod {record.levelname.lower()} {record.name}: {_clean(record.getMessage())}{extra}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def setup(fmt: str = "text", level: int = logging.INFO) -> None:
    """Send slurmpod's logs to stderr in the chosen format (``text`` or ``json``)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter() if fmt == "json" else _TextFormatter())
    root = logging.getLogger("slurmpod")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


def mirror_to(path: str) -> bool:
    """Also send slurmpod's logs to ``path``, in the format ``setup`` chose: a hook that Kubernetes runs
    in the container (preStop) writes to the main process's stderr, so its lines reach `kubectl logs`,
    which keeps a hook's own output only when it fails. False, and nothing added, where it cannot open.
    Ref: https://kubernetes.io/docs/concepts/containers/container-lifecycle-hooks/#debugging-hook-handlers
    """
    root = logging.getLogger("slurmpod")
    if not root.handlers or os.getpid() == 1:
        return False
    try:
        handler = logging.FileHandler(path, mode="a", encoding="utf-8")
    except OSError:
        return False
    handler.setFormatter(root.handlers[0].formatter)
    root.addHandler(handler)
    return True
