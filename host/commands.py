"""The host commands `slurmpod` gains when this distribution is installed, one function per command group.

host/pyproject.toml lists each function under the ``slurmpod.commands`` entry-point group; the pod CLI
(slurmpod/cli.py) calls them only for a command that is not a pod command. Each option is declared with
``Commands.option``, so it has its SLURMPOD_ environment twin and one meaning per name, as pod options do.
A new command group is one more function here (or in its own package) and one more entry-point line.
Ref: https://packaging.python.org/en/latest/specifications/entry-points/
"""

from __future__ import annotations

from slurmpod import well_known as wk
from slurmpod.cli import Commands, Handler, lazy
from slurmpod_host.images import flavors

FLAVORS = tuple(sorted(flavors.FLAVORS))
_FLAVOR_HELP = "Slurm flavor of the images"
_NAME_HELP = "cluster name (prefix of every Docker object)"
_WORKERS_HELP = "number of worker pods"


def _host(module: str, func: str = "main") -> Handler:
    return lazy(module, func, takes_env=False)


def images(c: Commands) -> None:
    """`slurmpod images build|pin|list`."""
    isub = c.group("images", "build and list the container images (host tool)")
    b = isub.add_parser("build", help="build images (base made with debootstrap when missing)")
    c.option(b, "--flavor", choices=FLAVORS, default="24.11", help=_FLAVOR_HELP)
    c.option(b, "--role", env="SLURMPOD_BUILD_ROLES", action="append",
             choices=["base", *wk.IMAGE_ROLES], help="roles to build (repeatable; default: all)")
    c.option(b, "--base-image", default=None, help="start from this registry image instead of debootstrap")
    c.option(b, "--mirror", default=None, help="Debian mirror (default: the host's apt sources)")
    c.option(b, "--log-file", env="SLURMPOD_BUILD_LOG", default=None,
             help="full build log (default build/images-FLAVOR.log)")
    c.option(b, "--values-file", default=None, help="write the built image ids into this Helm values file")
    b.set_defaults(handler=_host("slurmpod_host.images.build"))
    pin = isub.add_parser("pin", help="write the built images' digests into a Helm values file (only those change)")
    c.option(pin, "--values", required=True, help="values file of deploy/helm/slurmpod or of Slinky's slurm chart")
    c.option(pin, "--flavor", choices=FLAVORS, default="24.11", help=_FLAVOR_HELP)
    c.option(pin, "--path", action="append", default=None,
             help="KEYPATH=ROLE to pin, e.g. nodesets.gpu.slurmd.image=worker (repeatable; default: every "
                  "controller.slurmctld.image, nodesets.*.slurmd.image, loginsets.*.login.image)")
    c.option(pin, "--local-id", action="store_true", default=False,
             help="pin the local image ID where the image has no RepoDigest (not pullable by a kubelet)")
    pin.set_defaults(handler=_host("slurmpod_host.images.pin"))
    ls = isub.add_parser("list", help="list built slurmpod images")
    ls.set_defaults(handler=_host("slurmpod_host.images.build", "list_main"))


def cluster(c: Commands) -> None:
    """`slurmpod cluster up|down|status`: pods emulated with Docker."""
    csub = c.group("cluster", "pods emulated with Docker, from the manifests in deploy/ (host tool)")
    up = csub.add_parser("up", help="start controller, N workers and a login pod; wait for IDLE")
    c.option(up, "--flavor", choices=FLAVORS, default="24.11", help=_FLAVOR_HELP)
    c.option(up, "--workers", type=int, default=2, help=_WORKERS_HELP)
    c.option(up, "--timeout", env="SLURMPOD_UP_TIMEOUT", type=float, default=120.0,
             help="seconds to wait for every worker to be IDLE")
    c.option(up, "--auth", choices=list(wk.AUTH_TYPES), default="munge",
             help="AuthType: munge (munged in every pod) or slurm (auth/slurm with a generated slurm.key)")
    c.option(up, "--manifests", default=None,
             help="kustomization directory to run (default deploy/kubernetes; deploy/kubernetes/accounting "
                  "adds slurmdbd, MariaDB and slurmrestd)")
    c.option(up, "--secret-file", action="append", default=[], metavar="NAME:KEY=PATH",
             help="a Secret the manifests mount and you create, as `kubectl create secret generic NAME "
                  "--from-file=KEY=PATH` does (the site's sssd.conf); repeatable")
    c.option(up, "--enforce-network-policy", action="store_true", default=False,
             help="enforce the manifests' NetworkPolicies with iptables on the cluster's bridge (root, "
                  "br_netfilter; removed by `cluster down`)")
    for p in (up, csub.add_parser("down", help="remove every container, network and volume"),
              csub.add_parser("status", help="pods and sinfo")):
        c.option(p, "--name", default="slurmpod", help=_NAME_HELP)
        p.set_defaults(handler=_host("slurmpod_host.cluster.cli"))


def demo(c: Commands) -> None:
    """`slurmpod demo`: build if needed, cluster up, run the demo jobs."""
    d = c.command("demo", "build if needed, cluster up, run the demo jobs (host tool)")
    c.option(d, "--flavor", choices=FLAVORS, default="24.11", help=_FLAVOR_HELP)
    c.option(d, "--workers", type=int, default=2, help=_WORKERS_HELP)
    c.option(d, "--name", default="slurmpod", help=_NAME_HELP)
    d.set_defaults(handler=_host("slurmpod_host.cluster.demo"))


def k8s(c: Commands) -> None:
    """`slurmpod k8s`: a local Kubernetes 1.20.2 (slurmpod_host.kube). Its paths come from
    SLURMPOD_K8S_CACHE and SLURMPOD_K8S_STATE_DIR (slurmpod_host.kube.layout)."""
    ksub = c.group("k8s", "a local single-node Kubernetes 1.20.2 on this Docker engine (host tool)")
    for name, text in (("build", "build the control plane and kubelet once per machine (cached)"),
                       ("up", "start etcd, the control plane, a kubelet, kube-proxy and DNS; print KUBECONFIG"),
                       ("down", "stop it all and remove its containers, bridge, rules and state"),
                       ("status", "the daemons, nodes and pods")):
        ksub.add_parser(name, help=text).set_defaults(handler=_host("slurmpod_host.kube.cli"))
    prep = ksub.add_parser("prepare", help="before `helm install`: the namespace, the munge key Secret and "
                           "PersistentVolumes for the release's claims (there is no provisioner)")
    c.option(prep, "--release", env="SLURMPOD_K8S_RELEASE", default="slurmpod", help="the Helm release name")
    c.option(prep, "--namespace", env="SLURMPOD_K8S_NAMESPACE", default="slurmpod", help="the release's namespace")
    c.option(prep, "--values", env="SLURMPOD_K8S_VALUES", action="append", default=None,
             help="a values file the release will be installed with (repeatable)")
    prep.set_defaults(handler=_host("slurmpod_host.kube.cli"))
