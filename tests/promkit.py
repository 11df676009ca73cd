"""A real Prometheus (Debian's `prometheus` package) for the suites that test what it scrapes and queries.

It listens on loopback only, keeps its data in a temporary directory and scrapes the targets it is
given every SCRAPE_INTERVAL_S, adding the target labels it is given to every series (as a ServiceMonitor's
relabelings add `namespace` and `service`). Queries go through its HTTP API as a dashboard or KEDA's
prometheus scaler would send them. Ref: https://prometheus.io/docs/prometheus/latest/querying/api/
Ref: https://prometheus.io/docs/prometheus/latest/configuration/configuration/#static_config
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from waiting import wait_for

BINARY = "prometheus"
SCRAPE_INTERVAL_S = 2
READY_TIMEOUT_S = 60  # its start on 2 busy cores, TSDB included
QUERY_TIMEOUT_S = 10


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Prometheus:
    def __init__(self, base_url: str, log: Path) -> None:
        self.base_url = base_url
        self.log = log

    def _get(self, path: str, **params: str) -> Any:
        url = f"{self.base_url}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=QUERY_TIMEOUT_S) as response:
            return json.load(response)

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` evaluates to now (each item: metric labels and value)."""
        doc = self._get("/api/v1/query", query=expr)
        if doc.get("status") != "success":
            raise AssertionError(f"Prometheus refused {expr!r}: {doc}")
        return list(doc["data"]["result"])

    def value(self, expr: str) -> float | None:
        """The single value of ``expr`` (a sum, say), or None when it has no sample."""
        result = self.query(expr)
        if not result:
            return None
        if len(result) != 1:
            raise AssertionError(f"{expr!r} gave {len(result)} series, not one: {result}")
        return float(result[0]["value"][1])

    def values(self, exprs: Sequence[str]) -> dict[str, float | None]:
        """Each expression's single value (None: no sample)."""
        return {expr: self.value(expr) for expr in exprs}

    def wait_values(self, what: str, wants: Mapping[str, float], timeout: float) -> float:
        """Wait until every expression of ``wants`` has its value at once; the seconds it took. The bound
        covers two scrape intervals; a miss names every expression that was off, with its last value."""
        last: dict[str, float | None] = {}

        def check() -> bool | None:
            last.update(self.values(list(wants)))
            return True if all(last[e] == w for e, w in wants.items()) else None
        try:
            return wait_for(what, check, timeout + 2 * SCRAPE_INTERVAL_S, poll=0.5)[1]
        except AssertionError as exc:
            off = {e: (last.get(e), w) for e, w in wants.items() if last.get(e) != w}
            raise AssertionError(f"{exc}; (got, wanted): {off}") from None

    def targets(self) -> list[dict[str, Any]]:
        """Every active target as Prometheus reports it (scrapeUrl, health, lastError, labels ...)."""
        return list(self._get("/api/v1/targets")["data"]["activeTargets"])

    def targets_up(self) -> dict[str, str]:
        """scrape URL -> health ("up", "down", "unknown") of every active target."""
        return {t["scrapeUrl"]: t["health"] for t in self.targets()}

    def wait_value(self, what: str, expr: str, want: float, timeout: float) -> float:
        """Wait until ``expr`` is ``want``; the seconds it took. The bound covers two scrape intervals; a
        miss says the last value seen."""
        return self.wait_values(f"{what} ({expr} == {want})", {expr: want}, timeout)


@contextmanager
def running(targets: Sequence[str], job: str = "slurmpod",
            labels: Mapping[str, str] | None = None) -> Iterator[Prometheus]:
    """Prometheus scraping ``targets`` (host:port) under job ``job``, each series carrying ``labels`` too (as a
    ServiceMonitor's namespace and service labels would); stopped and its data removed after."""
    if shutil.which(BINARY) is None:
        raise AssertionError("prometheus is not installed: scripts/bootstrap-host.sh installs Debian's package")
    work = Path(tempfile.mkdtemp(prefix="slurmpod-prometheus-"))
    static: dict[str, Any] = {"targets": list(targets)}
    if labels:
        static["labels"] = dict(labels)
    config = {"global": {"scrape_interval": f"{SCRAPE_INTERVAL_S}s", "scrape_timeout": f"{SCRAPE_INTERVAL_S}s"},
              "scrape_configs": [{"job_name": job, "static_configs": [static]}]}
    (work / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    port = _free_port()
    log = work / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [BINARY, f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"],
            stdout=out, stderr=subprocess.STDOUT)
    prom = Prometheus(f"http://127.0.0.1:{port}", log)
    try:
        def ready() -> bool | None:
            if proc.poll() is not None:
                raise AssertionError(f"prometheus exited {proc.returncode}:\n{log.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(f"{prom.base_url}/-/ready", timeout=2) as r:
                    return True if r.status == 200 else None
            except OSError:
                return None
        wait_for("prometheus ready", ready, READY_TIMEOUT_S)
        yield prom
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)


def wait_targets_up(prom: Prometheus, timeout: float) -> None:
    """Every target scraped successfully at least once (its health "up")."""
    def check() -> bool | None:
        health = prom.targets_up()
        return True if health and all(h == "up" for h in health.values()) else None
    started = time.monotonic()
    try:
        wait_for("every Prometheus target up", check, timeout + 2 * SCRAPE_INTERVAL_S, poll=0.5)
    except AssertionError:
        raise AssertionError(f"targets not up after {time.monotonic() - started:.0f}s: {prom.targets_up()}") from None
