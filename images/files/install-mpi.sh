#!/bin/sh
# The OpenMPI layer of the worker and login images, run by both Dockerfiles with their build args in the
# environment: MPI_PACKAGES (empty: nothing to install), MPI_STUBS, HWLOC_UNUSED_PLUGINS (diverted out of
# hwloc's plugin directory), MPI_BUILD_PACKAGES (they compile
# slurmpod-mpi-hello and the libpsm2 stand-in, then exactly what they brought is purged). Why each step:
# the comment above the RUN in worker.Dockerfile.
set -eu
if [ -z "$MPI_PACKAGES" ]; then rm -rf /tmp/slurmpod-mpi; exit 0; fi
apt-get update
stub=/tmp/slurmpod-mpi/stub; mkdir -p "$stub/DEBIAN"; provides=
for p in $MPI_STUBS; do
    v=$(apt-cache show --no-all-versions "$p" | awk '$1 == "Version:" { print $2; exit }'); test -n "$v"
    provides="${provides:+$provides, }$p (= $v)"
done
printf '%s\n' 'Package: slurmpod-no-rocm' 'Version: 1' 'Architecture: all' 'Maintainer: slurmpod' \
    "Provides: $provides" 'Description: stands in for ROCm libraries UCX loads only on AMD GPUs' \
    > "$stub/DEBIAN/control"
dpkg-deb --build "$stub" /tmp/slurmpod-mpi/slurmpod-no-rocm.deb >/dev/null
apt-get install -y --no-install-recommends /tmp/slurmpod-mpi/slurmpod-no-rocm.deb $MPI_PACKAGES
install -D -m 0644 /tmp/slurmpod-mpi/openmpi-mca-params.conf /etc/openmpi/openmpi-mca-params.conf
for plugin in $HWLOC_UNUSED_PLUGINS; do
    so=$(dpkg -L libhwloc-plugins | grep "/hwloc/hwloc_$plugin\.so$")
    aside="${so%/hwloc/*}/hwloc-unused"
    mkdir -p "$aside"
    dpkg-divert --quiet --package slurmpod --rename --divert "$aside/hwloc_$plugin.so" --add "$so"
done
dpkg-query -W -f '${Package}\n' | sort > /tmp/slurmpod-mpi/before
apt-get install -y --no-install-recommends $MPI_BUILD_PACKAGES
mpicc -O2 -o /usr/local/bin/slurmpod-mpi-hello /tmp/slurmpod-mpi/mpi_hello.c
libdir=/usr/local/lib/$(gcc -print-multiarch)
install -d "$libdir"
gcc -O2 -Wall -Wextra -Werror -shared -fPIC -Wl,-soname,libpsm2.so.2 \
    -Wl,--version-script=/tmp/slurmpod-mpi/psm2_absent.map -o "$libdir/libpsm2.so.2" /tmp/slurmpod-mpi/psm2_absent.c
dpkg-query -W -f '${Package}\n' | sort > /tmp/slurmpod-mpi/after
comm -13 /tmp/slurmpod-mpi/before /tmp/slurmpod-mpi/after | xargs apt-get purge -y
test -x /usr/local/bin/slurmpod-mpi-hello
ldconfig
ldd /usr/local/bin/slurmpod-mpi-hello | grep -q "libpsm2.so.2 => $libdir/libpsm2.so.2"
rm -rf /tmp/slurmpod-mpi
rm -f /etc/ssh/ssh_host_* /etc/munge/munge.key
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log
