"""slurmpod_host.kube: a single-node Kubernetes 1.20.2 (control plane and kubelet) on this machine.

``slurmpod k8s up|down|status``: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, a kubelet
on this machine's Docker engine (dockershim), kube-proxy and dnsmasq fed from the API, all on loopback
and one bridge this package creates. docs/kubernetes.md says what it is and what it is not.
"""
