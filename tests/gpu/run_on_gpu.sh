#!/usr/bin/env bash
# Runs every health check for real on a GPU machine (real libnvidia-ml, and libcudart/libnccl when the
# loader finds them) and prints the results with their timings. No arguments; exits 0 whatever the
# checks find (it reports, it does not judge the machine). Nothing is drained: no Slurm is contacted.
#
# Needs: Python >= 3.11 and this checkout with slurmpod installed in a venv: $SLURMPOD_VENV, else the
# checkout's .venv, else a throwaway venv made here (that one needs PyPI).
set -u
repo="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/slurmpod-gpu-XXXXXX")"
trap 'rm -rf "$work"' EXIT

venv="${SLURMPOD_VENV:-$repo/.venv}"
if [ ! -x "$venv/bin/slurmpod" ]; then
    venv="$work/venv"
    python3 -m venv "$venv" >/dev/null
    "$venv/bin/pip" install -q "$repo" 2>&1 | tail -3
fi
slurmpod="$venv/bin/slurmpod"

echo "== machine"
nvidia-smi --query-gpu=index,name,uuid,driver_version,persistence_mode --format=csv 2>/dev/null \
    || echo "(no nvidia-smi)"
for lib in libnvidia-ml.so.1 libcudart.so libcudart.so.12 libcudart.so.13 libnccl.so.2; do
    if ldconfig -p 2>/dev/null | grep -q " $lib "; then echo "found $lib"; else echo "not on the loader path: $lib"; fi
done
# pip wheels (nvidia-cuda-runtime-cu12, nvidia-nccl-cu12) install their libraries under site-packages
for d in $(python3 - <<'PY' 2>/dev/null
import glob, site
for p in site.getsitepackages():
    for lib in glob.glob(p + "/nvidia/*/lib"):
        print(lib)
PY
); do LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"; done
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"

cat > "$work/health.yaml" <<YAML
deadline: {prolog: 60, epilog: 60, periodic: 300, startup: 300}
checks:
  cuda-memory: {contexts: [periodic, startup]}
  nccl-allreduce: {contexts: [periodic, startup]}
YAML

for context in startup prolog epilog periodic; do
    echo "== $context"
    start=$(date +%s.%N)
    SLURMPOD_EXPECTED_GPUS="$(nvidia-smi -L 2>/dev/null | wc -l)" \
        "$slurmpod" check run --context "$context" --config "$work/health.yaml" --state-dir "$work/state" \
        --metrics-dir "$work/metrics" 2>"$work/$context.log"
    rc=$?
    echo "exit $rc; whole process $(python3 -c 'import sys; print(round(float(sys.argv[1]) - float(sys.argv[2]), 3))' \
        "$(date +%s.%N)" "$start") s"
done
echo "== json (periodic)"
"$slurmpod" check run --context periodic --json --config "$work/health.yaml" --state-dir "$work/state" \
    --metrics-dir "$work/metrics" 2>/dev/null
echo "== metrics"
cat "$work"/metrics/*.prom 2>/dev/null | grep -v '^#'
exit 0
