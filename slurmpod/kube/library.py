"""The Kube seam over the maintained Kubernetes client library (kubernetes-client/python).

Reads ask for ``resourceVersion=0``: the API server answers from its watch cache, as informers do,
without a quorum read of etcd on every pass. Ref: https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions
Every request has a (connect, read) timeout; connection failures and 429/5xx answers are retried a
bounded number of times by urllib3, and then surface as TransientError. The library is imported only
here, and only by the controller's daemons: no pod start, prolog or epilog pays for it.
Ref: https://github.com/kubernetes-client/python
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from slurmpod.errors import PermanentError, TransientError
from slurmpod.kube.access import Settings
from slurmpod.kube.seam import Condition, Event, Taint

log = logging.getLogger(__name__)

# Retried: throttled, or the API server briefly unavailable. Ref: https://kubernetes.io/docs/reference/using-api/api-concepts/#response-codes
TRANSIENT_STATUSES = (429, 500, 502, 503, 504)
RETRIES = 2
RETRY_BACKOFF_S = 0.25
CONFLICT = 409  # a precondition (resourceVersion, uid) no longer holds: read again and decide again
GONE = 410  # a watch's resourceVersion is older than the server keeps
MERGE_PATCH = "application/merge-patch+json"
# Conditions merge by `type` under a strategic merge patch: only ours is replaced.
# Ref: https://kubernetes.io/docs/tasks/manage-kubernetes-objects/update-api-object-kubectl-patch/
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
EVENT_MESSAGE_MAX = 1024  # the API server truncates longer Event messages; we cut first


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class LibraryKube:
    """The one real implementation of slurmpod.kube.seam.Kube."""

    def __init__(self, settings: Settings) -> None:
        import urllib3  # noqa: PLC0415 - see the module docstring
        from kubernetes import client  # noqa: PLC0415

        self._settings = settings
        config = client.Configuration()
        config.host = settings.base_url.rstrip("/")
        config.api_key = {"authorization": settings.token}
        config.api_key_prefix = {"authorization": "Bearer"}
        if settings.token_file is not None:
            config.refresh_api_key_hook = self._refresh_token  # type: ignore[assignment]
        if settings.ca_file is not None:
            config.ssl_ca_cert = str(settings.ca_file)
        config.retries = urllib3.Retry(
            total=RETRIES, connect=RETRIES, read=0, status=RETRIES, other=0, backoff_factor=RETRY_BACKOFF_S,
            status_forcelist=TRANSIENT_STATUSES, allowed_methods=None, raise_on_status=False)
        self._client = client
        self._api = client.ApiClient(config)
        self._core = client.CoreV1Api(self._api)
        self._apps = client.AppsV1Api(self._api)
        self._timeout = (settings.connect_timeout_s, settings.read_timeout_s)
        self._nodes_version = ""

    def _refresh_token(self, config: Any) -> None:
        assert self._settings.token_file is not None
        try:
            token = Path(self._settings.token_file).read_text(encoding="utf-8").strip()
        except OSError:
            return  # keep the last token; a rejected one comes back as 401
        if token:
            config.api_key = {"authorization": token}

    @contextlib.contextmanager
    def _mapped(self, what: str) -> Iterator[None]:
        """The library's and urllib3's exceptions as TransientError or PermanentError."""
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415
        from urllib3.exceptions import HTTPError  # noqa: PLC0415

        try:
            yield
        except ApiException as exc:
            status = int(exc.status or 0)
            brief = f"Kubernetes API {what}: HTTP {status} {exc.reason}: {str(exc.body or '')[:200]}"
            if status in TRANSIENT_STATUSES or status in (0, CONFLICT, GONE):
                raise TransientError(brief) from None
            raise PermanentError(brief) from None
        except (HTTPError, OSError, TimeoutError) as exc:
            raise TransientError(f"Kubernetes API {what}: {type(exc).__name__}: {exc}") from None
        except ValueError as exc:  # the library's own validation of what we sent, or a garbled answer
            raise PermanentError(f"Kubernetes API {what}: {type(exc).__name__}: {exc}") from None

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """One request. Its answer stays raw JSON: nothing here needs the library's typed models."""
        kwargs.setdefault("_request_timeout", self._timeout)
        kwargs.setdefault("_preload_content", False)
        with self._mapped(what):
            return fn(*args, **kwargs)

    def _json(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        response = self._call(what, fn, *args, **kwargs)
        try:
            doc = json.loads(response.data)
        except ValueError:
            raise TransientError(f"Kubernetes API {what}: response is not JSON") from None
        if not isinstance(doc, dict):
            raise TransientError(f"Kubernetes API {what}: response is not a JSON object")
        return doc

    def list_nodes(self) -> dict[str, Any]:
        doc = self._json("list nodes", self._core.list_node, resource_version="0")
        self._nodes_version = str((doc.get("metadata") or {}).get("resourceVersion") or "")
        return doc

    def list_pods(self, namespace: str, selector: str) -> dict[str, Any]:
        return self._json(f"list pods {namespace}", self._core.list_namespaced_pod, namespace,
                          label_selector=selector, resource_version="0")

    def wait_for_node_change(self, timeout_s: float) -> bool:
        from kubernetes import watch  # noqa: PLC0415

        if not self._nodes_version:
            return True  # nothing listed yet to watch from: list now
        seconds = max(1, int(timeout_s))
        stream = watch.Watch()  # type: ignore[no-untyped-call]
        try:
            events = stream.stream(  # type: ignore[no-untyped-call]
                self._core.list_node, resource_version=self._nodes_version, timeout_seconds=seconds,
                _request_timeout=(self._settings.connect_timeout_s, seconds + 5.0))
            with self._mapped("watch nodes"):
                for _event in events:
                    return True
        except TransientError as exc:
            if f"HTTP {GONE}" in str(exc):
                return True  # the version is too old to watch from: list again
            raise
        finally:
            stream.stop()  # type: ignore[no-untyped-call]
        return False

    def set_pod_labels(self, namespace: str, name: str, labels: Mapping[str, str]) -> None:
        self._call(f"label pod {namespace}/{name}", self._core.patch_namespaced_pod, name, namespace,
                   {"metadata": {"labels": dict(labels)}}, _content_type=MERGE_PATCH)

    def set_pod_condition(self, namespace: str, name: str, condition: Condition) -> None:
        body = {"status": {"conditions": [{
            "type": condition.type, "status": condition.status, "reason": condition.reason,
            "message": condition.message, "lastTransitionTime": _now()}]}}
        self._call(f"condition pod {namespace}/{name}", self._core.patch_namespaced_pod_status, name, namespace,
                   body, _content_type=STRATEGIC_PATCH)

    def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        options = self._client.V1DeleteOptions.from_dict({"preconditions": {"uid": uid}})
        self._call(f"delete pod {namespace}/{name}", self._core.delete_namespaced_pod, name, namespace,
                   body=options)

    def set_node_taints(self, name: str, taints: Sequence[Taint], resource_version: str) -> None:
        body = {"metadata": {"resourceVersion": resource_version},
                "spec": {"taints": [t.as_json() for t in taints] or None}}
        self._call(f"taint node {name}", self._core.patch_node, name, body, _content_type=MERGE_PATCH)

    def set_node_condition(self, name: str, condition: Condition) -> None:
        now = _now()
        body = {"status": {"conditions": [{
            "type": condition.type, "status": condition.status, "reason": condition.reason,
            "message": condition.message, "lastTransitionTime": now, "lastHeartbeatTime": now}]}}
        self._call(f"condition node {name}", self._core.patch_node_status, name, body,
                   _content_type=STRATEGIC_PATCH)

    def record_event(self, event: Event, source: str) -> None:
        # An Event about a cluster-scoped object (a Node) lives in "default", as the kubelet's do.
        namespace = event.about.namespace or "default"
        now = _now()
        body = self._client.CoreV1Event.from_dict({
            "metadata": {"generateName": f"{event.about.name}.", "namespace": namespace},
            "involvedObject": {k: v for k, v in (("apiVersion", "v1"), ("kind", event.about.kind),
                                                 ("name", event.about.name), ("namespace", event.about.namespace),
                                                 ("uid", event.about.uid)) if v},
            "reason": event.reason, "message": event.message[:EVENT_MESSAGE_MAX], "type": event.type,
            "source": {"component": source}, "reportingComponent": source, "reportingInstance": source,
            "firstTimestamp": now, "lastTimestamp": now, "count": 1})
        self._call(f"event {namespace}/{event.about.name}", self._core.create_namespaced_event, namespace, body)

    def get_scale(self, namespace: str, name: str) -> dict[str, Any]:
        return self._json(f"read scale {namespace}/{name}", self._apps.read_namespaced_stateful_set_scale,
                          name, namespace)

    def set_scale(self, namespace: str, name: str, replicas: int, resource_version: str) -> None:
        if replicas < 0 or not resource_version:
            raise ValueError(f"scale {namespace}/{name}: replicas {replicas} at version {resource_version!r}")
        # The Scale's resourceVersion is the StatefulSet's; set, it is the update's precondition.
        # Ref: https://kubernetes.io/docs/reference/using-api/api-concepts/#conflicts
        body = {"metadata": {"resourceVersion": resource_version}, "spec": {"replicas": replicas}}
        self._call(f"scale {namespace}/{name}", self._apps.patch_namespaced_stateful_set_scale, name, namespace,
                   body, _content_type=MERGE_PATCH)
