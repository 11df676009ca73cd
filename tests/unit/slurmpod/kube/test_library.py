"""The Kube seam's one real implementation (the Kubernetes client library) against a loopback HTTP
server on 127.0.0.1 (never another address) that records each request and answers as the API server
would: the paths, verbs, content types and bodies it sends, and how each failure is typed.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import paths
import pytest
import topokit
from fakes.kube import FakeKube
from fakes.slurm_client import FakeSlurm

from slurmpod import well_known as wk
from slurmpod.entrypoints import cluster_spec, topology_sync
from slurmpod.errors import BadInput, PermanentError, TransientError
from slurmpod.kube import access
from slurmpod.kube.library import LibraryKube
from slurmpod.kube.seam import Condition, Event, ObjectRef, Taint
from slurmpod.slurm_version import SlurmVersion
from slurmpod.topology import kube, sync
from slurmpod.topology.model import Format

RECORDED = paths.UNIT / "golden" / "topology" / "slinky" / "nodes.json"
TOKEN = "test-token"  # a fake service-account token


@dataclass
class Seen:
    method: str
    path: str
    auth: str | None
    content_type: str | None
    body: Any


class _Api(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    routes: ClassVar[dict[tuple[str, str], list[tuple[int, bytes]]]] = {}
    seen: ClassVar[list[Seen]] = []
    delay: ClassVar[dict[str, float]] = {}

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.seen.append(Seen(self.command, self.path, self.headers.get("Authorization"),
                              self.headers.get("Content-Type"), json.loads(raw) if raw else None))
        time.sleep(self.delay.get(self.path.split("?")[0], 0.0))
        answers = self.routes.get((self.command, self.path.split("?")[0]), [])
        status, body = answers.pop(0) if len(answers) > 1 else (answers[0] if answers else (404, b'{"code":404}'))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PATCH = do_POST = do_DELETE = _answer

    def log_message(self, *args: object) -> None:
        pass


@dataclass
class Api:
    url: str
    handler: type[_Api]
    routes: dict[tuple[str, str], list[tuple[int, bytes]]] = field(default_factory=dict)

    def route(self, method: str, path: str, *answers: tuple[int, Any]) -> None:
        self.handler.routes[(method, path)] = [
            (s, b if isinstance(b, bytes) else json.dumps(b).encode()) for s, b in answers]

    @property
    def seen(self) -> list[Seen]:
        return self.handler.seen

    def client(self, **kw: Any) -> LibraryKube:
        return LibraryKube(access.Settings(self.url, TOKEN, None, **kw))


@pytest.fixture
def api() -> Iterator[Api]:
    handler = type("Api", (_Api,), {"routes": {}, "seen": [], "delay": {}})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Api(f"http://127.0.0.1:{server.server_address[1]}", handler)
    finally:
        server.shutdown()
        server.server_close()


def test_lists_ask_the_watch_cache_with_the_token(api: Api) -> None:
    api.route("GET", "/api/v1/nodes", (200, RECORDED.read_bytes()))
    pods = topokit.pod_list([topokit.pod("slurm-worker-0", "worker-0"), topokit.pod("slurm-worker-1", "worker-3")])
    api.route("GET", "/api/v1/namespaces/slurm/pods", (200, pods))
    k = api.client()
    nodes = kube.parse_nodes(k.list_nodes())
    workers = kube.parse_worker_pods(k.list_pods("slurm", "slurmpod.io/role=worker"))
    text, _ = sync.render(nodes, workers, sync.Settings(Format.BLOCK), SlurmVersion(24, 11))
    assert "BlockName=b1 Nodes=slurm-worker-0\nBlockName=b2 Nodes=slurm-worker-1\n" in text
    assert [(s.method, s.path, s.auth) for s in api.seen] == [
        ("GET", "/api/v1/nodes?resourceVersion=0", f"Bearer {TOKEN}"),
        ("GET", "/api/v1/namespaces/slurm/pods?labelSelector=slurmpod.io/role%3Dworker&resourceVersion=0",
         f"Bearer {TOKEN}")]


def test_a_rotated_token_is_read_again(api: Api, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    api.route("GET", "/api/v1/nodes", (200, {"items": []}))
    k = LibraryKube(access.Settings(api.url, "first", None, token_file=token))
    k.list_nodes()
    token.write_text("second\n")
    k.list_nodes()
    assert [s.auth for s in api.seen] == ["Bearer first", "Bearer second"]


@pytest.mark.parametrize(("status", "error", "tries"), [
    (503, TransientError, 3), (429, TransientError, 3), (500, TransientError, 3),
    (403, PermanentError, 1), (404, PermanentError, 1), (409, TransientError, 1)],
    ids=["unavailable", "throttled", "internal", "forbidden", "not-found", "conflict"])
def test_http_errors_are_typed_and_only_transient_ones_retried(api: Api, status: int, error: type[Exception],
                                                               tries: int) -> None:
    api.route("GET", "/api/v1/nodes", (status, {"code": status}))
    with pytest.raises(error, match=f"HTTP {status}"):
        api.client().list_nodes()
    assert len(api.seen) == tries


def test_a_retry_that_succeeds_is_an_answer(api: Api) -> None:
    api.route("GET", "/api/v1/nodes", (503, {}), (200, {"items": [{"metadata": {"name": "n0"}}]}))
    assert api.client().list_nodes()["items"][0]["metadata"]["name"] == "n0"


def test_a_server_that_does_not_answer_in_time_is_transient(api: Api) -> None:
    api.handler.delay["/api/v1/nodes"] = 2.0
    api.route("GET", "/api/v1/nodes", (200, {"items": []}))
    with pytest.raises(TransientError, match="list nodes"):
        api.client(read_timeout_s=0.3).list_nodes()
    assert len(api.seen) == 1, "a read timeout was retried"


def test_a_closed_port_is_transient() -> None:
    with pytest.raises(TransientError, match="list nodes"):
        LibraryKube(access.Settings("http://127.0.0.1:9", TOKEN, None, connect_timeout_s=0.5)).list_nodes()


@pytest.mark.parametrize("body", [b"<html>", b"[1, 2]"], ids=["html", "not-an-object"])
def test_an_answer_that_is_not_a_json_object_is_transient(api: Api, body: bytes) -> None:
    api.route("GET", "/api/v1/nodes", (200, body))
    with pytest.raises(TransientError, match="JSON"):
        api.client().list_nodes()


def test_writes_touch_only_our_fields(api: Api) -> None:
    for method, path in [("PATCH", "/api/v1/namespaces/slurm/pods/w-0"),
                         ("PATCH", "/api/v1/namespaces/slurm/pods/w-0/status"),
                         ("DELETE", "/api/v1/namespaces/slurm/pods/w-0"), ("PATCH", "/api/v1/nodes/n0"),
                         ("PATCH", "/api/v1/nodes/n0/status"), ("POST", "/api/v1/namespaces/default/events"),
                         ("POST", "/api/v1/namespaces/slurm/events")]:
        api.route(method, path, (200, {"kind": "Status", "metadata": {}}))
    k = api.client()
    k.set_pod_labels("slurm", "w-0", {wk.LABEL_SLURM_STATE: "idle"})
    k.set_pod_condition("slurm", "w-0", Condition(wk.CONDITION_SLURM_NODE, "True", "Idle", "IDLE"))
    k.delete_pod("slurm", "w-0", "uid-1")
    k.set_node_taints("n0", [Taint(wk.TAINT_HARDWARE_FAULT, "gpu.xid", "NoSchedule")], "42")
    k.set_node_condition("n0", Condition(wk.CONDITION_HARDWARE_FAULT, "True", "GpuXid", "XID 79"))
    k.record_event(Event(ObjectRef("Node", "n0"), "SlurmpodReplaceNode", "m" * 5000, "Warning"), "src")
    k.record_event(Event(ObjectRef("Pod", "w-0", "slurm", "uid-1"), "SlurmNodeDrained", "drained"), "src")
    label, pcond, delete, taint, ncond, nevent, pevent = api.seen
    assert (label.content_type, label.body) == (
        "application/merge-patch+json", {"metadata": {"labels": {wk.LABEL_SLURM_STATE: "idle"}}})
    assert pcond.content_type == "application/strategic-merge-patch+json"
    (c,) = pcond.body["status"]["conditions"]
    assert (c["type"], c["status"], c["reason"], c["message"]) == (wk.CONDITION_SLURM_NODE, "True", "Idle", "IDLE")
    assert delete.body["preconditions"] == {"uid": "uid-1"}
    assert taint.content_type == "application/merge-patch+json"
    assert taint.body == {"metadata": {"resourceVersion": "42"}, "spec": {"taints": [
        {"key": wk.TAINT_HARDWARE_FAULT, "value": "gpu.xid", "effect": "NoSchedule"}]}}
    assert ncond.path == "/api/v1/nodes/n0/status" and ncond.body["status"]["conditions"][0]["reason"] == "GpuXid"
    assert nevent.path == "/api/v1/namespaces/default/events"  # a Node's Events live in "default"
    assert nevent.body["involvedObject"]["kind"] == "Node" and len(nevent.body["message"]) == 1024
    assert pevent.body["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "name": "w-0",
                                             "namespace": "slurm", "uid": "uid-1"}


SCALE = "/apis/apps/v1/namespaces/slurm/statefulsets/slurm-worker-gpu/scale"


def test_the_scale_is_read_and_written_at_its_resource_version(api: Api) -> None:
    doc = {"kind": "Scale", "apiVersion": "autoscaling/v1",
           "metadata": {"name": "slurm-worker-gpu", "namespace": "slurm", "resourceVersion": "42"},
           "spec": {"replicas": 2}, "status": {"replicas": 2, "selector": "slurmpod.io/nodeset=gpu"}}
    api.route("GET", SCALE, (200, doc))
    api.route("PATCH", SCALE, (200, {**doc, "spec": {}}))
    k = api.client()
    assert k.get_scale("slurm", "slurm-worker-gpu") == doc
    k.set_scale("slurm", "slurm-worker-gpu", 0, "42")
    read, write = api.seen
    assert (read.method, read.path, read.auth) == ("GET", SCALE, f"Bearer {TOKEN}")
    assert (write.method, write.path, write.content_type) == ("PATCH", SCALE, "application/merge-patch+json")
    # zero is sent, not left out; the resourceVersion makes a concurrent change a conflict
    assert write.body == {"metadata": {"resourceVersion": "42"}, "spec": {"replicas": 0}}


@pytest.mark.parametrize(("status", "error"), [(409, TransientError), (404, PermanentError), (403, PermanentError)],
                         ids=["changed-meanwhile", "no-statefulset", "forbidden"])
def test_a_refused_scale_is_typed_and_never_retried(api: Api, status: int, error: type[Exception]) -> None:
    api.route("PATCH", SCALE, (status, {"code": status}))
    with pytest.raises(error, match=f"HTTP {status}"):
        api.client().set_scale("slurm", "slurm-worker-gpu", 3, "42")
    assert len(api.seen) == 1


@pytest.mark.parametrize(("replicas", "version"), [(-1, "42"), (3, "")], ids=["negative", "no-version"])
def test_a_scale_without_a_precondition_or_count_is_never_sent(api: Api, replicas: int, version: str) -> None:
    with pytest.raises(ValueError, match="scale"):
        api.client().set_scale("slurm", "slurm-worker-gpu", replicas, version)
    assert api.seen == []


def test_the_node_watch_wakes_on_a_change_and_times_out_quietly(api: Api) -> None:
    api.route("GET", "/api/v1/nodes", (200, {"metadata": {"resourceVersion": "7"}, "items": []}))
    k = api.client()
    assert k.wait_for_node_change(1) is True  # nothing listed yet: list first
    k.list_nodes()
    event = {"type": "MODIFIED", "object": {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n0"}}}
    api.route("GET", "/api/v1/nodes", (200, json.dumps(event).encode() + b"\n"))
    assert k.wait_for_node_change(1) is True
    assert "watch=true" in api.seen[-1].path and "resourceVersion=7" in api.seen[-1].path
    api.route("GET", "/api/v1/nodes", (200, b""))
    assert k.wait_for_node_change(1) is False
    api.route("GET", "/api/v1/nodes", (503, {}))
    with pytest.raises(TransientError):
        k.wait_for_node_change(1)


@pytest.mark.parametrize("url", ["http://10.0.0.1:443", "http://kubernetes.default.svc", "ftp://127.0.0.1"],
                         ids=["plain-http-remote", "plain-http-name", "other-scheme"])
def test_plain_http_only_on_loopback(url: str) -> None:
    with pytest.raises(BadInput, match="https"):
        access.Settings(url, TOKEN, None)


def test_in_cluster_settings(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(TOKEN + "\n")
    env = {wk.ENV_KUBERNETES_SERVICE_HOST: "fd00::1", wk.ENV_KUBERNETES_SERVICE_PORT: "443"}
    settings = access.in_cluster(env, tmp_path)
    assert settings.base_url == "https://[fd00::1]:443"
    assert (settings.token, settings.ca_file, settings.token_file) == (TOKEN, tmp_path / "ca.crt", tmp_path / "token")
    with pytest.raises(BadInput, match=wk.ENV_KUBERNETES_SERVICE_HOST):
        access.in_cluster({}, tmp_path)
    with pytest.raises(BadInput, match="token"):
        access.in_cluster(env, tmp_path / "missing")


def test_topology_sync_api_source_reconfigures_once(tmp_path: Path) -> None:
    """The controller's `source: api` over the seam: recorded nodes + worker pods -> the file, once."""
    fake = FakeKube()
    fake.nodes = {n["metadata"]["name"]: n for n in json.loads(RECORDED.read_text())["items"]}
    fake.pods = {"slurm-worker-0": topokit.pod("slurm-worker-0", "worker-0"),
                 "slurm-worker-1": topokit.pod("slurm-worker-1", "worker-3")}
    for pod in fake.pods.values():
        pod["metadata"]["namespace"] = "slurm"
    spec = cluster_spec.parse({"topologyPlugin": "tree", "topology": {"source": "api", "provider": "slinky"}})
    tgt = topology_sync.target(spec, SlurmVersion(24, 11))
    assert tgt is not None
    tgt = topology_sync.Target(tmp_path / "topology.conf", tgt.settings, tgt.version)
    source = topology_sync.ApiSource(fake, "slurm")
    slurm = FakeSlurm()
    assert topology_sync.sync_once(slurm, tgt, source).changed
    assert not topology_sync.sync_once(slurm, tgt, source).changed
    assert len(slurm.called("reconfigure")) == 1
    text = tgt.path.read_text()
    assert "slurm-worker-0" in text and "slurm-worker-1" in text
    assert fake.writes == []
