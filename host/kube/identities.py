"""Who talks to the API server: one static token per component, each in the groups its bootstrap RBAC
role binds (the kubelet as system:node:<name> for the Node authorizer), written as tokens.csv and one
kubeconfig each. Tokens are made fresh by every ``up``.
Ref: https://kubernetes.io/docs/reference/access-authn-authz/authentication/#static-token-file
Ref: https://kubernetes.io/docs/reference/access-authn-authz/rbac/#core-component-roles
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from slurmpod_host.kube import render
from slurmpod_host.kube.layout import NODE_NAME, Layout


@dataclass(frozen=True, slots=True)
class Identity:
    kubeconfig: str  # file name in the state dir
    user: str
    groups: tuple[str, ...]


IDENTITIES = (
    Identity("admin.kubeconfig", "slurmpod-admin", ("system:masters",)),
    Identity("controller-manager.kubeconfig", "system:kube-controller-manager", ()),
    Identity("scheduler.kubeconfig", "system:kube-scheduler", ()),
    Identity("kubelet.kubeconfig", f"system:node:{NODE_NAME}", ("system:nodes",)),
    Identity("kube-proxy.kubeconfig", "system:kube-proxy", ()),
)


def write_all(layout: Layout) -> None:
    lines = []
    for uid, ident in enumerate(IDENTITIES):
        token = secrets.token_hex(24)
        groups = ",".join(ident.groups)
        lines.append(f'{token},{ident.user},{uid},"{groups}"' if groups else f"{token},{ident.user},{uid}")
        render.write(layout.state / ident.kubeconfig, "kubeconfig.yaml", {
            "api_url": layout.net.api_url, "ca_file": str(layout.pki / "ca.crt"), "user": ident.user,
            "token": token})
    path = layout.state / "tokens.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    path.chmod(0o600)
