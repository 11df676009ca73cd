"""The chart's metrics objects: Service <release>-metrics in front of the controller's exporter, the optional
prometheus-operator ServiceMonitor and Grafana dashboard ConfigMap, and per nodeset with autoscaling mode
keda a KEDA ScaledObject.

Core kinds are schema-checked with kubernetes-validate. The two custom resources are checked structurally:
no package on PyPI ships the OpenAPI schemas of monitoring.coreos.com/v1 ServiceMonitor or keda.sh/v1alpha1
ScaledObject (cloudcoil-models-keda and cloudcoil-models-prometheus-operator are pydantic models generated
from the CRDs that ignore unknown fields, so a misspelt field would pass). So every field is checked against
the names the CRDs document, the types they take, and the objects they point at: the ScaledObject's
scaleTargetRef at a rendered StatefulSet, its query at a nodeset that exists and at this release's series,
its HPA behavior against autoscaling/v2's real schema, and the ServiceMonitor at the metrics Service's labels
and port name.
"""

from __future__ import annotations

import json
import re
from typing import Any

import helmkit
import kubernetes_validate
import paths
import pytest
import yaml
from metricnames import DASHBOARD_METRICS

ROOT = paths.REPO
CHART = helmkit.CHART
DASHBOARD = CHART / "dashboards" / "slurmpod.json"
HELM = helmkit.HELM
K8S_VERSIONS = ["1.30.0", kubernetes_validate.utils.latest_version()]
PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090"

# PromQL's functions, operators and aggregation words the dashboard and the queries use; any other bare
# identifier in an expression is a metric name. Ref: https://prometheus.io/docs/prometheus/latest/querying/functions/
PROMQL_WORDS = frozenset({"sum", "max", "by", "rate", "increase", "histogram_quantile", "time", "or", "vector",
                          "label_values"})

# The fields the CRDs document (KEDA 2.x ScaledObject, prometheus-operator v1 ServiceMonitor): an
# unknown one is a typo the API server would prune or refuse.
# Ref: https://keda.sh/docs/latest/reference/scaledobject-spec/
SCALED_OBJECT_SPEC = {"scaleTargetRef", "pollingInterval", "cooldownPeriod", "initialCooldownPeriod",
                      "idleReplicaCount", "minReplicaCount", "maxReplicaCount", "fallback", "advanced", "triggers"}
SCALE_TARGET_REF = {"apiVersion", "kind", "name", "envSourceContainerName"}
ADVANCED = {"restoreToOriginalReplicaCount", "horizontalPodAutoscalerConfig", "scalingModifiers"}
TRIGGER = {"type", "name", "metadata", "authenticationRef", "metricType", "useCachedMetrics"}
# Ref: https://keda.sh/docs/latest/scalers/prometheus/
PROMETHEUS_TRIGGER = {"serverAddress", "query", "queryParameters", "threshold", "activationThreshold", "namespace",
                      "customHeaders", "ignoreNullValues", "unsafeSsl", "timeout", "authModes"}
# Ref: https://prometheus-operator.dev/docs/api-reference/api/#monitoring.coreos.com/v1.ServiceMonitorSpec
SERVICE_MONITOR_SPEC = {"jobLabel", "targetLabels", "podTargetLabels", "endpoints", "selector", "namespaceSelector",
                        "sampleLimit", "targetLimit", "labelLimit", "attachMetadata", "scrapeProtocols"}
ENDPOINT = {"port", "targetPort", "path", "scheme", "params", "interval", "scrapeTimeout", "honorLabels",
            "honorTimestamps", "relabelings", "metricRelabelings", "tlsConfig", "authorization", "followRedirects"}


_helm, _template = helmkit.helm, helmkit.template


def _find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def _of(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


# A nodeset other than workers gets no defaults from values.yaml: every key is set.
NODESET = ["--set=nodesets.{n}.enabled=true", "--set=nodesets.{n}.replicas=0",
           "--set=nodesets.{n}.priorityClass=training", "--set=nodesets.{n}.terminationGracePeriodSeconds=60",
           "--set=nodesets.{n}.slurmd.image.repository=slurmpod/worker", "--set=nodesets.{n}.slurmd.image.tag=24.11",
           "--set=nodesets.{n}.disruptionBudget.enabled=true", "--set=nodesets.{n}.disruptionBudget.maxUnavailable=1",
           "--set=nodesets.{n}.autoscaling.enabled=true", "--set=nodesets.{n}.autoscaling.minReplicas=0",
           "--set=nodesets.{n}.autoscaling.maxReplicas=4", "--set=nodesets.{n}.autoscaling.idleSeconds=300",
           "--set=nodesets.{n}.autoscaling.step=1"]
DEFAULT = _template()
# workers: keda from zero; gpu: keda with a floor of 2; cpu: slurmpod's own autoscaler (no ScaledObject).
FULL = _template(
    "--set=metrics.serviceMonitor.enabled=true", "--set=metrics.serviceMonitor.labels.release=prometheus",
    "--set=metrics.grafanaDashboard.enabled=true", f"--set=metrics.prometheusAddress={PROMETHEUS}",
    "--set=nodesets.workers.autoscaling.enabled=true", "--set=nodesets.workers.autoscaling.mode=keda",
    *[a.format(n="gpu") for a in NODESET], "--set=nodesets.gpu.autoscaling.enabled=true",
    "--set=nodesets.gpu.autoscaling.mode=keda", "--set=nodesets.gpu.autoscaling.minReplicas=2",
    "--set=nodesets.gpu.autoscaling.maxReplicas=16", "--set=nodesets.gpu.autoscaling.idleSeconds=900",
    "--set=nodesets.gpu.autoscaling.step=4",
    *[a.format(n="cpu") for a in NODESET], "--set=nodesets.cpu.autoscaling.enabled=true",
    "--set=nodesets.cpu.autoscaling.mode=slurmpod")


def test_default_values_render_the_metrics_service_and_none_of_the_optional_objects() -> None:
    kinds = {(d["kind"], d["metadata"]["name"]) for d in DEFAULT}
    assert ("Service", "slurmpod-metrics") in kinds
    assert not {k for k, _ in kinds} & {"ServiceMonitor", "ScaledObject"}
    assert ("ConfigMap", "slurmpod-dashboard") not in kinds
    off = {(d["kind"], d["metadata"]["name"]) for d in _template("--set=metrics.enabled=false")}
    assert off == kinds - {("Service", "slurmpod-metrics")}


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("name", ["Service/slurmpod-metrics", "ConfigMap/slurmpod-dashboard",
                                  "NetworkPolicy/slurmpod-controller"])
def test_the_core_objects_validate_strictly(name: str, version: str) -> None:
    kind, _, obj = name.partition("/")
    kubernetes_validate.validate(_find(FULL, kind, obj), version, strict=True)


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


def test_the_metrics_service_reaches_the_controller_pod_only() -> None:
    svc = _find(DEFAULT, "Service", "slurmpod-metrics")
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["ports"] == [{"name": "metrics", "port": 9401, "protocol": "TCP", "targetPort": 9401}]
    pods = [name for name, sts in _of(DEFAULT, "StatefulSet").items()
            if _selects(svc["spec"]["selector"], sts["spec"]["template"]["metadata"]["labels"])]
    assert pods == ["slurmpod-controller"]
    moved = _template("--set=metrics.port=9500", "--set=metrics.service.annotations.example\\.com/team=hpc")
    svc = _find(moved, "Service", "slurmpod-metrics")
    assert svc["spec"]["ports"] == [{"name": "metrics", "port": 9500, "protocol": "TCP", "targetPort": 9500}]
    assert svc["metadata"]["annotations"] == {"example.com/team": "hpc"}


def test_the_service_monitor_scrapes_the_metrics_service_by_its_labels_and_port_name() -> None:
    (monitor,) = _of(FULL, "ServiceMonitor").values()
    assert (monitor["apiVersion"], monitor["metadata"]["namespace"]) == ("monitoring.coreos.com/v1", "slurmpod")
    spec = monitor["spec"]
    assert set(spec) <= SERVICE_MONITOR_SPEC
    services = _of(FULL, "Service")
    selected = [n for n, s in services.items() if _selects(spec["selector"]["matchLabels"], s["metadata"]["labels"])]
    assert selected == ["slurmpod-metrics"]
    assert spec["namespaceSelector"] == {"matchNames": ["slurmpod"]}
    (endpoint,) = spec["endpoints"]
    assert set(endpoint) <= ENDPOINT
    assert endpoint == {"port": "metrics", "path": "/metrics", "scheme": "http", "interval": "30s"}
    assert endpoint["port"] in {p["name"] for p in services["slurmpod-metrics"]["spec"]["ports"]}
    # the labels your Prometheus selects ServiceMonitors by, beside the chart's own (which values cannot change)
    assert monitor["metadata"]["labels"] == {**spec["selector"]["matchLabels"], "release": "prometheus"}
    kept = _template("--set=metrics.serviceMonitor.enabled=true",
                     "--set=metrics.serviceMonitor.labels.app\\.kubernetes\\.io/instance=other")
    assert _find(kept, "ServiceMonitor", "slurmpod-metrics")["metadata"]["labels"][
        "app.kubernetes.io/instance"] == "slurmpod"


def _identifiers(expr: str) -> set[str]:
    """The bare identifiers of a PromQL expression: metric names and function or keyword words."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)  # string literals
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range selectors
    expr = re.sub(r"\bby\s*\([^)]*\)", "", expr)  # grouping labels
    expr = re.sub(r"\$\w+", "", expr)  # Grafana variables
    expr = re.sub(r"(label_values\([^,]*),\s*\w+\s*\)", r"\1)", expr)  # Grafana's label_values(METRIC, LABEL)
    return set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", expr)) - {"e"}


def _metrics(expr: str) -> set[str]:
    words = _identifiers(expr)
    return words - PROMQL_WORDS


@pytest.mark.parametrize(("expr", "metrics"), [
    ('sum by (nodeset) (slurmpod_nodeset_nodes{state=~"a|b"})', {"slurmpod_nodeset_nodes"}),
    ("histogram_quantile(0.99, sum by (le) (rate(x_bucket{a=\"$b\"}[$__rate_interval])))", {"x_bucket"}),
    ("time() - max(y)", {"y"}),
    ('label_values(z{namespace="$namespace"}, service)', {"z"}),
    ("histogram_quantile(0.5, w)", {"w"}),
], ids=["grouped", "quantile", "time", "label-values", "second-argument"])
def test_metric_names_are_read_from_an_expression(expr: str, metrics: set[str]) -> None:
    assert _metrics(expr) == metrics


def _dashboard_exprs(dashboard: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["query"]["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    return exprs


def test_the_dashboard_reads_exactly_the_listed_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert dashboard["uid"] == "slurmpod"
    exprs = _dashboard_exprs(dashboard)
    assert all(_metrics(e) for e in exprs), "an expression without a metric"
    used = set().union(*map(_metrics, exprs))
    assert used == DASHBOARD_METRICS, (used - DASHBOARD_METRICS, DASHBOARD_METRICS - used)
    for panel in dashboard["panels"]:
        assert panel["targets"] and panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"]), panel["title"]
        # this release's series only (the namespace and Service Prometheus labels each target with)
        assert all('namespace="$namespace",service="$service"' in t["expr"] for t in panel["targets"]), panel["title"]
    titles = " | ".join(p["title"] for p in dashboard["panels"]).lower()
    for topic in ("nodes by state", "jobs per partition", "demand vs replicas", "drained nodes by owner",
                  "health drains by check", "policy latency", "failures", "autoscaler decisions"):
        assert topic in titles, topic


def test_the_dashboard_config_map_carries_the_file_for_grafanas_sidecar() -> None:
    cm = _find(FULL, "ConfigMap", "slurmpod-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(cm["data"]["slurmpod.json"]) == json.loads(DASHBOARD.read_text(encoding="utf-8"))


def _spec_nodesets(docs: list[dict[str, Any]]) -> set[str]:
    spec = yaml.safe_load(_find(docs, "ConfigMap", "slurmpod-cluster")["data"]["cluster.yaml"])
    return {n["name"] for n in spec["nodesets"]}


def _selector_labels(query: str, metric: str) -> list[dict[str, str]]:
    out = []
    for body in re.findall(re.escape(metric) + r"\{([^}]*)\}", query):
        out.append(dict(re.findall(r'(\w+)=~?"([^"]*)"', body)))
    return out


def test_keda_nodesets_get_a_scaled_object_on_their_statefulset_and_no_other_does() -> None:
    objects = _of(FULL, "ScaledObject")
    statefulsets = _of(FULL, "StatefulSet")
    assert set(objects) == {"slurmpod-worker", "slurmpod-worker-gpu"}  # cpu: mode slurmpod
    for name, so in objects.items():
        assert so["apiVersion"] == "keda.sh/v1alpha1" and so["metadata"]["namespace"] == "slurmpod"
        spec = so["spec"]
        assert set(spec) <= SCALED_OBJECT_SPEC and set(spec["scaleTargetRef"]) <= SCALE_TARGET_REF
        assert set(spec["advanced"]) <= ADVANCED
        ref = spec["scaleTargetRef"]
        assert (ref["apiVersion"], ref["kind"]) == ("apps/v1", "StatefulSet")
        target = statefulsets[ref["name"]]
        nodeset = target["spec"]["template"]["metadata"]["labels"]["slurmpod.io/nodeset"]
        assert so["metadata"]["labels"]["slurmpod.io/nodeset"] == nodeset
        for key in ("idleReplicaCount", "minReplicaCount", "maxReplicaCount", "cooldownPeriod"):
            assert isinstance(spec.get(key, 0), int), key
        assert spec.get("idleReplicaCount", -1) < spec["minReplicaCount"] <= spec["maxReplicaCount"]
        (trigger,) = spec["triggers"]
        assert set(trigger) <= TRIGGER and trigger["type"] == "prometheus"
        meta = trigger["metadata"]
        assert set(meta) <= PROMETHEUS_TRIGGER
        assert all(isinstance(v, str) for v in meta.values()), meta  # KEDA's metadata is a map of strings
        assert meta["serverAddress"] == PROMETHEUS
        assert (meta["threshold"], meta["activationThreshold"], meta["ignoreNullValues"]) == ("1", "0", "false")
        query = meta["query"]
        assert _metrics(query) == {"slurmpod_nodeset_demand_nodes", "slurmpod_nodeset_nodes"} <= DASHBOARD_METRICS
        selectors = (_selector_labels(query, "slurmpod_nodeset_demand_nodes")
                     + _selector_labels(query, "slurmpod_nodeset_nodes"))
        assert len(selectors) == 2
        for labels in selectors:  # the nodeset it scales, in a nodeset the cluster has, of this release
            assert labels["nodeset"] == nodeset and nodeset in _spec_nodesets(FULL)
            assert (labels["namespace"], labels["service"]) == ("slurmpod", "slurmpod-metrics")
        # The HPA KEDA makes gets this behavior: autoscaling/v2's own schema checks it.
        hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
               "metadata": {"name": f"keda-hpa-{name}", "namespace": "slurmpod"},
               "spec": {"scaleTargetRef": {k: ref[k] for k in ("apiVersion", "kind", "name")},
                        "minReplicas": spec["minReplicaCount"], "maxReplicas": spec["maxReplicaCount"],
                        "behavior": spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]}}
        kubernetes_validate.validate(hpa, K8S_VERSIONS[-1], strict=True)


@pytest.mark.parametrize(("name", "counts", "step"), [
    ("slurmpod-worker", (0, 1, 4, 300), 1),  # minReplicas 0: idle at zero pods
    ("slurmpod-worker-gpu", (None, 2, 16, 900), 4),
], ids=["from-zero", "floor-2"])
def test_the_scaled_object_follows_the_autoscaling_values(name: str, counts: tuple[int | None, int, int, int],
                                                         step: int) -> None:
    """counts: idleReplicaCount, minReplicaCount, maxReplicaCount, cooldownPeriod."""
    spec = _find(FULL, "ScaledObject", name)["spec"]
    assert (spec.get("idleReplicaCount"), spec["minReplicaCount"], spec["maxReplicaCount"],
            spec["cooldownPeriod"]) == counts
    assert spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"] == {"scaleDown": {
        "stabilizationWindowSeconds": counts[3], "policies": [{"type": "Pods", "value": step, "periodSeconds": 60}]}}


def test_the_exporter_port_admits_the_same_scrapers_as_the_health_agents() -> None:
    docs = _template("--set=metrics.port=9500", "--set=networkPolicy.metricsFrom[0].ipBlock.cidr=198.51.100.0/24")
    pols = {d["spec"]["podSelector"]["matchLabels"]["slurmpod.io/role"]: d["spec"] for d in _of(docs, "NetworkPolicy")
            .values()}
    scrapers = [{"ipBlock": {"cidr": "198.51.100.0/24"}}]
    assert {"ports": [{"protocol": "TCP", "port": 9500}], "from": scrapers} in pols["controller"]["ingress"]
    assert {"ports": [{"protocol": "TCP", "port": 9402}], "from": scrapers} in pols["worker"]["ingress"]
    # nothing else opened: the default policy's controller rules plus this one, and no port anywhere else
    default = _of(DEFAULT, "NetworkPolicy")
    assert pols["controller"]["ingress"][:-1] == default["slurmpod-controller"]["spec"]["ingress"][:-1]
    assert pols["controller"]["egress"] == default["slurmpod-controller"]["spec"]["egress"]
    off = _of(_template("--set=metrics.enabled=false"), "NetworkPolicy")["slurmpod-controller"]["spec"]
    assert all(9401 not in [p.get("port") for p in r["ports"]] for r in off["ingress"])
    assert off["ingress"] == default["slurmpod-controller"]["spec"]["ingress"][:-1]


KEDA = ["--set=nodesets.workers.autoscaling.enabled=true", "--set=nodesets.workers.autoscaling.mode=keda"]
WITH_PROMETHEUS = [*KEDA, f"--set=metrics.prometheusAddress={PROMETHEUS}"]


@pytest.mark.parametrize(("args", "message"), [
    (["--set=nodesets.workers.autoscaling.enabled=true", "--set=nodesets.workers.autoscaling.mode=hpa"],
     'nodesets.workers.autoscaling.mode: "hpa": must be slurmpod or keda'),
    (["--set-string=nodesets.workers.autoscaling.enabled=yes"],
     'nodesets.workers.autoscaling.enabled: "yes": must be true or false'),
    ([*WITH_PROMETHEUS, "--set=nodesets.workers.autoscaling.minReplicas=5"],
     "nodesets.workers.autoscaling.minReplicas: 5: must not exceed maxReplicas (4)"),
    ([*WITH_PROMETHEUS, "--set=nodesets.workers.autoscaling.maxReplicas=2.5"],
     'nodesets.workers.autoscaling.maxReplicas: "2.5": must be a whole number'),
    ([*WITH_PROMETHEUS, "--set=nodesets.workers.autoscaling.maxReplicas=0"],
     'nodesets.workers.autoscaling.maxReplicas: "0": must be a whole number >= 1'),
    ([*WITH_PROMETHEUS, "--set=nodesets.workers.autoscaling.minReplicas=-1"],
     'nodesets.workers.autoscaling.minReplicas: "-1": must be a whole number'),
    ([*WITH_PROMETHEUS, "--set=nodesets.workers.autoscaling.step=0"],
     'nodesets.workers.autoscaling.step: "0": must be a whole number >= 1'),
    # keda: idleSeconds is also the HPA's stabilization window (an hour at most); slurmpod's own takes more
    ([*WITH_PROMETHEUS, "--set=nodesets.workers.autoscaling.idleSeconds=7200"],
     "nodesets.workers.autoscaling.idleSeconds: 7200: must be at most 3600 in mode keda"),
    (KEDA, "metrics.prometheusAddress: must be set to the URL of the Prometheus that KEDA queries"),
    ([*KEDA, "--set=metrics.prometheusAddress=prometheus:9090"],
     'metrics.prometheusAddress: "prometheus:9090": must be an http:// or https:// URL'),
    ([*WITH_PROMETHEUS, "--set=metrics.enabled=false"],
     "nodesets.workers.autoscaling.mode: keda needs metrics.enabled: true"),
    (["--set=metrics.serviceMonitor.enabled=true", "--set=metrics.enabled=false"],
     "metrics.serviceMonitor.enabled: true needs metrics.enabled: true"),
    (["--set=metrics.grafanaDashboard.enabled=true", "--set=metrics.enabled=false"],
     "metrics.grafanaDashboard.enabled: true needs metrics.enabled: true"),
    (["--set-string=metrics.enabled=yes"], 'metrics.enabled: "yes": must be true or false'),
    (["--set=metrics.serviceMonitor.enabled=true", "--set=metrics.serviceMonitor.interval=30 seconds"],
     'metrics.serviceMonitor.interval: "30 seconds": must be a Prometheus duration'),
    (["--set=metrics.grafanaDashboard.enabled=true", "--set=metrics.grafanaDashboard.labels.grafana_dashboard=1"],
     'metrics.grafanaDashboard.labels.grafana_dashboard: "1": must be a label value'),
    (["--set=metrics.serviceMonitor.enabled=true", "--set-string=metrics.serviceMonitor.labels.release=a\nb: c"],
     'metrics.serviceMonitor.labels.release: "a\\nb: c": must be a label value'),
    (["--set=metrics.port=70000"], 'metrics.port: "70000": must be a whole number, 1 to 65535'),
], ids=["mode", "enabled", "min-above-max", "fraction", "max-zero", "negative", "step-zero",
        "idle-over-an-hour", "no-prometheus", "no-scheme", "keda-without-exporter", "monitor-without-exporter",
        "dashboard-without-exporter", "metrics-enabled", "interval", "label-not-string", "label-newline", "port"])
def test_bad_values_fail_naming_the_key(args: list[str], message: str) -> None:
    done = _helm("template", "slurmpod", str(CHART), *args)
    assert done.returncode != 0 and message in done.stderr, done.stderr


def test_lint_strict_with_every_metrics_object_on() -> None:
    done = _helm("lint", "--strict", str(CHART), *WITH_PROMETHEUS, "--set=metrics.serviceMonitor.enabled=true",
                 "--set=metrics.grafanaDashboard.enabled=true")
    assert done.returncode == 0, done.stdout + done.stderr


def test_slurmpod_mode_takes_an_idle_time_over_an_hour_and_needs_no_prometheus() -> None:
    docs = _template("--set=nodesets.workers.autoscaling.enabled=true",
                     "--set=nodesets.workers.autoscaling.idleSeconds=7200")
    assert not _of(docs, "ScaledObject")
