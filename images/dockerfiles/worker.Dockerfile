# slurmpod/worker:<flavor> — slurmd (+ gpu/nvml), sshd, pam_slurm_adopt; no GPU libraries (the host's driver
# libraries are mounted into GPU pods by the NVIDIA container toolkit).
# Built by `slurmpod images build` (ARGs from images/flavors.py).
# Layer order matters: apt layers first, slurmpod last (see base.Dockerfile).
ARG BASE_IMAGE
FROM ${BASE_IMAGE}

SHELL ["/bin/sh", "-eu", "-c"]
ARG DEBIAN_FRONTEND=noninteractive

# CONTRIB_SUITE: the contrib section that has slurm-wlm-nvml-plugin (flavors.py), from the image's own
# mirror (sources.list, or deb822 debian.sources). Only contrib is added, so nothing else changes suite.
# openssh-server's postinst generates host keys: deleted in this same RUN, so no layer holds them
# (the entrypoint runs `ssh-keygen -A` at pod start).
ARG APT_PACKAGES
ARG CONTRIB_SUITE
RUN url=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
          | awk '$1 == "deb" { print $2; exit } $1 == "URIs:" { print $2; exit }'); \
    test -n "$url"; \
    echo "deb $url $CONTRIB_SUITE contrib" > /etc/apt/sources.list.d/slurmpod-contrib.list; \
    apt-get update; \
    apt-get install -y --no-install-recommends $APT_PACKAGES; \
    rm -f /etc/ssh/ssh_host_* /etc/munge/munge.key; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log

# Ref: sshd_config(5); drop-ins in sshd_config.d are read by Debian's sshd_config `Include`.
COPY sshd_slurmpod.conf /etc/ssh/sshd_config.d/slurmpod.conf
# ssh sessions of job owners join their job on this node; users without a job here are refused.
# Ref: https://slurm.schedmd.com/pam_slurm_adopt.html (last in the account stack)
RUN printf '%s\n' 'account required pam_slurm_adopt.so action_no_jobs=deny' >> /etc/pam.d/sshd

# slurmpod itself: the last layers, so a Python-only change reuses every layer above.
COPY slurmpod-wheel/ /tmp/slurmpod-wheel/
RUN set -- /usr/share/slurmpod/wheelhouse/pip-*.whl; \
    /opt/slurmpod/bin/python "$1/pip" install --no-cache-dir --disable-pip-version-check \
        --no-index --find-links /usr/share/slurmpod/wheelhouse /tmp/slurmpod-wheel/slurmpod-*.whl; \
    rm -rf /tmp/slurmpod-wheel; \
    ln -sf /opt/slurmpod/bin/slurmpod /usr/local/bin/slurmpod

ENTRYPOINT ["slurmpod", "entrypoint", "worker"]
CMD []
