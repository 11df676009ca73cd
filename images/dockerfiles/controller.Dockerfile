# slurmpod/controller:<flavor> — slurmctld. Built by `slurmpod images build` (ARGs from images/flavors.py).
# Layer order matters: apt layers first, slurmpod last (see base.Dockerfile).
ARG BASE_IMAGE
FROM ${BASE_IMAGE}

SHELL ["/bin/sh", "-eu", "-c"]
ARG DEBIAN_FRONTEND=noninteractive

ARG APT_PACKAGES
RUN apt-get update; \
    apt-get install -y --no-install-recommends $APT_PACKAGES; \
    rm -f /etc/munge/munge.key; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log

# The PrEp plugin's C sources, compiled with the job_submit plugin below (no Python in them: before the wheel).
COPY prep_slurmpod.c slurmd_job_env.h slurmpod_agent_ask.c slurmpod_agent_ask.h /tmp/slurmpod-prep/

# slurmpod itself: the last layers, so a Python-only change reuses every layer above. With its `kube`
# extra here alone: the Kubernetes API client of the controller's daemons (k8s-sync, topology-sync).
COPY slurmpod-wheel/ /tmp/slurmpod-wheel/
RUN set -- /usr/share/slurmpod/wheelhouse/pip-*.whl; \
    wheel=$(ls /tmp/slurmpod-wheel/slurmpod-*.whl); \
    /opt/slurmpod/bin/python "$1/pip" install --no-cache-dir --disable-pip-version-check \
        --no-index --find-links /usr/share/slurmpod/wheelhouse "$wheel[kube]"; \
    rm -rf /tmp/slurmpod-wheel; \
    ln -sf /opt/slurmpod/bin/slurmpod /usr/local/bin/slurmpod

# job_submit_slurmpod.so (JobSubmitPlugins=slurmpod), compiled here against this image's own Slurm headers:
# slurmctld loads a plugin only when its plugin_version equals SLURM_VERSION_NUMBER, micro included.
# Ref: https://slurm.schedmd.com/job_submit_plugins.html
# Debian's python3 and python3-cffi build it: the embedded interpreter imports _cffi_backend before any
# of our code runs, from its own sys.path (not the venv's), so the backend must be Debian's
# (python3-cffi-backend, kept) and match the cffi that generated the module. The venv's site-packages
# are appended for slurmpod itself and baked into the plugin (--site-dir).
# The compilers and -dev packages leave in this same RUN; libpython3.X (the plugin dlopen()s it) stays.
# The plugin directory is where Debian's slurmctld keeps its own job_submit plugins.
# prep_slurmpod.so (PrEpPlugins=slurmpod) too: slurmctld loads the PrEp plugins slurmd runs the Prolog and
# Epilog with (it asks nothing of it here). Ref: https://slurm.schedmd.com/prep_plugins.html
ARG BUILD_PACKAGES
RUN apt-get update; \
    apt-get install -y --no-install-recommends $BUILD_PACKAGES; \
    libpython="libpython$(/opt/slurmpod/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')"; \
    apt-mark manual "$libpython" python3-cffi-backend >/dev/null; \
    site="$(/opt/slurmpod/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"; \
    plugindir="$(dirname "$(dpkg -L slurm-wlm-basic-plugins | grep '/job_submit_lua.so$')")"; \
    /usr/bin/python3 -c "import sys; sys.path.append('$site'); from slurmpod.slurm_plugins import build_plugin; \
        sys.exit(build_plugin.main())" --out /tmp/slurmpod-plugin --site-dir "$site" >/dev/null; \
    install -m 0644 /tmp/slurmpod-plugin/job_submit_slurmpod.so "$plugindir/job_submit_slurmpod.so"; \
    gcc -O2 -Wall -Wextra -Werror -fPIC -shared -o "$plugindir/prep_slurmpod.so" \
        /tmp/slurmpod-prep/prep_slurmpod.c /tmp/slurmpod-prep/slurmpod_agent_ask.c; \
    rm -rf /tmp/slurmpod-plugin /tmp/slurmpod-prep; \
    apt-get purge -y --auto-remove $BUILD_PACKAGES; \
    rm -f /etc/munge/munge.key; \
    test -e "$plugindir/job_submit_slurmpod.so"; \
    test -e "$plugindir/prep_slurmpod.so"; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log

ENTRYPOINT ["slurmpod", "entrypoint", "controller"]
CMD []
