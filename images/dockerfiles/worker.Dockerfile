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

# OpenMPI for `srun --mpi=pmix` where the flavor's Slurm has mpi/pmix (MPI_PACKAGES is empty elsewhere).
# libucx0, which libopenmpi40 needs, depends on AMD's HIP runtime (~210 MB with LLVM) only for UCX's ROCm
# transport, a module UCX dlopen()s: a local package with no files provides MPI_STUBS at the archive's
# own versions, so apt leaves them out (this image serves CPU and NVIDIA pods). MPI_BUILD_PACKAGES compile
# slurmpod-mpi-hello (images/files/mpi_hello.c) and a libpsm2 stand-in with no 100 ms clock measurement at
# load (images/files/psm2_absent.c; Debian's libpsm2 stays, for Omni-Path sites); every package they
# brought leaves in this same RUN (`--auto-remove` would keep perl and binutils, which other packages
# merely suggest).
# Ref: deb-control(5), Provides with a version; https://docs.open-mpi.org/en/v5.0.x/launching-apps/slurm.html
ARG MPI_PACKAGES=
ARG MPI_STUBS=
ARG HWLOC_UNUSED_PLUGINS=
ARG MPI_BUILD_PACKAGES=
COPY install-mpi.sh mpi_hello.c openmpi-mca-params.conf psm2_absent.c psm2_absent.map /tmp/slurmpod-mpi/
RUN sh /tmp/slurmpod-mpi/install-mpi.sh

# What slurm.conf's Prolog=, Epilog= and HealthCheckProgram= name on a worker: a small C client of the
# health agent (falling back to slurmpod's Python hooks), so a job start pays no Python start; and the
# SPANK plugin that sets each task's environment, so a task starts no program, and gives slurmd the pod's
# CPUs. The compiler and Slurm's headers leave in this same RUN.
ARG HOOK_BUILD_PACKAGES
COPY install-hooks.sh slurmpod_hook.c slurmpod_spank.c slurmpod_task_env.c slurmpod_task_env.h slurmpod_cpus.c \
     slurmpod_cpus.h prep_slurmpod.c slurmd_job_env.h slurmpod_agent_ask.c slurmpod_agent_ask.h /tmp/slurmpod-hooks/
RUN sh /tmp/slurmpod-hooks/install-hooks.sh

# Ref: sshd_config(5); drop-ins in sshd_config.d are read by Debian's sshd_config `Include`.
COPY sshd_slurmpod.conf /etc/ssh/sshd_config.d/slurmpod.conf
# A session include that pod start fills with pam_mkhomedir when the site wants homes made on first
# login (entrypoints/start.py); shipped empty. Ref: pam.conf(5), @include
COPY pam-slurmpod-mkhomedir /etc/pam.d/slurmpod-mkhomedir
RUN echo '@include slurmpod-mkhomedir' >> /etc/pam.d/sshd
# ssh sessions of job owners join their job on this node; users without a job here are refused, and so is
# a session that cannot join its job (no extern step without PrologFlags=Contain, i.e. `cgroups: false`) or
# that pam_slurm_adopt cannot decide on: the module's defaults (adopt failure: allow, generic failure:
# ignore) would let it in, uncounted and outliving the job.
# Ref: https://slurm.schedmd.com/pam_slurm_adopt.html (last in the account stack; options)
RUN printf '%s\n' 'account required pam_slurm_adopt.so action_no_jobs=deny action_adopt_failure=deny action_generic_failure=deny' >> /etc/pam.d/sshd

# slurmpod itself: the last layers, so a Python-only change reuses every layer above.
COPY slurmpod-wheel/ /tmp/slurmpod-wheel/
RUN set -- /usr/share/slurmpod/wheelhouse/pip-*.whl; \
    /opt/slurmpod/bin/python "$1/pip" install --no-cache-dir --disable-pip-version-check \
        --no-index --find-links /usr/share/slurmpod/wheelhouse /tmp/slurmpod-wheel/slurmpod-*.whl; \
    rm -rf /tmp/slurmpod-wheel; \
    ln -sf /opt/slurmpod/bin/slurmpod /usr/local/bin/slurmpod

ENTRYPOINT ["slurmpod", "entrypoint", "worker"]
CMD []
