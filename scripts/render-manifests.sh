#!/usr/bin/env bash
# Regenerate the chart's committed renderings: its values.schema.json from values.yaml
# (host/chart_schema.py), deploy/kubernetes/slurmpod.yaml from the Helm chart with its
# default values, and deploy/kubernetes/accounting/slurmpod.yaml with accounting and REST on. The plain
# manifests (what `make demo`, the emulator and the tests run) are the chart's output, so there is one
# source. tests/unit/deploy/test_helm_chart.py fails when they drift. Needs .tools/bin/helm
# (scripts/bootstrap-host.sh). Usage: scripts/render-manifests.sh [OUT [OUT_ACCOUNTING]]
set -euo pipefail
cd "$(dirname "$0")/.."
# values.schema.json first: Helm checks the values against it before it renders.
.venv/bin/python -P -m slurmpod_host.chart_schema
out=${1:-deploy/kubernetes/slurmpod.yaml}
out_acct=${2:-deploy/kubernetes/accounting/slurmpod.yaml}
{
    echo "# GENERATED from deploy/helm/slurmpod with its default values (release slurmpod, namespace slurmpod)"
    echo "# by scripts/render-manifests.sh (make manifests). Do not edit: change the chart and re-render."
    .tools/bin/helm template slurmpod deploy/helm/slurmpod --namespace slurmpod
} >"$out.tmp"
mv "$out.tmp" "$out"
{
    echo "# GENERATED from deploy/helm/slurmpod with accounting.enabled=true and restapi.enabled=true (release"
    echo "# slurmpod, namespace slurmpod) by scripts/render-manifests.sh (make manifests). Do not edit."
    .tools/bin/helm template slurmpod deploy/helm/slurmpod --namespace slurmpod \
        --set accounting.enabled=true --set restapi.enabled=true
} >"$out_acct.tmp"
mv "$out_acct.tmp" "$out_acct"
