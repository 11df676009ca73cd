# slurmpod/login:<flavor> — Slurm clients, sackd (where the flavor has it), sshd for users.
# Built by `slurmpod images build` (ARGs from images/flavors.py).
# Layer order matters: apt layers first, slurmpod last (see base.Dockerfile).
ARG BASE_IMAGE
FROM ${BASE_IMAGE}

SHELL ["/bin/sh", "-eu", "-c"]
ARG DEBIAN_FRONTEND=noninteractive

# openssh-server's postinst generates host keys: deleted in this same RUN, so no layer holds them
# (the entrypoint runs `ssh-keygen -A` at pod start).
ARG APT_PACKAGES
RUN apt-get update; \
    apt-get install -y --no-install-recommends $APT_PACKAGES; \
    rm -f /etc/ssh/ssh_host_* /etc/munge/munge.key; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log

# OpenMPI for `srun --mpi=pmix` where the flavor's Slurm has mpi/pmix (MPI_PACKAGES is empty elsewhere).
# libucx0, which libopenmpi40 needs, depends on AMD's HIP runtime (~210 MB with LLVM) only for UCX's ROCm
# transport, a module UCX dlopen()s: a local package with no files provides MPI_STUBS at the archive's
# own versions, so apt leaves them out (this image serves CPU and NVIDIA pods). MPI_BUILD_PACKAGES, when
# set, compile slurmpod-mpi-hello (images/files/mpi_hello.c); every package they brought leaves in this same
# RUN (`--auto-remove` would keep perl and binutils, which other packages merely suggest).
# Ref: deb-control(5), Provides with a version; https://docs.open-mpi.org/en/v5.0.x/launching-apps/slurm.html
ARG MPI_PACKAGES=
ARG MPI_STUBS=
ARG MPI_BUILD_PACKAGES=
COPY mpi_hello.c openmpi-mca-params.conf /tmp/slurmpod-mpi/
RUN if [ -z "$MPI_PACKAGES" ]; then rm -rf /tmp/slurmpod-mpi; exit 0; fi; \
    apt-get update; \
    stub=/tmp/slurmpod-mpi/stub; mkdir -p "$stub/DEBIAN"; provides=; \
    for p in $MPI_STUBS; do \
        v=$(apt-cache show --no-all-versions "$p" | awk '$1 == "Version:" { print $2; exit }'); test -n "$v"; \
        provides="${provides:+$provides, }$p (= $v)"; \
    done; \
    printf '%s\n' 'Package: slurmpod-no-rocm' 'Version: 1' 'Architecture: all' 'Maintainer: slurmpod' \
        "Provides: $provides" 'Description: stands in for ROCm libraries UCX loads only on AMD GPUs' \
        > "$stub/DEBIAN/control"; \
    dpkg-deb --build "$stub" /tmp/slurmpod-mpi/slurmpod-no-rocm.deb >/dev/null; \
    apt-get install -y --no-install-recommends /tmp/slurmpod-mpi/slurmpod-no-rocm.deb $MPI_PACKAGES; \
    install -D -m 0644 /tmp/slurmpod-mpi/openmpi-mca-params.conf /etc/openmpi/openmpi-mca-params.conf; \
    if [ -n "$MPI_BUILD_PACKAGES" ]; then \
        dpkg-query -W -f '${Package}\n' | sort > /tmp/slurmpod-mpi/before; \
        apt-get install -y --no-install-recommends $MPI_BUILD_PACKAGES; \
        mpicc -O2 -o /usr/local/bin/slurmpod-mpi-hello /tmp/slurmpod-mpi/mpi_hello.c; \
        dpkg-query -W -f '${Package}\n' | sort > /tmp/slurmpod-mpi/after; \
        comm -13 /tmp/slurmpod-mpi/before /tmp/slurmpod-mpi/after | xargs apt-get purge -y; \
        test -x /usr/local/bin/slurmpod-mpi-hello; \
    fi; \
    rm -rf /tmp/slurmpod-mpi; \
    rm -f /etc/ssh/ssh_host_* /etc/munge/munge.key; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log

# Ref: sshd_config(5); drop-ins in sshd_config.d are read by Debian's sshd_config `Include`.
COPY sshd_slurmpod.conf /etc/ssh/sshd_config.d/slurmpod.conf

# slurmpod itself: the last layers, so a Python-only change reuses every layer above.
COPY slurmpod-wheel/ /tmp/slurmpod-wheel/
RUN set -- /usr/share/slurmpod/wheelhouse/pip-*.whl; \
    /opt/slurmpod/bin/python "$1/pip" install --no-cache-dir --disable-pip-version-check \
        --no-index --find-links /usr/share/slurmpod/wheelhouse /tmp/slurmpod-wheel/slurmpod-*.whl; \
    rm -rf /tmp/slurmpod-wheel; \
    ln -sf /opt/slurmpod/bin/slurmpod /usr/local/bin/slurmpod

ENTRYPOINT ["slurmpod", "entrypoint", "login"]
CMD []
