"""Logging set-up: key=value text for terminals, JSON lines for pods (SLURMPOD_LOG_FORMAT=json)."""

from __future__ import annotations

import json
import logging
import sys
import time


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
        extra = "".join(f" {k}={v}" for k, v in sorted(ctx.items()))
        line = f"slurmpod {record.levelname.lower()} {record.name}: {record.getMessage()}{extra}"
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
