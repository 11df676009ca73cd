"""Every name slurmpod shares with Kubernetes, Slurm or the image: env vars, paths, labels, prefixes.

Each constant says who sets it and where the rule comes from.
"""

from __future__ import annotations

import enum

# --- Downward API environment (set by kubelet from the pod manifests in deploy/) ---
# Ref: https://kubernetes.io/docs/concepts/workloads/pods/downward-api/
ENV_POD_NAME = "POD_NAME"  # fieldRef metadata.name
ENV_POD_NAMESPACE = "POD_NAMESPACE"  # fieldRef metadata.namespace
ENV_POD_UID = "POD_UID"  # fieldRef metadata.uid
ENV_NODE_NAME = "NODE_NAME"  # fieldRef spec.nodeName (the Kubernetes node)
ENV_POD_IP = "POD_IP"  # fieldRef status.podIP
ENV_HOST_IP = "HOST_IP"  # fieldRef status.hostIP
ENV_CPU_LIMIT = "SLURMPOD_CPU_LIMIT"  # resourceFieldRef limits.cpu, divisor 1m (millicores)
ENV_MEMORY_LIMIT = "SLURMPOD_MEMORY_LIMIT"  # resourceFieldRef limits.memory, divisor 1Mi (MiB)
ENV_CPU_REQUEST = "SLURMPOD_CPU_REQUEST"  # resourceFieldRef requests.cpu, divisor 1m
ENV_MEMORY_REQUEST = "SLURMPOD_MEMORY_REQUEST"  # resourceFieldRef requests.memory, divisor 1Mi
ENV_GRACE_SECONDS = "SLURMPOD_GRACE_SECONDS"  # set in the manifest equal to terminationGracePeriodSeconds

# Slinky's slurm-operator sets these on its slurmd pods; accepted so our images run under it.
# Ref: https://github.com/SlinkyProject/slurm-operator (slurmd container env)
ENV_SLINKY_POD_CPUS = "POD_CPUS"  # whole CPUs
ENV_SLINKY_POD_MEMORY = "POD_MEMORY"  # MiB
ENV_SLINKY_TOPOLOGY = "SLINKY_TOPOLOGY"

# --- slurmpod settings (set in the manifests; each CLI option has a SLURMPOD_ twin) ---
ENV_CONTROLLER = "SLURMPOD_CONTROLLER"  # host[:port] of slurmctld, for configless workers and clients
ENV_CLUSTER_NAME = "SLURMPOD_CLUSTER_NAME"
ENV_NODESET = "SLURMPOD_NODESET"  # NodeSet feature for workers; falls back to LABEL_NODESET
ENV_PODINFO_DIR = "SLURMPOD_PODINFO_DIR"
ENV_CLUSTER_SPEC = "SLURMPOD_CLUSTER_SPEC"  # path of the cluster spec YAML (ConfigMap mount)
ENV_RUN_DIR = "SLURMPOD_RUN_DIR"
ENV_LOG_FORMAT = "SLURMPOD_LOG_FORMAT"  # text | json
ENV_TERMINATION_LOG = "SLURMPOD_TERMINATION_LOG"
ENV_SLURM_VERSION = "SLURMPOD_SLURM_VERSION"  # MAJOR.MINOR; overrides the dpkg lookup (tests, other images)
# munge | slurm (AuthType auth/munge or auth/slurm). deploy/ sets it in every pod from the cluster
# ConfigMap's `auth` key (configMapKeyRef); workers and login follow it, the controller checks it
# against cluster.yaml's `auth:`. On the host it is also the twin of `slurmpod cluster up --auth`.
ENV_AUTH = "SLURMPOD_AUTH"
# The pod's role where no `slurmpod.io/role` label is mounted (probes outside deploy/'s manifests).
ENV_POD_ROLE = "SLURMPOD_POD_ROLE"
# Host names of the accounting pods (the chart: $(SLURMPOD_CLUSTER_NAME)-accounting-0 and -db-0): the
# controller's AccountingStorageHost and slurmdbd's StorageHost.
ENV_ACCOUNTING_HOST = "SLURMPOD_ACCOUNTING_HOST"
ENV_DB_HOST = "SLURMPOD_DB_HOST"

# --- Files kubelet mounts ---
# Ref: https://kubernetes.io/docs/tasks/inject-data-application/downward-api-volume-expose-pod-information/
PODINFO_DIR = "/etc/podinfo"
PODINFO_LABELS = "labels"
PODINFO_ANNOTATIONS = "annotations"
# Ref: https://kubernetes.io/docs/tasks/debug/debug-application/determine-reason-pod-failure/
TERMINATION_LOG = "/dev/termination-log"
# The container's main process's stderr, which the container runtime keeps as the pod's log.
POD_LOG_STREAM = "/proc/1/fd/2"
# Secret volumes (deploy/ mounts both key Secrets here, read-only, defaultMode 0400, optional: only the
# key of the cluster's auth type has to be there).
MUNGE_KEY_SECRET = "/run/secrets/slurmpod/munge/munge.key"
SLURM_KEY_SECRET = "/run/secrets/slurmpod/slurm/slurm.key"  # auth/slurm
CLUSTER_SPEC_FILE = "/etc/slurmpod/cluster.yaml"
# Accounting and REST Secrets (chart values secrets.dbPassword / secrets.jwtKey; README, "Secrets you
# create"): mounted read-only, defaultMode 0400, where the roles that use them start.
DB_PASSWORD_SECRET = "/run/secrets/slurmpod/db/password"  # the MariaDB password of StorageUser
JWT_KEY_SECRET = "/run/secrets/slurmpod/jwt/jwt_hs256.key"  # auth/jwt signing key (HS256)

# --- Objects in deploy/kubernetes (names without the chart's `<release>-` prefix), read by `slurmpod cluster up` ---
CONFIG_MAP_CLUSTER = "cluster"  # the cluster spec ConfigMap
CONFIG_MAP_KEY_SPEC = "cluster.yaml"  # mounted at CLUSTER_SPEC_FILE on the controller
CONFIG_MAP_KEY_AUTH = "auth"  # ENV_AUTH of every pod; equal to the spec's `auth:`
SECRET_MUNGE = "munge"  # data key "munge.key", mounted at MUNGE_KEY_SECRET
SECRET_SLURM_KEY = "slurm-key"  # data key "slurm.key", mounted at SLURM_KEY_SECRET
# The login pods' sshd host key, so clients keep trusting a login pod across restarts. Created by the user
# (README, "Secrets you create"), mounted (optional, 0400) at SSH_HOST_KEY_SECRET_DIR on login pods.
SECRET_DB_PASSWORD = "db-password"  # data key "password", mounted at DB_PASSWORD_SECRET (db, accounting)
SECRET_JWT_KEY = "jwt-key"  # data key "jwt_hs256.key", mounted at JWT_KEY_SECRET (controller, accounting)
SECRET_SSH_HOST_KEYS = "ssh-host-keys"
SSH_HOST_KEY_FILE = "ssh_host_ed25519_key"  # data key in that Secret
SSH_HOST_KEY_SECRET_DIR = "/run/secrets/slurmpod/ssh-host-keys"
SSH_HOST_KEY = "/etc/ssh/ssh_host_ed25519_key"  # where sshd reads it (Debian's sshd_config HostKey)
# Users from the site's directory through SSSD (docs/directory.md): the site's sssd.conf, from the Secret
# the chart's `sssd.secretName` names (data key "sssd.conf"), mounted optional and 0400 where SSSD runs;
# the pod installs it at SSSD_CONF (sssd refuses a config that is not root's and 0600). Its LDAPS CA
# bundle, from the ConfigMap `sssd.caConfigMap`, is mounted at SSSD_CA_DIR for sssd.conf to name.
# Ref: sssd.conf(5), FILE FORMAT
SSSD_CONF_SECRET = "/run/secrets/slurmpod/sssd/sssd.conf"
SSSD_CONF = "/etc/sssd/sssd.conf"
SSSD_BINARY = "/usr/sbin/sssd"  # in every slurmpod image (images/flavors.py sssd_suite); pod start checks it
SSSD_CA_DIR = "/etc/slurmpod/ldap-ca"
SSSD_NSS_PIPE = "/var/lib/sss/pipes/nss"  # the nss responder's socket: users resolve once it is there
ENV_SSSD_MKHOMEDIR = "SLURMPOD_SSSD_MKHOMEDIR"  # "true": pam_mkhomedir makes a home on first ssh login
# sshd's PAM stack includes this file (images/files/pam-slurmpod-mkhomedir): empty unless mkhomedir is on.
PAM_MKHOMEDIR = "/etc/pam.d/slurmpod-mkhomedir"
SSHD_SSSD_DROPIN = "/etc/ssh/sshd_config.d/slurmpod-sssd.conf"

# --- Authentication ---
# Ref: https://slurm.schedmd.com/authentication.html
AUTH_MUNGE = "munge"
AUTH_SLURM = "slurm"
AUTH_TYPES = (AUTH_MUNGE, AUTH_SLURM)


class Auth(enum.StrEnum):
    """Slurm's auth plugin, AuthType=auth/<value>. Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_AuthType"""

    MUNGE = AUTH_MUNGE
    SLURM = AUTH_SLURM


# --- Paths inside the images ---
RUN_DIR = "/run/slurmpod"
SUPERVISORD_CONF = "supervisord.conf"
SUPERVISOR_SOCK = "supervisor.sock"  # under RUN_DIR; supervisorctl and the start kick use it
MUNGE_KEY = "/etc/munge/munge.key"
# Ref: https://dun.github.io/munge/ (munged(8): default socket path)
MUNGE_SOCKET = "/run/munge/munge.socket.2"
SLURM_ETC = "/etc/slurm"
SLURM_CONF = "/etc/slurm/slurm.conf"
# Ref: https://slurm.schedmd.com/authentication.html#slurm (owned by SlurmUser, mode 0600 or stricter)
SLURM_KEY = "/etc/slurm/slurm.key"
STATE_SAVE_LOCATION = "/var/spool/slurmctld"  # a PVC in deploy/, survives controller restarts
# Runtime directories holding the SACK sockets (auth/slurm) that client commands connect to: sackd's
# (also its configless cache) and slurmctld's. Ref: https://slurm.schedmd.com/authentication.html#sack
SLURM_RUN_DIR = "/run/slurm"
SLURMCTLD_RUN_DIR = "/run/slurmctld"
SLURMD_SPOOL = "/var/spool/slurmd"
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_SlurmctldPort
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
# Ref: https://slurm.schedmd.com/slurmdbd.conf.html#OPT_DbdPort
SLURMDBD_PORT = 6819
# slurmrestd's listening port in the chart (its Service); Slinky's chart uses the same.
SLURMRESTD_PORT = 6820
MARIADB_PORT = 3306
# Accounting: where slurmdbd and MariaDB keep things, and who they run as.
SLURMDBD_CONF = "/etc/slurm/slurmdbd.conf"  # owned by SlurmUser, mode 0600 (it holds StoragePass)
SLURMDBD_RUN_DIR = "/run/slurmdbd"  # PidFile's directory, owned by SlurmUser
JWT_KEY = "/etc/slurm/jwt_hs256.key"  # owned by SlurmUser, 0400. Ref: https://slurm.schedmd.com/jwt.html
MARIADB_DATA_DIR = "/var/lib/mysql"  # the db pod's PVC
MARIADB_RUN_DIR = "/run/mysqld"
DB_INIT_FILE = "/run/slurmpod/db/init.sql"  # mariadbd --init-file: the slurm user and its database
DB_USER = "slurm"  # StorageUser
DB_NAME = "slurm_acct_db"  # StorageLoc (Slurm's default)

# --- Users with fixed IDs, the same in every image (created before packages are installed) ---
SLURM_UID = 64030
MUNGE_UID = 64031
DEMO_USER = "researcher"
DEMO_UID = 2000
# MariaDB's server user (made before mariadb-server is installed, so the db volume's owner is stable) and
# slurmrestd's own user: slurmrestd refuses root and SlurmUser. Ref: https://slurm.schedmd.com/rest.html
MYSQL_UID = 64032
SLURMRESTD_USER = "slurmrestd"
SLURMRESTD_UID = 64033

# --- Kubernetes labels and annotations ---
LABEL_PREFIX = "slurmpod.io/"
LABEL_ROLE = "slurmpod.io/role"  # set by deploy/ on every pod
LABEL_NODESET = "slurmpod.io/nodeset"  # set by deploy/ on worker pods; becomes a Slurm Feature
ANNOTATION_FEATURES = "slurmpod.io/features"  # set by users: comma-separated extra Slurm Features
ANNOTATION_WEIGHT = "slurmpod.io/weight"  # set by users: Slurm node Weight
LABEL_TOPOLOGY = "slurmpod.io/topology"  # generic placement path, e.g. "block1/host3"
# Set on every pod by the Helm chart (deploy/helm/slurmpod) and by `slurmpod cluster up`;
# SLURMPOD_CLUSTER_NAME comes from it through a fieldRef.
# Ref: https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/
LABEL_INSTANCE = "app.kubernetes.io/instance"

# --- Slurm node reasons ---
# Drains slurmpod sets carry this prefix; it only ever clears reasons that start with it.
REASON_PREFIX = "slurmpod: "
REASON_POD_TERMINATING = REASON_PREFIX + "pod terminating"
# Reasons slurmpod sets for pod lifecycle: a new pod of the same name may clear them; no other reason.
LIFECYCLE_REASONS = (REASON_POD_TERMINATING,)
# Set by the autoscaler (`slurmpod daemon autoscale`) on the nodes it means to remove, highest ordinals
# first; lifted only by the autoscaler, when demand returns. Ref: https://slurm.schedmd.com/scontrol.html#OPT_Reason
REASON_AUTOSCALE_SCALE_IN = REASON_PREFIX + "autoscale: scale-in"

ROLES = ("controller", "worker", "login")
# Roles of the accounting and REST workloads, on only where the chart's values enable them.
# `db` (MariaDB) runs the accounting image with another entrypoint role: one image carries slurmdbd and
# the server it talks to, so there is one more image to build, push and pin, not two.
OPTIONAL_ROLES = ("db", "accounting", "restapi")
# The roles `slurmpod entrypoint` takes and pods carry, in the order pods start in the emulator: the
# database before slurmdbd, slurmdbd before slurmctld (a first slurmctld start without slurmdbd has no
# TRES and exits), workers and clients last.
POD_ROLES = ("db", "accounting", "controller", "worker", "login", "restapi")
# Roles with an image of their own (slurmpod images build).
IMAGE_ROLES = ("controller", "worker", "login", "accounting", "restapi")

# --- Container images (built by `slurmpod images build`, read by deploy/ and the cluster emulator) ---
IMAGE_REPOSITORY_PREFIX = "slurmpod/"  # slurmpod/base, slurmpod/controller, slurmpod/worker, slurmpod/login
VENV_DIR = "/opt/slurmpod"  # Python venv holding slurmpod and its wheels in every image
# supervisor's client, from the venv (only supervisord is linked into /usr/local/bin).
SUPERVISORCTL = f"{VENV_DIR}/bin/supervisorctl"
# Image labels. Ref: https://github.com/opencontainers/image-spec/blob/main/annotations.md
IMAGE_LABEL_SLURM_VERSION = "io.slurmpod.slurm-version"  # upstream Slurm version installed, e.g. 24.11.5
IMAGE_LABEL_FLAVOR = "io.slurmpod.flavor"  # 24.11 | 26.05

# --- Topology (slurmpod.topology): node labels and annotations read, the API it reads them from ---
# Set by GKE on nodes in dense-placement node pools (outermost first: block, sub-block, physical host).
# Ref: https://cloud.google.com/kubernetes-engine/docs/how-to/gpu-topology (topology labels)
LABEL_GKE_BLOCK = "cloud.google.com/gce-topology-block"
LABEL_GKE_SUBBLOCK = "cloud.google.com/gce-topology-subblock"
LABEL_GKE_HOST = "cloud.google.com/gce-topology-host"
# Set by EKS on instances that expose network topology: layer 1 is farthest from the instance.
# Ref: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/how-ec2-instance-topology-works.html
LABEL_EKS_LAYER_PREFIX = "topology.k8s.aws/network-node-layer-"  # + 1..4
# Set by CoreWeave CKS on nodes attached to an InfiniBand or RoCE backend fabric.
# Ref: https://docs.coreweave.com/products/networking/hpc-interconnect/infiniband-roce-labels
LABEL_COREWEAVE_FABRIC = "backend.coreweave.cloud/fabric"
LABEL_COREWEAVE_LEAFGROUP = "backend.coreweave.cloud/leafgroup"
# Set by NVIDIA Topograph (Kubernetes engine); accelerator = NVLink domain, only where there is one.
# Ref: https://github.com/NVIDIA/topograph/blob/main/docs/k8s.md
LABEL_TOPOGRAPH_DATACENTER = "network.topology.nvidia.com/datacenter"
LABEL_TOPOGRAPH_SPINE = "network.topology.nvidia.com/spine"
LABEL_TOPOGRAPH_BLOCK = "network.topology.nvidia.com/block"
LABEL_TOPOGRAPH_ACCELERATOR = "network.topology.nvidia.com/accelerator"
# Set by Nebius AI Cloud on GPU nodes; tier-0 (multi-node NVLink) only where there is one.
# Ref: https://docs.nebius.com/kubernetes/gpu/topology-aware-scheduling
LABEL_NEBIUS_CLUSTER = "topology.nebius.com/gpu-cluster-id"
LABEL_NEBIUS_TIER_PREFIX = "topology.nebius.com/tier-"  # + 0..2
# Set by admins on nodes, copied to worker pods by Slinky's pod-binding webhook: "topo:unit[,topo:unit]".
# Ref: https://github.com/SlinkyProject/slurm-operator/blob/main/docs/usage/topology.md
ANNOTATION_SLINKY_TOPOLOGY = "topology.slinky.slurm.net/spec"
# Node annotations that give a cordon its reason (ours, then Slinky slurm-operator's).
ANNOTATION_CORDON_REASON = "slurmpod.io/cordon-reason"
ANNOTATION_SLINKY_CORDON_REASON = "nodeset.slinky.slurm.net/node-cordon-reason"
# What k8s-sync writes: the worker pod's Slurm state (label and condition), and on a node to be
# repaired a taint and a condition naming the health check.
LABEL_SLURM_STATE = "slurmpod.io/slurm-state"
CONDITION_SLURM_NODE = "slurmpod.io/SlurmNode"
TAINT_HARDWARE_FAULT = "slurmpod.io/hardware-fault"
CONDITION_HARDWARE_FAULT = "SlurmpodHardwareFault"
# The autoscaler's decisions, counted per nodeset and action (scale_out, drain, undrain, scale_in) as
# {"decisions": {"<nodeset>": {"<action>": n}}}; written (replaced atomically) by `slurmpod daemon
# autoscale` after every pass, read by the exporter beside it in the controller pod.
AUTOSCALE_COUNTERS_FILE = f"{RUN_DIR}/autoscale/counters.json"
# The in-cluster API: env set by kubelet in every pod; files mounted from the pod's service account.
# Ref: https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/#without-using-a-proxy
ENV_KUBERNETES_SERVICE_HOST = "KUBERNETES_SERVICE_HOST"
ENV_KUBERNETES_SERVICE_PORT = "KUBERNETES_SERVICE_PORT"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"  # token, ca.crt, namespace

# --- job_submit policy and plugin (slurmpod.policy, slurmpod.slurm_plugins) ---
# The policy YAML slurmctld's job_submit/slurmpod plugin reads: the chart's `policy` ConfigMap (ConfigMap
# `policy`) mounted on the controller; SLURMPOD_POLICY (set in the controller's env) overrides the path.
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_JobSubmitPlugins
ENV_POLICY = "SLURMPOD_POLICY"
# Not under /etc/slurmpod: that is the read-only cluster-spec mount, and the runtime cannot create a
# mount point inside a read-only volume.
POLICY_FILE = "/etc/slurmpod-policy/policy.yaml"
# Where the plugin's C shim writes its per-call timing histogram (JSON, replaced atomically) for the bench;
# SLURMPOD_PLUGIN_STATS (slurmctld's env) overrides it. Its own directory, owned by SlurmUser (the
# controller's entrypoint makes it): slurmctld writes there, and RUN_DIR itself stays root's.
ENV_PLUGIN_STATS = "SLURMPOD_PLUGIN_STATS"
PLUGIN_STATS_DIR = "/run/slurmpod/job_submit"
PLUGIN_STATS_FILE = f"{PLUGIN_STATS_DIR}/stats.json"
# Set by users in `sbatch --comment`: skip topology placement, honoured only for who the policy's
# topology.optOut lists (anyone else is rejected, so the comment never silently does nothing).
POLICY_OPT_OUT_TOKEN = "slurmpod:no-topology"
# The plugin: JobSubmitPlugins=slurmpod loads <PluginDir>/job_submit_slurmpod.so.
PLUGIN_TYPE = "job_submit/slurmpod"
PLUGIN_FILE = "job_submit_slurmpod.so"
# --- Node health (prolog_epilog): what Slurm gives the hooks, what slurmpod reads and writes ---
# Set by slurmd in the Prolog/Epilog environment. Ref: https://slurm.schedmd.com/prolog_epilog.html
ENV_SLURM_JOB_ID = "SLURM_JOB_ID"
ENV_SLURM_JOB_UID = "SLURM_JOB_UID"  # the job's owner
ENV_SLURM_JOB_GPUS = "SLURM_JOB_GPUS"  # the job's GPU indices on this node
ENV_CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
# From the job credential (src/slurmd/slurmd/req.c builds the prolog environment): the job's
# --comment and --extra, where a job may carry HEALTH_SKIP_TAG.
ENV_SLURM_JOB_COMMENT = "SLURM_JOB_COMMENT"
ENV_SLURM_JOB_EXTRA = "SLURM_JOB_EXTRA"
ENV_SLURMD_NODENAME = "SLURMD_NODENAME"  # set by slurmd for Prolog/Epilog: this node's Slurm name
# Set to JOB_FIELDS_LOOKUP where a hook runs for slurmpod's PrEp plugin (images/files/prep_slurmpod.c):
# the job credential's fields (SLURM_JOB_COMMENT, SLURM_JOB_EXTRA) are not in its environment, and the
# hook looks them up when a check the job may skip has failed. Ref: https://slurm.schedmd.com/prep_plugins.html
ENV_JOB_FIELDS = "SLURMPOD_JOB_FIELDS"
JOB_FIELDS_LOOKUP = "lookup"
# Set by users in a job's --comment/--extra: "slurmpod:skip=nvlink,xid" skips those skippable checks.
HEALTH_SKIP_TAG = "slurmpod:skip"
# Set by deploy/ (or the cluster spec) on worker pods.
ENV_HEALTH_CONFIG = "SLURMPOD_HEALTH_CONFIG"  # the health config YAML (ConfigMap mount)
ENV_HEALTH_STATE_DIR = "SLURMPOD_HEALTH_STATE_DIR"  # kept between runs; an emptyDir is enough
ENV_HEALTH_METRICS_DIR = "SLURMPOD_HEALTH_METRICS_DIR"  # node-exporter's textfile collector dir
ENV_EXPECTED_GPUS = "SLURMPOD_EXPECTED_GPUS"  # resourceFieldRef limits."nvidia.com/gpu"
ENV_REAL_MEMORY = "SLURMPOD_REAL_MEMORY"  # the RealMemory (MiB) this worker registers with
HEALTH_CONFIG = "/etc/slurmpod/health.json"
# The worker's health agent (`slurmpod daemon health-agent`, under supervisord when enabled): the hooks
# ask it over this Unix socket, and run the checks themselves when it does not answer. Empty: not asked.
ENV_HEALTH_AGENT_SOCKET = "SLURMPOD_HEALTH_AGENT_SOCKET"
HEALTH_AGENT_SOCKET = f"{RUN_DIR}/health-agent.sock"
# The agent's live Prometheus metrics (/metrics over HTTP) on the worker pod's IP; 0 turns them off. In the
# exporters' range, clear of node-exporter's 9100 and dcgm-exporter's 9400.
# Ref: https://github.com/prometheus/prometheus/wiki/Default-port-allocations
ENV_HEALTH_AGENT_METRICS_PORT = "SLURMPOD_HEALTH_AGENT_METRICS_PORT"
HEALTH_AGENT_METRICS_PORT = 9402
ENV_HEALTH_AGENT = "SLURMPOD_HEALTH_AGENT"  # true (default) | false: whether the worker runs the agent
# true | false (default): the worker claims its nodeset's FUTURE placeholder before slurmd starts; the chart
# sets it on nodesets slurmpod's autoscaler keeps placeholders for (docs/autoscaling.md)
ENV_CLAIM_PLACEHOLDER = "SLURMPOD_CLAIM_PLACEHOLDER"
HEALTH_STATE_DIR = "/var/lib/slurmpod/health"
# Ref: https://github.com/prometheus/node_exporter#textfile-collector
HEALTH_METRICS_DIR = "/var/lib/node_exporter/textfile_collector"
CUDART_LIBRARY = "libcudart.so"  # Ref: https://docs.nvidia.com/cuda/cuda-runtime-api/
NCCL_LIBRARY = "libnccl.so.2"  # Ref: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/
KERNEL_LOG = "/dev/kmsg"  # Ref: https://www.kernel.org/doc/Documentation/ABI/testing/dev-kmsg
# slurmd runs Prolog/Epilog/HealthCheckProgram with no search path; the hooks set this one.
HOOK_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MUNGE_BIN = "/usr/bin/munge"  # Debian's munge package
UNMUNGE_BIN = "/usr/bin/unmunge"

# --- Metrics and autoscaling at the controller (docs/metrics.md) ---
# The controller's exporter (`slurmpod daemon exporter`, under supervisord when the cluster spec's
# metrics.enabled): GET /metrics on the controller pod's IP. In the exporters' range, beside the health
# agent's 9402. Ref: https://github.com/prometheus/prometheus/wiki/Default-port-allocations
# deploy/ sets the env twin from values metrics.port and names the container port `metrics`.
ENV_EXPORTER_PORT = "SLURMPOD_EXPORTER_PORT"
EXPORTER_PORT = 9401
# How often the exporter asks slurmctld (cluster spec metrics.pollSeconds); each poll runs four commands,
# so it is never faster than MIN_EXPORTER_POLL_S. Ref: https://slurm.schedmd.com/metrics.html#performance
DEFAULT_EXPORTER_POLL_S = 15
MIN_EXPORTER_POLL_S = 5

# --- Topology at the controller: rendered at start, kept in sync by `daemon topology-sync` ---
# The files slurmctld reads: topology.conf before 25.05, topology.yaml from 25.05 (where both exist,
# topology.yaml wins). Ref: https://slurm.schedmd.com/topology.yaml.html
TOPOLOGY_CONF = f"{SLURM_ETC}/topology.conf"
TOPOLOGY_YAML = f"{SLURM_ETC}/topology.yaml"
# Set by users (or Slinky-style webhooks) on worker pods: the pod's placement path, "block1/host3" or
# "topo:unit"; the downward-API `annotations` file carries it to the worker. The label of the same key
# (LABEL_TOPOLOGY) is read too.
ANNOTATION_TOPOLOGY = LABEL_TOPOLOGY
# The key of a worker's `slurmd --extra` JSON that carries its placement path to slurmctld, where the
# controller's topology-sync reads it back (`scontrol show nodes --json`, field "extra").
# Ref: https://slurm.schedmd.com/slurmd.html#OPT_--extra
EXTRA_TOPOLOGY_KEY = LABEL_TOPOLOGY

# --- Default node-health hooks (cluster spec defaults) ---
# The worker image's thin client (images/files/slurmpod_hook.c), one program under three names: it asks
# the health agent and, when the agent does not answer, runs the Python hook of the same name in
# HOOK_FALLBACK_DIR (the slurmpod wheel's console scripts). slurmd runs them by path, no args.
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_Prolog
HOOK_CLIENT_DIR = "/usr/local/sbin"
HOOK_FALLBACK_DIR = f"{VENV_DIR}/bin"
PROLOG_BIN = f"{HOOK_CLIENT_DIR}/slurmpod-prolog"
EPILOG_BIN = f"{HOOK_CLIENT_DIR}/slurmpod-epilog"
HEALTHCHECK_BIN = f"{HOOK_CLIENT_DIR}/slurmpod-healthcheck"
# slurmd's Prolog and Epilog in-process (images/files/prep_slurmpod.c): PrEpPlugins=slurmpod loads
# <PluginDir>/prep_slurmpod.so, in slurmd and slurmctld alike. Ref: https://slurm.schedmd.com/prep_plugins.html
PREP_PLUGIN = "slurmpod"
PREP_PLUGIN_FILE = "prep_slurmpod.so"
# Alloc: the prolog runs when the job is allocated, so a bad node fails it before any step starts;
# NoHold: srun/salloc do not wait for the prolog in slurmctld (without it srun's step creation is refused
# while the prolog runs and retried about once a second: +1 s per job start); slurmd holds the step
# until the prolog is done instead, so no task runs before it;
# ForceRequeueOnFail: a batch job whose prolog failed is requeued even if it did not ask to be.
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_PrologFlags
DEFAULT_PROLOG_FLAGS = ("Alloc", "NoHold", "ForceRequeueOnFail")
# slurmd kills a Prolog/Epilog past this; the prolog's own deadline (20 s) and the epilog's (30 s) end
# well before. Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_PrologEpilogTimeout
DEFAULT_PROLOG_EPILOG_TIMEOUT_S = 60
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_HealthCheckInterval
DEFAULT_HEALTH_CHECK_INTERVAL_S = 300
# ANY: drained nodes are checked too, so a repaired node can be returned to service.
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_HealthCheckNodeState
DEFAULT_HEALTH_CHECK_NODE_STATE = ("ANY",)
# Fast requeue (cluster spec `requeue.fast`): how long slurmctld holds a batch job it requeued before it
# may start again (Slurm's default is AuthInfo=cred_expire, 120 s), per Slurm version. See docs/requeue.md.
# From 25.11 the hold has its own knob: SchedulerParameters=requeue_delay=0 makes the job eligible one
# second after its requeue completes (slurmctld adds the second itself, so the new launch credential is
# newer than the old one's revocation), which is how soon an expedited requeue may start too.
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_requeue_delay
FAST_REQUEUE_DELAY_S = 0
# Before 25.11 the hold is the job credential's lifetime, AuthInfo=cred_expire, which also bounds how
# long a step launch may take from slurmctld signing its credential to slurmd checking it on arrival
# ("It must be sufficiently long enough to load user environment, run prolog, deal with the slurmd
# getting paged out of memory"). The shortest safe lifetime covers one launch RPC at its full
# MessageTimeout (Slurm's default 10 s, unless extraLines set another) plus CRED_MARGIN_S for clock skew
# between nodes and srun's work between receiving the credential and sending it: 15 s by default.
# Slurm refuses values under 5 s and then falls back to 120 s.
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_cred_expire
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_MessageTimeout
SLURM_DEFAULT_MESSAGE_TIMEOUT_S = 10
CRED_MARGIN_S = 5
FAST_CRED_EXPIRE_S = SLURM_DEFAULT_MESSAGE_TIMEOUT_S + CRED_MARGIN_S

# UCX's system-wide settings file, read by every process that loads libucs (OpenMPI's pml/ucx and osc/ucx
# link it). Written at worker start. Ref: https://openucx.readthedocs.io/en/master/faq.html
UCX_CONF = "/etc/ucx/ucx.conf"

# --- Task environment, written by the worker's start ---
# slurmpod's SPANK plugin (images/files/slurmpod_spank.c), which the worker's PLUGSTACK_CONF names, sets
# TASK_PROLOG_EXPORTS in each task, as the job's user just before it execs, and makes the job's scratch dir
# under the base TASK_PROLOG_SCRATCH names: no program runs per task. `slurmpod task-prolog`, a TaskProlog
# for clusters without the plugin, does the same from TASK_ENV_FILE.
# Ref: https://slurm.schedmd.com/spank.html, https://slurm.schedmd.com/slurm.conf.html#OPT_PlugStackConfig
PLUGSTACK_CONF = "/etc/slurmpod/plugstack.conf"  # slurm.conf PlugStackConfig: a worker's own, absent elsewhere
SPANK_PLUGIN = "/usr/local/lib/slurmpod/slurmpod_spank.so"
# The jobs' POSIX shared memory: the worker's memory-backed emptyDir (chart nodesets.<name>.sharedMemory).
# Ref: https://man7.org/linux/man-pages/man7/shm_overview.7.html
JOB_SHM_DIR = "/dev/shm"
TASK_ENV_FILE = "/etc/slurmpod/task-env.json"  # written at worker start; read by `slurmpod task-prolog`
TASK_PROLOG_EXPORTS = "/etc/slurmpod/task-prolog.exports"  # the `export NAME=value` lines
TASK_PROLOG_SCRATCH = "/etc/slurmpod/task-prolog.scratch"  # "BASE true|false" (TMPDIR too); absent: none
# Set by deploy/ on worker pods (values `taskEnv`): "auto" (default) is the pod's default-route interface,
# "" exports none. Ref: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-socket-ifname
ENV_NCCL_SOCKET_IFNAME = "SLURMPOD_NCCL_SOCKET_IFNAME"
# An NCCL topology XML present on the worker (a hostPath or ConfigMap mount): exported as NCCL_TOPO_FILE.
ENV_NCCL_TOPO_FILE = "SLURMPOD_NCCL_TOPO_FILE"
ENV_SCRATCH_BASE = "SLURMPOD_SCRATCH_BASE"  # "" disables per-job scratch
ENV_SCRATCH_TMPDIR = "SLURMPOD_SCRATCH_TMPDIR"  # true | false: TMPDIR is the job's scratch dir
DEFAULT_SCRATCH_BASE = "/tmp/slurmpod-jobs"  # sticky (1777), made at worker start; the epilog empties it
# What the task prolog exports besides NCCL_*: the job's scratch dir, the pod's placement and k8s node.
TASK_ENV_SCRATCH = "SLURMPOD_SCRATCH"
TASK_ENV_TOPOLOGY = "SLURMPOD_TOPOLOGY"
TASK_ENV_K8S_NODE = "SLURMPOD_K8S_NODE"

# --- MPI ---
# srun on the login pod listens in this range for slurmstepd's connections (I/O, PMI): a firewall or
# NetworkPolicy lets workers reach login pods on it. Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_SrunPortRange
DEFAULT_SRUN_PORT_RANGE = "60001-63000"
# MpiDefault where the cluster spec sets none: pmix when the controller's Slurm has mpi_pmix.so, else none.
# Ref: https://slurm.schedmd.com/mpi_guide.html#pmix
SLURM_PLUGIN_GLOB = "usr/lib/*/slurm-wlm/mpi_*.so"  # relative to the image's root
