#!/usr/bin/env bash
# Make the Docker engine look like a fresh machine's to slurmpod: no emulated pods or networks, no
# slurmpod/* image (rootfs, base and roles) and no build cache. CI runs this before `make demo` so the
# cold path (debootstrap, every apt layer) is what gets tested, never a warm cache.
set -euo pipefail
label=io.slurmpod.cluster
ids=$(docker ps -aq --filter "label=$label")
[ -z "$ids" ] || docker rm -f $ids >/dev/null
nets=$(docker network ls -q --filter "label=$label")
[ -z "$nets" ] || docker network rm $nets >/dev/null
vols=$(docker volume ls -q --filter "label=$label")
[ -z "$vols" ] || docker volume rm $vols >/dev/null
images=$(docker images --format '{{.Repository}}:{{.Tag}}' | grep '^slurmpod/' || true)
[ -z "$images" ] || docker rmi -f $images >/dev/null
docker builder prune -af >/dev/null
echo "forget-images: engine holds no slurmpod image, container or build cache"
