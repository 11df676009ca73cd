"""Every metric name the chart's Grafana dashboard reads (deploy/helm/slurmpod/dashboards/slurmpod.json).

One list for the suites that check it: tests/unit/deploy/test_helm_metrics.py proves the dashboard reads
exactly these names, tests/cluster/test_metrics.py that a real exporter serves each one and a real
Prometheus ingests it.
"""

from __future__ import annotations

# Slurm's own gauges, under the names of slurmctld's OpenMetrics (Slurm 25.11+; the exporter serves them on
# 24.11 too). Ref: https://slurm.schedmd.com/metrics.html (names as in src/plugins/metrics/openmetrics)
SLURM_METRICS = frozenset({
    "slurm_nodes_idle", "slurm_nodes_alloc", "slurm_nodes_mixed", "slurm_nodes_completing",
    "slurm_nodes_draining", "slurm_nodes_drained", "slurm_nodes_down",
    "slurm_partition_jobs_pending", "slurm_partition_jobs_running",
})
# slurmpod's own. slurmpod_policy_call_seconds is read as a histogram (_bucket, _sum, _count),
# slurmpod_exporter_poll_seconds as a gauge (the last poll's duration), the *_total ones as counters.
SLURMPOD_METRICS = frozenset({
    "slurmpod_nodeset_demand_nodes", "slurmpod_nodeset_nodes", "slurmpod_drained_nodes",
    "slurmpod_health_drained_nodes", "slurmpod_policy_calls_total", "slurmpod_policy_failures_total",
    "slurmpod_policy_fast_total", "slurmpod_policy_call_seconds_bucket", "slurmpod_policy_call_seconds_sum",
    "slurmpod_policy_call_seconds_count", "slurmpod_autoscale_decisions_total", "slurmpod_exporter_poll_seconds",
    "slurmpod_exporter_slurm_calls_total", "slurmpod_exporter_last_poll_timestamp_seconds",
})
DASHBOARD_METRICS = SLURM_METRICS | SLURMPOD_METRICS
