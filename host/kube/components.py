"""The daemons of the local cluster and their command lines, in start order (``down`` stops them in
reverse). Flags follow each component's reference page for v1.20.
Ref: https://kubernetes.io/docs/reference/command-line-tools-reference/
"""

from __future__ import annotations

import shutil
import sys

from slurmpod_host.kube.layout import NODE_NAME, PAUSE_IMAGE, Layout
from slurmpod_host.kube.procs import Daemon

ORDER = ("etcd", "kube-apiserver", "dnsfeed", "dnsmasq", "kube-controller-manager", "kube-scheduler",
         "kubelet", "kube-proxy")


def etcd(layout: Layout) -> Daemon:
    n = layout.net
    client = f"http://127.0.0.1:{n.etcd_client_port}"
    peer = f"http://127.0.0.1:{n.etcd_peer_port}"
    return Daemon("etcd", (shutil.which("etcd") or "/usr/bin/etcd", "--name=slurmpod-k8s",
                           f"--data-dir={layout.state / 'etcd'}", f"--listen-client-urls={client}",
                           f"--advertise-client-urls={client}", f"--listen-peer-urls={peer}",
                           f"--initial-advertise-peer-urls={peer}",
                           f"--initial-cluster=slurmpod-k8s={peer}", "--listen-metrics-urls=",
                           "--log-level=warn"))


def apiserver(layout: Layout) -> Daemon:
    n, pki = layout.net, layout.pki
    return Daemon("kube-apiserver", (
        str(layout.bin("kube-apiserver")),
        f"--etcd-servers=http://127.0.0.1:{n.etcd_client_port}",
        f"--bind-address={n.gateway}", f"--advertise-address={n.gateway}", f"--secure-port={n.api_port}",
        "--insecure-port=0",
        f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--token-auth-file={layout.state / 'tokens.csv'}",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        # ServiceAccount tokens: 1.20 needs the issuer and both keys.
        # Ref: https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        f"--service-cluster-ip-range={n.service_cidr}",
        # exec/logs reach the kubelet at its InternalIP (the node's name resolves nowhere).
        "--kubelet-preferred-address-types=InternalIP",
        f"--kubelet-client-certificate={pki / 'kubelet-client.crt'}",
        f"--kubelet-client-key={pki / 'kubelet-client.key'}",
        "--allow-privileged=false",
        "--v=1",
    ))


def controller_manager(layout: Layout) -> Daemon:
    kc = layout.state / "controller-manager.kubeconfig"
    return Daemon("kube-controller-manager", (
        str(layout.bin("kube-controller-manager")),
        f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
        "--bind-address=127.0.0.1", "--port=0", "--leader-elect=false",
        # Each controller acts as its own ServiceAccount under the bootstrap RBAC roles.
        # Ref: https://kubernetes.io/docs/reference/access-authn-authz/rbac/#controller-roles
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={layout.pki / 'sa.key'}",
        f"--root-ca-file={layout.pki / 'ca.crt'}",
        "--v=1",
    ))


def scheduler(layout: Layout) -> Daemon:
    kc = layout.state / "scheduler.kubeconfig"
    return Daemon("kube-scheduler", (
        str(layout.bin("kube-scheduler")),
        f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
        "--bind-address=127.0.0.1", "--port=0", "--leader-elect=false", "--v=1",
    ))


def kubelet(layout: Layout) -> Daemon:
    root = layout.kubelet_root
    return Daemon("kubelet", (
        str(layout.bin("kubelet")),
        f"--config={layout.state / 'kubelet.yaml'}",
        f"--kubeconfig={layout.state / 'kubelet.kubeconfig'}",
        f"--root-dir={root}", f"--cert-dir={layout.state / 'kubelet-pki'}",
        f"--hostname-override={NODE_NAME}", f"--node-ip={layout.net.gateway}",
        # dockershim: the kubelet talks to this machine's Docker engine (removed in 1.24).
        # Ref: https://kubernetes.io/blog/2020/12/02/dockershim-faq/
        "--container-runtime=docker", "--docker-endpoint=unix:///var/run/docker.sock",
        f"--container-runtime-endpoint=unix://{layout.run / 'dockershim.sock'}",
        f"--experimental-dockershim-root-directory={layout.state / 'dockershim'}",
        f"--pod-infra-container-image={PAUSE_IMAGE}",
        "--network-plugin=cni", "--cni-bin-dir=/usr/lib/cni", f"--cni-conf-dir={layout.state / 'cni'}",
        f"--cni-cache-dir={layout.state / 'cni-cache'}",
        "--v=1",
    ))


def kube_proxy(layout: Layout) -> Daemon:
    return Daemon("kube-proxy", (str(layout.bin("kube-proxy")), f"--config={layout.state / 'kube-proxy.yaml'}",
                                 "--v=1"))


def dnsmasq(layout: Layout) -> Daemon:
    return Daemon("dnsmasq", (shutil.which("dnsmasq") or "/usr/sbin/dnsmasq", "--keep-in-foreground",
                              f"--conf-file={layout.state / 'dnsmasq.conf'}", "--log-facility=-"))


def dnsfeed(layout: Layout) -> Daemon:
    return Daemon("dnsfeed", (sys.executable, "-P", "-m", "slurmpod_host.kube.dnsfeed",
                              str(layout.kubeconfig), str(layout.hosts_dir / "cluster")))


def all_daemons(layout: Layout) -> list[Daemon]:
    made = {d.name: d for d in (etcd(layout), apiserver(layout), dnsfeed(layout), dnsmasq(layout),
                                 controller_manager(layout), scheduler(layout), kubelet(layout),
                                 kube_proxy(layout))}
    return [made[n] for n in ORDER]
