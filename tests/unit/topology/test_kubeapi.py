"""The read-only API reader against recorded node JSON served on 127.0.0.1 (never another address)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import paths
import pytest
import topokit
from fakes.slurm_client import FakeSlurm

from slurmpod import well_known as wk
from slurmpod.entrypoints import cluster_spec, topology_sync
from slurmpod.errors import BadInput, PermanentError, TransientError
from slurmpod.slurm_version import SlurmVersion
from slurmpod.topology import kube, kubeapi, sync
from slurmpod.topology.model import Format

RECORDED = paths.UNIT / "golden" / "topology" / "slinky" / "nodes.json"
TOKEN = "test-token"  # a fake service-account token


class _Api(http.server.BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, tuple[int, bytes]]] = {}
    seen: ClassVar[list[tuple[str, str, str | None]]] = []

    def do_GET(self) -> None:
        self.seen.append(("GET", self.path, self.headers.get("Authorization")))
        status, body = self.routes.get(self.path, (404, b'{"kind":"Status","code":404}'))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api() -> Iterator[tuple[str, type[_Api]]]:
    handler = type("Api", (_Api,), {"routes": {}, "seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_reads_nodes_and_worker_pods_then_renders(api: tuple[str, type[_Api]]) -> None:
    url, handler = api
    pods = topokit.pod_list([topokit.pod("slurm-worker-0", "worker-0"), topokit.pod("slurm-worker-1", "worker-3")])
    handler.routes["/api/v1/nodes"] = (200, RECORDED.read_bytes())
    handler.routes["/api/v1/namespaces/slurm/pods?labelSelector=slurmpod.io%2Frole%3Dworker"] = (
        200, json.dumps(pods).encode())
    reader = kubeapi.Reader(kubeapi.Settings(url, TOKEN, None, timeout_s=5))
    nodes = kube.parse_nodes(reader.nodes())
    workers = kube.parse_worker_pods(reader.worker_pods("slurm"))
    text, _ = sync.render(nodes, workers, sync.Settings(Format.BLOCK), SlurmVersion(24, 11))
    assert "BlockName=b1 Nodes=slurm-worker-0\nBlockName=b2 Nodes=slurm-worker-1\n" in text
    assert [(m, p.split("?")[0], a) for m, p, a in handler.seen] == [
        ("GET", "/api/v1/nodes", f"Bearer {TOKEN}"), ("GET", "/api/v1/namespaces/slurm/pods", f"Bearer {TOKEN}")]


@pytest.mark.parametrize(("status", "error"), [(503, TransientError), (429, TransientError), (403, PermanentError)],
                         ids=["unavailable", "throttled", "forbidden"])
def test_http_errors_are_typed(api: tuple[str, type[_Api]], status: int, error: type[Exception]) -> None:
    url, handler = api
    handler.routes["/api/v1/nodes"] = (status, b"{}")
    with pytest.raises(error, match=f"HTTP {status}"):
        kubeapi.Reader(kubeapi.Settings(url, TOKEN, None, timeout_s=5)).nodes()


def test_not_json_is_permanent(api: tuple[str, type[_Api]]) -> None:
    url, handler = api
    handler.routes["/api/v1/nodes"] = (200, b"<html>")
    with pytest.raises(PermanentError, match="not JSON"):
        kubeapi.Reader(kubeapi.Settings(url, TOKEN, None, timeout_s=5)).nodes()


@pytest.mark.parametrize("url", ["http://10.0.0.1:443", "http://kubernetes.default.svc", "ftp://127.0.0.1"],
                         ids=["plain-http-remote", "plain-http-name", "other-scheme"])
def test_plain_http_only_on_loopback(url: str) -> None:
    with pytest.raises(BadInput, match="https"):
        kubeapi.Reader(kubeapi.Settings(url, TOKEN, None))


def test_in_cluster_settings(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(TOKEN + "\n")
    env = {wk.ENV_KUBERNETES_SERVICE_HOST: "fd00::1", wk.ENV_KUBERNETES_SERVICE_PORT: "443"}
    settings = kubeapi.in_cluster(env, tmp_path)
    assert settings.base_url == "https://[fd00::1]:443"
    assert (settings.token, settings.ca_file) == (TOKEN, tmp_path / "ca.crt")
    with pytest.raises(BadInput, match=wk.ENV_KUBERNETES_SERVICE_HOST):
        kubeapi.in_cluster({}, tmp_path)
    with pytest.raises(BadInput, match="token"):
        kubeapi.in_cluster(env, tmp_path / "missing")


def test_topology_sync_api_source_reconfigures_once(api: tuple[str, type[_Api]], tmp_path: Path) -> None:
    """The controller's `source: api`: recorded nodes + worker pods from the local API -> the file, once."""
    url, handler = api
    pods = topokit.pod_list([topokit.pod("slurm-worker-0", "worker-0"), topokit.pod("slurm-worker-1", "worker-3")])
    handler.routes["/api/v1/nodes"] = (200, RECORDED.read_bytes())
    handler.routes["/api/v1/namespaces/slurm/pods?labelSelector=slurmpod.io%2Frole%3Dworker"] = (
        200, json.dumps(pods).encode())
    spec = cluster_spec.parse({"topologyPlugin": "tree", "topology": {"source": "api", "provider": "slinky"}})
    tgt = topology_sync.target(spec, SlurmVersion(24, 11))
    assert tgt is not None
    tgt = topology_sync.Target(tmp_path / "topology.conf", tgt.settings, tgt.version)
    source = topology_sync.ApiSource(kubeapi.Reader(kubeapi.Settings(url, TOKEN, None)), "slurm")
    slurm = FakeSlurm()
    assert topology_sync.sync_once(slurm, tgt, source).changed
    assert not topology_sync.sync_once(slurm, tgt, source).changed
    assert len(slurm.called("reconfigure")) == 1
    text = tgt.path.read_text()
    assert "slurm-worker-0" in text and "slurm-worker-1" in text
    assert all(method == "GET" for method, _, _ in handler.seen)
