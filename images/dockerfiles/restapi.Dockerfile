# slurmpod/restapi:<flavor> — slurmrestd (JWT auth) and sackd, which fetches the controller's slurm.conf
# (configless) for it. Built by `slurmpod images build` (ARGs from images/flavors.py).
# Layer order matters: apt layers first, slurmpod last (see base.Dockerfile).
ARG BASE_IMAGE
FROM ${BASE_IMAGE}

SHELL ["/bin/sh", "-eu", "-c"]
ARG DEBIAN_FRONTEND=noninteractive

# slurmrestd refuses to run as root or as SlurmUser: it gets a user of its own, with a fixed ID, made
# before the package is installed. Ref: https://slurm.schedmd.com/rest.html
ARG SLURMRESTD_USER
ARG SLURMRESTD_UID
ARG APT_PACKAGES
RUN groupadd --system --gid "$SLURMRESTD_UID" "$SLURMRESTD_USER"; \
    useradd --system --uid "$SLURMRESTD_UID" --gid "$SLURMRESTD_USER" --home-dir /nonexistent \
        --no-create-home --shell /usr/sbin/nologin --comment "Slurm REST daemon" "$SLURMRESTD_USER"; \
    apt-get update; \
    apt-get install -y --no-install-recommends $APT_PACKAGES; \
    rm -f /etc/munge/munge.key; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log

# slurmpod itself: the last layers, so a Python-only change reuses every layer above.
COPY slurmpod-wheel/ /tmp/slurmpod-wheel/
RUN set -- /usr/share/slurmpod/wheelhouse/pip-*.whl; \
    /opt/slurmpod/bin/python "$1/pip" install --no-cache-dir --disable-pip-version-check \
        --no-index --find-links /usr/share/slurmpod/wheelhouse /tmp/slurmpod-wheel/slurmpod-*.whl; \
    rm -rf /tmp/slurmpod-wheel; \
    ln -sf /opt/slurmpod/bin/slurmpod /usr/local/bin/slurmpod

ENTRYPOINT ["slurmpod", "entrypoint", "restapi"]
CMD []
