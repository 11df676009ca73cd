"""Names only the host side uses: the pods-in-Docker emulator's Docker labels and its state directory.

The pod side's names (env, files, labels, annotations, ports) are in slurmpod/well_known.py.
"""

from slurmpod import well_known as wk

# Emulated-cluster bookkeeping: Docker labels `slurmpod cluster up` sets on every object, `down` reads.
# Ref: https://docs.docker.com/engine/manage-resources/labels/
DOCKER_LABEL_CLUSTER = "io.slurmpod.cluster"
DOCKER_LABEL_ROLE = "io.slurmpod.role"
# Roles of pods a site runs beside slurmpod's own (the directory server its SSSD uses), which the
# emulator starts first, before every slurmpod pod, from whatever image they name.
SITE_ROLES = ("directory",)
# Every role the emulator starts, in the order it starts them.
START_ORDER = (*SITE_ROLES, *wk.POD_ROLES)
# Where `slurmpod cluster up` keeps a cluster's host files (munge key, podinfo, termination logs);
# default $XDG_STATE_HOME/slurmpod/clusters (~/.local/state/slurmpod/clusters).
# Ref: https://specifications.freedesktop.org/basedir-spec/latest/
ENV_STATE_DIR = "SLURMPOD_STATE_DIR"
# The chart's login Service and its port, as services.Published.key names them.
LOGIN_SSH = "login/ssh"
# The chart's metrics Service (the controller's exporter, docs/metrics.md) and its port, keyed the same way.
METRICS_HTTP = "metrics/metrics"
