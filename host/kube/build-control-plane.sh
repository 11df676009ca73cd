#!/usr/bin/env bash
# Build a Kubernetes 1.20.2 control plane and kubelet from Debian's own archive, once per machine.
#
# bookworm's source package `kubernetes` (1.20.5+really1.20.2-1.1+deb12u1) holds the complete upstream
# tree with vendor/, so the build needs no network beyond Debian's mirror. Binaries land in
# $CACHE/bin; the 2.8 GB source tree is removed afterwards. Idempotent: a finished build is kept and
# reused (the stamp records what was built), so a second CI run on the same machine costs nothing.
#
# Usage: build-control-plane.sh CACHE_DIR
set -euo pipefail
cache=${1:?usage: build-control-plane.sh CACHE_DIR}
version=1.20.5+really1.20.2-1.1+deb12u1
stamp="$cache/bin/.built-$version"
bins=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
step() { echo "control-plane: $*"; SECONDS=0; }
done_step() { echo "control-plane:   done in ${SECONDS}s"; }
export DEBIAN_FRONTEND=noninteractive

# What a running cluster needs besides the binaries, from Debian: etcd, dnsmasq (name resolution for
# pods, fed from the API), the CNI bridge and host-local plugins, conntrack and iptables for kube-proxy.
runtime_pkgs=(etcd-server dnsmasq-base containernetworking-plugins conntrack iptables openssl)
installed=$(dpkg-query -W -f='${Status}\n' "${runtime_pkgs[@]}" 2>/dev/null | grep -c '^install ok installed$' || true)
if [ "$installed" -ne "${#runtime_pkgs[@]}" ]; then
    step "runtime packages (${runtime_pkgs[*]})"
    apt-get install -y -qq --no-install-recommends "${runtime_pkgs[@]}" >/dev/null
    done_step
fi
if [ -f "$stamp" ]; then
    echo "control-plane: cached build in $cache/bin"
    exit 0
fi

step "apt sources and build tools (golang-1.19-go, rsync, dpkg-dev, etcd-server, gcc)"
# The deb-src entry must carry the same Signed-By as the host's deb entry for that mirror, or apt
# refuses both ("Conflicting values set for option Signed-By").
src_list=/etc/apt/sources.list.d/slurmpod-bookworm-src.sources
if [ ! -f "$src_list" ]; then
    signed_by=$(grep -h '^Signed-By:' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 || true)
    printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\n%s\n' \
        "$signed_by" >"$src_list"
    apt-get update -qq
fi
apt-get install -y -qq --no-install-recommends golang-1.19-go rsync dpkg-dev etcd-server gcc libc6-dev >/dev/null
done_step

work="$cache/src"
rm -rf "$work"
mkdir -p "$work"
step "apt-get source kubernetes=$version"
(cd "$work" && apt-get source -qq --download-only "kubernetes=$version" >/dev/null && \
    dpkg-source -x --no-check ./*.dsc tree >/dev/null)
done_step

# This machine's kernel forbids a negative oom_score_adj, and runc then fails every container the
# kubelet asks -998 (sandbox) or -997 (Guaranteed) for. These are compile-time constants in the kubelet;
# raising them to 0 is a shim for test machines, never for a production build.
# Ref: https://kubernetes.io/docs/concepts/scheduling-eviction/node-pressure-eviction/#node-out-of-memory-behavior
sed -i -E 's/^(\s*(KubeletOOMScoreAdj|KubeProxyOOMScoreAdj|guaranteedOOMScoreAdj)\s+int\s*=\s*)-[0-9]+/\10/' \
    "$work/tree/pkg/kubelet/qos/policy.go"
sed -i -E 's/^(\s*defaultSandboxOOMAdj\s+int\s*=\s*)-[0-9]+/\10/' "$work/tree/pkg/kubelet/dockershim/docker_sandbox.go"
if grep -nE '(OOMScoreAdj|SandboxOOMAdj)\s+int\s*=\s*-' "$work/tree/pkg/kubelet/qos/policy.go" \
        "$work/tree/pkg/kubelet/dockershim/docker_sandbox.go"; then
    echo "control-plane: a negative oom_score_adj constant is left (above)" >&2; exit 1
fi

step "go build ${bins[*]} (about 6 min on 2 cores)"
gopath="$work/gopath"
mkdir -p "$gopath/src/k8s.io"
ln -sfn "$work/tree" "$gopath/src/k8s.io/kubernetes"
(cd "$gopath/src/k8s.io/kubernetes" && \
    PATH=/usr/lib/go-1.19/bin:$PATH GOPATH="$gopath" GOCACHE="$work/gocache" GOPROXY=off GOFLAGS=-mod=vendor \
    CGO_ENABLED=0 KUBE_GIT_VERSION=v1.20.2 KUBE_GIT_TREE_STATE=clean \
    make WHAT="$(printf 'cmd/%s ' "${bins[@]}")" >"$work/make.log" 2>&1) || { tail -40 "$work/make.log"; exit 1; }
done_step

step "pause image binary (build/pause/linux/pause.c, static)"
mkdir -p "$cache/bin.new"
for b in "${bins[@]}"; do cp "$work/tree/_output/bin/$b" "$cache/bin.new/$b"; done
gcc -Os -static -DVERSION=v1.20.2 -o "$cache/bin.new/pause" "$work/tree/build/pause/linux/pause.c"
done_step

rm -rf "$cache/bin"
mv "$cache/bin.new" "$cache/bin"
"$cache/bin/kube-apiserver" --version
touch "$stamp"
rm -rf "$work"
echo "control-plane: built into $cache/bin"
