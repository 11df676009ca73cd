"""NetworkPolicy objects of the applied manifests, resolved against the emulated pods, as iptables rules.

Pure: no Docker, no iptables. netenforce.py loads what ``render`` returns. Semantics as Kubernetes
defines them: a pod selected by a policy of a type (Ingress, Egress) is isolated for that direction and
accepts only what some policy selecting it allows; a connection between two pods needs the source's
egress and the destination's ingress to allow it; replies of an allowed connection always pass.
Ref: https://kubernetes.io/docs/concepts/services-networking/network-policies/
Ref: https://kubernetes.io/docs/reference/kubernetes-api/policy-resources/network-policy-v1/
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slurmpod import well_known as wk
from slurmpod.errors import BadInput
from slurmpod.problems import Problems
from slurmpod_host.cluster.manifests import Bundle, release_of
from slurmpod_host.cluster.plan import PodPlan

PROTOCOLS = ("TCP", "UDP", "SCTP")
# Namespaces carry this label from Kubernetes 1.21 on; the emulator's one namespace has only it.
# Ref: https://kubernetes.io/docs/concepts/services-networking/network-policies/#targeting-a-namespace-by-its-name
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# iptables chain names hold at most 28 characters (XT_EXTENSION_MAXNAMELEN - 1).
# Ref: https://git.netfilter.org/iptables/tree/include/linux/netfilter/x_tables.h
CHAIN_PREFIX = "SLURMPOD-NP-"
MAX_CHAIN = 28


@dataclass(frozen=True, slots=True)
class Requirement:
    """One matchExpressions item of a label selector."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Selector:
    """A label selector; empty matches everything. Ref: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.match_labels):
            return False
        for r in self.match_expressions:
            present = r.key in labels
            ok = {"In": present and labels.get(r.key) in r.values,
                  "NotIn": not present or labels.get(r.key) not in r.values,
                  "Exists": present, "DoesNotExist": not present}[r.operator]
            if not ok:
                return False
        return True


@dataclass(frozen=True, slots=True)
class Peer:
    """A NetworkPolicyPeer: pods (podSelector, namespaceSelector) or an ipBlock."""

    pods: Selector | None = None  # None with namespaces set: every pod of those namespaces
    namespaces: Selector | None = None  # None: the policy's own namespace
    cidr: str | None = None  # ipBlock (no `except`: refused when parsed)


@dataclass(frozen=True, slots=True)
class Port:
    """A NetworkPolicyPort; ``first`` None: every port of ``protocol``."""

    protocol: str
    first: int | None = None
    last: int | None = None  # endPort; None: only ``first``


@dataclass(frozen=True, slots=True)
class Rule:
    """One ingress or egress rule; None: the field is absent or empty, which matches everything."""

    peers: tuple[Peer, ...] | None
    ports: tuple[Port, ...] | None


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    namespace: str
    selector: Selector
    ingress: tuple[Rule, ...] | None  # None: not an Ingress policy
    egress: tuple[Rule, ...] | None  # None: not an Egress policy


@dataclass(frozen=True, slots=True)
class Member:
    """An emulated pod as policies see it."""

    name: str
    ip: str
    namespace: str
    labels: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, plan: PodPlan) -> Member:
        return cls(plan.name, plan.ip, plan.namespace, plan.labels)

    @property
    def role(self) -> str:
        return dict(self.labels).get(wk.LABEL_ROLE, "")


@dataclass(frozen=True, slots=True)
class Allow:
    """What one rule lets through for one pod: ``cidrs`` None is any address, ``ports`` None any port."""

    cidrs: tuple[str, ...] | None
    ports: tuple[Port, ...] | None
    why: str  # policy and rule, for the rule's comment


@dataclass(frozen=True, slots=True)
class PodFilter:
    """One pod's isolation: None where no policy of that direction selects it."""

    member: Member
    ingress: tuple[Allow, ...] | None
    egress: tuple[Allow, ...] | None


@dataclass(frozen=True, slots=True)
class RuleSet:
    """The filter table's part that enforces the policies of one cluster."""

    chains: tuple[str, ...]  # every chain, the main one first
    restore: str  # iptables-restore --noflush input: declares (and so flushes) each chain, then fills it
    jump: tuple[str, ...]  # the DOCKER-USER rule (after -A/-C/-D DOCKER-USER) that sends the bridge's traffic in


# --- parsing ----------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Ctx:
    problems: Problems
    release: str | None  # the policy's release (its instance label), which the emulated cluster replaces
    cluster: str


def _selector(raw: Any, field: str, ctx: _Ctx) -> Selector:
    if raw is None:
        return Selector()
    problems = ctx.problems
    if not isinstance(raw, dict):
        problems.add(field, str(raw), "expected a label selector")
        return Selector()
    labels = {str(k): str(v) for k, v in (raw.get("matchLabels") or {}).items()}
    # The release's instance label names the emulated cluster (podspec gives pods that value).
    if ctx.release is not None and labels.get(wk.LABEL_INSTANCE) == ctx.release:
        labels[wk.LABEL_INSTANCE] = ctx.cluster
    reqs = []
    for i, e in enumerate(raw.get("matchExpressions") or []):
        op = str(e.get("operator"))
        if op not in {"In", "NotIn", "Exists", "DoesNotExist"}:
            problems.add(f"{field}.matchExpressions[{i}].operator", op, "not a selector operator")
            continue
        reqs.append(Requirement(str(e.get("key")), op, tuple(str(v) for v in e.get("values") or [])))
    return Selector(tuple(sorted(labels.items())), tuple(reqs))


def _peer(raw: Any, field: str, ctx: _Ctx) -> Peer | None:
    problems = ctx.problems
    if not isinstance(raw, dict):
        problems.add(field, str(raw), "expected a NetworkPolicyPeer")
        return None
    block = raw.get("ipBlock")
    if block is not None:
        if block.get("except"):
            problems.add(f"{field}.ipBlock.except", str(block["except"]), "not enforced by the emulator")
            return None
        try:
            return Peer(cidr=str(ipaddress.IPv4Network(str(block.get("cidr")), strict=False)))
        except ValueError:
            problems.add(f"{field}.ipBlock.cidr", str(block.get("cidr")), "not an IPv4 CIDR")
            return None
    pods = _selector(raw["podSelector"], f"{field}.podSelector", ctx) if "podSelector" in raw else None
    namespaces = _selector(raw["namespaceSelector"], f"{field}.namespaceSelector", ctx) \
        if "namespaceSelector" in raw else None
    if pods is None and namespaces is None:
        problems.add(field, str(raw), "needs podSelector, namespaceSelector or ipBlock")
        return None
    return Peer(pods=pods, namespaces=namespaces)


def _port(raw: Any, field: str, problems: Problems) -> Port | None:
    protocol = str((raw or {}).get("protocol", "TCP"))
    if protocol not in PROTOCOLS:
        problems.add(f"{field}.protocol", protocol, f"expected one of {', '.join(PROTOCOLS)}")
        return None
    port, end = (raw or {}).get("port"), (raw or {}).get("endPort")
    if port is None:
        return Port(protocol)
    if not isinstance(port, int) or isinstance(port, bool):
        # A named port means the destination container's port of that name.
        problems.add(f"{field}.port", str(port), "named ports are not enforced by the emulator")
        return None
    if end is not None and (not isinstance(end, int) or end < port):
        problems.add(f"{field}.endPort", str(end), f"must be a number >= port {port}")
        return None
    return Port(protocol, port, end)


def _rules(raw: Any, key: str, field: str, ctx: _Ctx) -> tuple[Rule, ...]:
    rules = []
    for i, r in enumerate(raw or []):
        where = f"{field}[{i}]"
        peers_raw, ports_raw = (r or {}).get(key), (r or {}).get("ports")
        peers = None if not peers_raw else tuple(
            peer for j, x in enumerate(peers_raw) if (peer := _peer(x, f"{where}.{key}[{j}]", ctx)))
        ports = None if not ports_raw else tuple(
            port for j, x in enumerate(ports_raw) if (port := _port(x, f"{where}.ports[{j}]", ctx.problems)))
        rules.append(Rule(peers, ports))
    return tuple(rules)


def parse(bundle: Bundle, cluster: str) -> tuple[Policy, ...]:
    """Every NetworkPolicy of ``bundle``; BadInput naming each field the emulator cannot enforce."""
    problems = Problems()
    policies = []
    for doc in bundle.of_kind("NetworkPolicy"):
        body, field = doc.body, doc.where
        spec = body.get("spec") or {}
        ctx = _Ctx(problems, release_of(body), cluster)
        namespace = str((body.get("metadata") or {}).get("namespace") or bundle.namespace)
        # policyTypes left out: Ingress, plus Egress where the policy has egress rules.
        types = spec.get("policyTypes") or (["Ingress", "Egress"] if "egress" in spec else ["Ingress"])
        selector = _selector(spec.get("podSelector") or {}, f"{field}.spec.podSelector", ctx)
        ingress = _rules(spec.get("ingress"), "from", f"{field}.spec.ingress", ctx) if "Ingress" in types else None
        egress = _rules(spec.get("egress"), "to", f"{field}.spec.egress", ctx) if "Egress" in types else None
        policies.append(Policy(doc.name, namespace, selector, ingress, egress))
    problems.raise_if_any()
    return tuple(policies)


# --- resolving against the pods ---------------------------------------------------------------------------

def _peer_cidrs(peer: Peer, policy: Policy, members: Sequence[Member]) -> list[str]:
    if peer.cidr is not None:
        return [peer.cidr]
    out = []
    for m in members:
        in_ns = (m.namespace == policy.namespace if peer.namespaces is None
                 else peer.namespaces.matches({NAMESPACE_NAME_LABEL: m.namespace}))
        if in_ns and (peer.pods is None or peer.pods.matches(dict(m.labels))):
            out.append(f"{m.ip}/32")
    return out


def _allows(policy: Policy, rules: tuple[Rule, ...], direction: str,
            members: Sequence[Member]) -> list[Allow]:
    out = []
    for i, rule in enumerate(rules):
        cidrs = None if rule.peers is None else tuple(dict.fromkeys(
            c for p in rule.peers for c in _peer_cidrs(p, policy, members)))
        if cidrs == ():
            continue  # its peers select no pod now: it allows nothing
        out.append(Allow(cidrs, rule.ports, f"{policy.name} {direction}[{i}]"))
    return out


def resolve(policies: Sequence[Policy], members: Sequence[Member]) -> tuple[PodFilter, ...]:
    """Each pod's allowed peers and ports, the union over the policies that select it."""
    filters = []
    for m in sorted(members, key=lambda m: ipaddress.IPv4Address(m.ip)):
        ingress: list[Allow] | None = None
        egress: list[Allow] | None = None
        for p in policies:
            if p.namespace != m.namespace or not p.selector.matches(dict(m.labels)):
                continue
            if p.ingress is not None:
                ingress = (ingress or []) + _allows(p, p.ingress, "ingress", members)
            if p.egress is not None:
                egress = (egress or []) + _allows(p, p.egress, "egress", members)
        filters.append(PodFilter(m, None if ingress is None else tuple(ingress),
                                 None if egress is None else tuple(egress)))
    return tuple(filters)


def _matches(allow: Allow, peer_ip: str, protocol: str, port: int) -> bool:
    if allow.cidrs is not None and not any(ipaddress.IPv4Address(peer_ip) in ipaddress.IPv4Network(c)
                                           for c in allow.cidrs):
        return False
    if allow.ports is None:
        return True
    return any(p.protocol == protocol and (p.first is None or p.first <= port <= (p.last or p.first))
               for p in allow.ports)


def allowed(filters: Iterable[PodFilter], src_ip: str, dst_ip: str, protocol: str, port: int) -> bool:
    """Whether a new connection from ``src_ip`` to ``dst_ip``:``port`` passes: what ``render``'s rules do."""
    by_ip = {f.member.ip: f for f in filters}
    src, dst = by_ip.get(src_ip), by_ip.get(dst_ip)
    if src is not None and src.egress is not None and not any(
            _matches(a, dst_ip, protocol, port) for a in src.egress):
        return False
    return dst is None or dst.ingress is None or any(_matches(a, src_ip, protocol, port) for a in dst.ingress)


# --- iptables ---------------------------------------------------------------------------------------------

def main_chain(cluster: str) -> str:
    """The cluster's chain: the prefix and a digest of its name (a name may be 63 characters)."""
    return f"{CHAIN_PREFIX}{hashlib.sha256(cluster.encode()).hexdigest()[:8]}"


def _comment(text: str) -> list[str]:
    # The comment match takes at most 255 characters. Ref: https://ipset.netfilter.org/iptables-extensions.man.html#lbAU
    return ["-m", "comment", "--comment", _quote(text[:200])]


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "").replace('"', "'") + '"'


def _match_ports(port: Port) -> list[list[str]]:
    proto = ["-p", port.protocol.lower()]
    if port.first is None:
        return [proto]
    dport = str(port.first) if port.last is None or port.last == port.first else f"{port.first}:{port.last}"
    return [[*proto, "-m", port.protocol.lower(), "--dport", dport]]


def _allow_lines(chain: str, allows: tuple[Allow, ...], peer_flag: str) -> list[str]:
    lines = []
    for a in allows:
        peers: list[list[str]] = [[]] if a.cidrs is None else [[peer_flag, c] for c in a.cidrs]
        ports: list[list[str]] = [[]] if a.ports is None else [m for p in a.ports for m in _match_ports(p)]
        for peer in peers:
            for port in ports:
                lines.append(" ".join(["-A", chain, *peer, *port, *_comment(a.why), "-j", "RETURN"]))
    return lines


def _reject_lines(chain: str, what: str) -> list[str]:
    # REJECT, not DROP: a refused connect() fails at once (RST for TCP, port unreachable otherwise).
    # Ref: https://ipset.netfilter.org/iptables-extensions.man.html#lbDE
    return [" ".join(["-A", chain, "-p", "tcp", *_comment(f"{what}: refused"), "-j", "REJECT",
                      "--reject-with", "tcp-reset"]),
            " ".join(["-A", chain, *_comment(f"{what}: refused"), "-j", "REJECT",
                      "--reject-with", "icmp-port-unreachable"])]


def render(cluster: str, bridge: str, subnet: ipaddress.IPv4Network, filters: Sequence[PodFilter]) -> RuleSet:
    """The chains for ``filters`` on ``bridge``.

    The main chain lets replies (conntrack ESTABLISHED, RELATED), non-NEW packets and ICMP through, sends
    a NEW connection from an egress-isolated pod to that pod's egress chain and one to an ingress-isolated
    pod to its ingress chain; each such chain RETURNs what a rule allows and REJECTs the rest. What
    passes returns to DOCKER-USER and on to Docker's own FORWARD rules.
    Ref: https://ipset.netfilter.org/iptables-extensions.man.html#lbAO (conntrack)
    Ref: https://docs.docker.com/engine/network/packet-filtering-firewalls/#add-iptables-policies-before-dockers-rules
    """
    main = main_chain(cluster)
    chains = [main]
    body = [f"-A {main} -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN",
            f"-A {main} -m conntrack ! --ctstate NEW -j RETURN",
            # NetworkPolicy covers TCP, UDP and SCTP only; ICMP is left to the network plugin, which here lets it pass.
            f"-A {main} -p icmp -j RETURN"]
    jumps_out: list[str] = []
    jumps_in: list[str] = []
    for i, f in enumerate(filters):
        pod = f.member
        for direction, allows, flag, jumps in (("e", f.egress, "-d", jumps_out), ("i", f.ingress, "-s", jumps_in)):
            if allows is None:
                continue
            chain = f"{main}-{direction}{i}"
            if len(chain) > MAX_CHAIN:
                raise BadInput.one("pods", str(len(filters)), "too many pods for the emulator's chain names")
            chains.append(chain)
            what = f"{'egress' if direction == 'e' else 'ingress'} of {pod.name}"
            match = "-s" if direction == "e" else "-d"
            jumps.append(" ".join(["-A", main, match, f"{pod.ip}/32", *_comment(what), "-j", chain]))
            body.extend(_allow_lines(chain, allows, flag))
            body.extend(_reject_lines(chain, what))
    lines = ["*filter", *(f":{c} - [0:0]" for c in chains), *body[:3], *jumps_out, *jumps_in, *body[3:], "COMMIT"]
    jump = ("-i", bridge, "-o", bridge, "-s", str(subnet), "-d", str(subnet), "-m", "comment", "--comment",
            f"slurmpod cluster {cluster}: NetworkPolicy", "-j", main)
    return RuleSet(tuple(chains), "\n".join(lines) + "\n", jump)
