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

# OpenMPI where the flavor's Slurm has mpi/pmix: the same layer as worker.Dockerfile (see there).
ARG MPI_PACKAGES=
ARG MPI_STUBS=
ARG HWLOC_UNUSED_PLUGINS=
ARG MPI_BUILD_PACKAGES=
COPY install-mpi.sh mpi_hello.c openmpi-mca-params.conf psm2_absent.c psm2_absent.map /tmp/slurmpod-mpi/
RUN sh /tmp/slurmpod-mpi/install-mpi.sh

# Ref: sshd_config(5); drop-ins in sshd_config.d are read by Debian's sshd_config `Include`.
COPY sshd_slurmpod.conf /etc/ssh/sshd_config.d/slurmpod.conf
# A session include that pod start fills with pam_mkhomedir when the site wants homes made on first
# login (entrypoints/start.py); shipped empty. Ref: pam.conf(5), @include
COPY pam-slurmpod-mkhomedir /etc/pam.d/slurmpod-mkhomedir
RUN echo '@include slurmpod-mkhomedir' >> /etc/pam.d/sshd

# slurmpod itself: the last layers, so a Python-only change reuses every layer above.
COPY slurmpod-wheel/ /tmp/slurmpod-wheel/
RUN set -- /usr/share/slurmpod/wheelhouse/pip-*.whl; \
    /opt/slurmpod/bin/python "$1/pip" install --no-cache-dir --disable-pip-version-check \
        --no-index --find-links /usr/share/slurmpod/wheelhouse /tmp/slurmpod-wheel/slurmpod-*.whl; \
    rm -rf /tmp/slurmpod-wheel; \
    ln -sf /opt/slurmpod/bin/slurmpod /usr/local/bin/slurmpod

ENTRYPOINT ["slurmpod", "entrypoint", "login"]
CMD []
