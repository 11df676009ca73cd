# slurmpod/accounting:<flavor> — slurmdbd, and the MariaDB server it stores into. The chart runs this image
# twice: `slurmpod entrypoint accounting` (slurmdbd) and, in a pod and volume of its own,
# `slurmpod entrypoint db` (mariadbd). One image rather than two: one more image to build, push and pin
# instead of two, from the same apt layers. Built by `slurmpod images build` (ARGs from images/flavors.py).
# Layer order matters: apt layers first, slurmpod last (see base.Dockerfile).
ARG BASE_IMAGE
FROM ${BASE_IMAGE}

SHELL ["/bin/sh", "-eu", "-c"]
ARG DEBIAN_FRONTEND=noninteractive

# mysql with a fixed ID before mariadb-server is installed (the package then keeps it), so the db volume's
# owner is the same in every build. The package's postinst initialises a database in /var/lib/mysql: it is
# emptied in this same RUN, so no layer holds one (the db pod initialises its volume at first start).
ARG MYSQL_UID
ARG APT_PACKAGES
RUN groupadd --system --gid "$MYSQL_UID" mysql; \
    useradd --system --uid "$MYSQL_UID" --gid mysql --home-dir /nonexistent --no-create-home \
        --shell /usr/sbin/nologin --comment "MariaDB Server" mysql; \
    apt-get update; \
    apt-get install -y --no-install-recommends $APT_PACKAGES; \
    rm -rf /var/lib/mysql/*; \
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

ENTRYPOINT ["slurmpod", "entrypoint", "accounting"]
CMD []
