# slurmpod/base:<flavor> — Debian + fixed-ID users + common packages + a Python venv with the
# third-party wheels. Built by `slurmpod images build`, which passes every ARG below from
# images/flavors.py and slurmpod/well_known.py.
#
# slurmpod itself is deliberately NOT installed here: role images add it as their last layer, so
# a Python-only change rebuilds one small layer per role and reuses every apt layer (base and role).
#
# Ref: https://docs.docker.com/reference/dockerfile/#understand-how-arg-and-from-interact
ARG ROOTFS_IMAGE
FROM ${ROOTFS_IMAGE}

SHELL ["/bin/sh", "-eu", "-c"]
ARG DEBIAN_FRONTEND=noninteractive

# 1. apt settings. APT_CHECK_VALID_UNTIL=false (flavor option, forky) writes
#    /etc/apt/apt.conf.d/10slurmpod-valid-until: the snapshot mirror's testing Release file has an
#    expired Valid-Until date. Ref: apt.conf(5), Acquire::Check-Valid-Until.
#    APT_MIRROR (only with --mirror) replaces the image's sources. The dpkg filter keeps docs,
#    man pages and translations out of every later layer, copyright files excepted.
#    Ref: dpkg(1), --path-exclude.
ARG APT_CHECK_VALID_UNTIL=true
ARG APT_MIRROR=
ARG SUITE
RUN printf '%s\n' 'APT::Install-Recommends "false";' 'APT::Install-Suggests "false";' \
        > /etc/apt/apt.conf.d/10slurmpod-no-recommends; \
    if [ "$APT_CHECK_VALID_UNTIL" = false ]; then \
        echo 'Acquire::Check-Valid-Until "false";' > /etc/apt/apt.conf.d/10slurmpod-valid-until; \
    fi; \
    if [ -n "$APT_MIRROR" ]; then \
        rm -f /etc/apt/sources.list.d/debian.sources; \
        echo "deb $APT_MIRROR $SUITE main" > /etc/apt/sources.list; \
    fi; \
    printf '%s\n' 'path-exclude=/usr/share/doc/*' 'path-include=/usr/share/doc/*/copyright' \
        'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/info/*' \
        'path-exclude=/usr/share/locale/*' 'path-include=/usr/share/locale/locale.alias' \
        > /etc/dpkg/dpkg.cfg.d/10slurmpod-nodoc

# 2. Users with fixed IDs BEFORE any package: the munge and slurm packages then find their users
#    and keep these IDs, identical in every image, so a shared /home and munge credentials work
#    across pods. The researcher's home is not created: /home is a volume.
ARG SLURM_UID
ARG MUNGE_UID
ARG DEMO_USER
ARG DEMO_UID
RUN groupadd --gid "$SLURM_UID" slurm; \
    useradd --system --uid "$SLURM_UID" --gid slurm --home-dir /nonexistent --no-create-home \
        --shell /usr/sbin/nologin --comment "Slurm workload manager" slurm; \
    groupadd --gid "$MUNGE_UID" munge; \
    useradd --system --uid "$MUNGE_UID" --gid munge --home-dir /nonexistent --no-create-home \
        --shell /usr/sbin/nologin --comment "MUNGE authentication" munge; \
    groupadd --gid "$DEMO_UID" "$DEMO_USER"; \
    useradd --uid "$DEMO_UID" --gid "$DEMO_USER" --home-dir "/home/$DEMO_USER" --no-create-home \
        --shell /bin/bash "$DEMO_USER"

# 3. Packages every role needs. munge's postinst creates /etc/munge/munge.key: it is deleted in
#    this same RUN so no layer ever holds a key (pods install theirs from a Secret).
#    SSSD (users from the site's directory, docs/directory.md) is among them, from SSSD_SUITE. Where
#    that is not SUITE (flavor option, forky: sid), this RUN alone sees that suite's main section, from
#    the image's own mirror, pinned so apt takes from it the binaries of SSSD_SOURCE (Debian's `sssd`
#    source package) where SUITE has none, and nothing else: a dependency SUITE cannot satisfy fails
#    the build instead of pulling more from that suite. Later layers see SUITE only.
#    Ref: apt_preferences(5)
#    SSSD's PAM profiles are turned off again at once and the stacks are checked unchanged: SSSD serves
#    users through NSS only, so sshd's account stack (pam_slurm_adopt last) stays as it was.
#    Ref: pam-auth-update(8)
ARG APT_PACKAGES
ARG SSSD_SUITE
ARG SSSD_SOURCE
RUN cp -a /etc/pam.d /tmp/pam.d.before; \
    if [ "$SSSD_SUITE" != "$SUITE" ]; then \
        url=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
              | awk '$1 == "deb" { print $2; exit } $1 == "URIs:" { print $2; exit }'); \
        test -n "$url"; \
        echo "deb $url $SSSD_SUITE main" > /etc/apt/sources.list.d/slurmpod-sssd.list; \
        printf '%s\n' "Package: src:$SSSD_SOURCE" "Pin: release n=$SSSD_SUITE,c=main" 'Pin-Priority: 100' '' \
            'Package: *' "Pin: release n=$SSSD_SUITE,c=main" 'Pin-Priority: -1' \
            > /etc/apt/preferences.d/slurmpod-sssd; \
    fi; \
    apt-get update; \
    apt-get install -y --no-install-recommends $APT_PACKAGES; \
    for profile in sss pwquality; do \
        [ ! -e "/usr/share/pam-configs/$profile" ] || pam-auth-update --disable "$profile"; \
    done; \
    diff -r -x sssd-shadowutils /tmp/pam.d.before /etc/pam.d; \
    rm -rf /tmp/pam.d.before; \
    rm -f /etc/munge/munge.key /etc/apt/sources.list.d/slurmpod-sssd.list /etc/apt/preferences.d/slurmpod-sssd; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log

# 4. Python venv from Debian's python3 (no python3-venv needed with --without-pip) and the
#    third-party wheels, installed with pip run from its own wheel, offline (--no-index).
#    The wheelhouse stays in the image: role images install slurmpod from it the same way.
#    Ref: https://pip.pypa.io/en/stable/installation/ (running pip from a wheel)
ARG PYTHON_REQUIREMENTS
COPY wheelhouse/ /usr/share/slurmpod/wheelhouse/
RUN python3 -m venv --without-pip /opt/slurmpod; \
    set -- /usr/share/slurmpod/wheelhouse/pip-*.whl; \
    /opt/slurmpod/bin/python "$1/pip" install --no-cache-dir --disable-pip-version-check \
        --no-index --find-links /usr/share/slurmpod/wheelhouse $PYTHON_REQUIREMENTS; \
    ln -s /opt/slurmpod/bin/supervisord /usr/local/bin/supervisord; \
    ln -s /opt/slurmpod/bin/supervisorctl /usr/local/bin/supervisorctl

ENV LANG=C.UTF-8
CMD ["/bin/bash"]
