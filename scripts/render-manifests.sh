#!/usr/bin/env bash
# Regenerate deploy/kubernetes/slurmpod.yaml from the Helm chart with its default values: the plain
# manifests (what `make demo`, the emulator and the tests run) are the chart's default output, so there
# is one source. tests/unit/test_helm_chart.py fails when the two drift. Needs .tools/bin/helm
# (scripts/bootstrap-host.sh). Usage: scripts/render-manifests.sh [OUT]   (default: the committed file)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-deploy/kubernetes/slurmpod.yaml}
{
    echo "# GENERATED from deploy/helm/slurmpod with its default values (release slurmpod, namespace slurmpod)"
    echo "# by scripts/render-manifests.sh (make manifests). Do not edit: change the chart and re-render."
    .tools/bin/helm template slurmpod deploy/helm/slurmpod --namespace slurmpod
} >"$out.tmp"
mv "$out.tmp" "$out"
