"""Publish a cluster's Service ports on the host's loopback with iptables NAT rules, and remove them again.

Docker publishes no port of a container on an internal network, so the emulator does what kube-proxy does
for a node port reached at 127.0.0.1: a DNAT rule in the nat table's OUTPUT chain sends 127.0.0.1:HOST_PORT
to the pod, a SNAT rule in POSTROUTING gives the packet the bridge's gateway as source so that the pod's
answer comes back to the host, and route_localnet=1 on the cluster's bridge lets a packet from 127.0.0.1
leave through it (kube-proxy sets the same sysctl). The bridge goes with the cluster, and so does the sysctl.
Ref: https://kubernetes.io/docs/reference/command-line-tools-reference/kube-proxy/ (--nodeport-addresses)
Ref: https://docs.kernel.org/networking/ip-sysctl.html (route_localnet)
"""

from __future__ import annotations

import hashlib
import re
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurmpod.errors import PermanentError
from slurmpod_host.cluster import netenforce, podspec
from slurmpod_host.cluster.services import LOOPBACK, Published

TIMEOUT_S = 30
CHAIN_PREFIX = "SLURMPOD-SVC-"  # the DNAT chain; its SNAT twin ends in -S
HOOKS = (("OUTPUT", ""), ("POSTROUTING", "-S"))  # nat chain -> the suffix of ours it jumps to
_DPORT = re.compile(r"--dport (\d+)")


@dataclass(frozen=True, slots=True)
class Rules:
    """What `iptables-restore --noflush` loads for one cluster, and the jumps into it."""

    restore: str
    jumps: tuple[tuple[str, str], ...]  # (nat chain, our chain)


def chain(cluster: str) -> str:
    """The cluster's DNAT chain: the prefix and a digest of its name (a name may be 63 characters; iptables
    allows 28)."""
    return f"{CHAIN_PREFIX}{hashlib.sha256(cluster.encode()).hexdigest()[:8]}"


def render(cluster: str, gateway: str, published: Sequence[Published]) -> Rules:
    """Pure: the nat rules that publish ``published`` (declaring a chain in a restore file flushes it)."""
    dnat, snat = chain(cluster), f"{chain(cluster)}-S"
    lines = ["*nat", f":{dnat} - [0:0]", f":{snat} - [0:0]"]
    for p in published:
        lines.append(f"-A {dnat} -d {LOOPBACK}/32 -p tcp -m tcp --dport {p.host_port} "
                     f"-j DNAT --to-destination {p.pod_ip}:{p.target_port}")
        lines.append(f"-A {snat} -s {LOOPBACK}/32 -d {p.pod_ip}/32 -p tcp -m tcp --dport {p.target_port} "
                     f"-j SNAT --to-source {gateway}")
    lines.append("COMMIT")
    return Rules("\n".join(lines) + "\n", tuple((hook, f"{dnat}{suffix}") for hook, suffix in HOOKS))


def taken_ports(listing: str) -> set[int]:
    """Pure: from `iptables -t nat -S`, the host ports every cluster's rules publish."""
    out: set[int] = set()
    for line in listing.splitlines():
        words = line.split()
        if words[:1] == ["-A"] and len(words) > 1 and words[1].startswith(CHAIN_PREFIX) \
                and not words[1].endswith("-S"):
            out.update(int(m) for m in _DPORT.findall(line))
    return out


def _run(argv: Sequence[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)


def _listing() -> str:
    try:
        listed = _run(["iptables", "-w", "-t", "nat", "-S"])
    except OSError as exc:
        raise PermanentError(f"publishing Service ports needs iptables: {exc}") from None
    if listed.returncode != 0:
        raise PermanentError(f"iptables -t nat -S failed: {listed.stderr.strip()}")
    return listed.stdout


def taken() -> set[int]:
    """The host ports published by the clusters of this host now."""
    return taken_ports(_listing())


def apply(cluster: str, bridge: str, gateway: str, published: Sequence[Published],
          sysctl_root: Path = Path("/proc/sys/net/ipv4/conf")) -> None:
    """Load the rules for ``published`` in one transaction, jump to them first from OUTPUT and POSTROUTING,
    and let the bridge route packets from the loopback."""
    if not published:
        return
    try:
        (sysctl_root / bridge / "route_localnet").write_text("1\n", encoding="ascii")
    except OSError as exc:
        raise PermanentError(f"publishing Service ports: cannot set route_localnet on {bridge}: {exc}") from None
    rules = render(cluster, gateway, published)
    done = _run(["iptables-restore", "-w", "--noflush"], stdin=rules.restore)
    if done.returncode != 0:
        raise PermanentError(f"iptables-restore refused the published Service ports: {done.stderr.strip()}")
    for hook, ours in rules.jumps:
        if _run(["iptables", "-w", "-t", "nat", "-C", hook, "-j", ours]).returncode != 0:
            done = _run(["iptables", "-w", "-t", "nat", "-I", hook, "1", "-j", ours])
            if done.returncode != 0:
                raise PermanentError(f"iptables refused the {hook} jump: {done.stderr.strip()}")


def apply_cluster(client: Any, params: podspec.ClusterParams) -> None:
    """``apply`` for the ports ``params`` publishes, on its cluster's bridge."""
    apply(params.name, netenforce.bridge_name(client.api.inspect_network(params.network)), params.gateway,
          params.published)


def remove(cluster: str) -> list[str]:
    """Delete the jumps into ``cluster``'s chains, then the chains; what was removed. Idempotent, and
    nothing where iptables cannot run."""
    try:
        listing = _listing()
    except PermanentError:
        return []
    dnat = chain(cluster)
    ours = {dnat, f"{dnat}-S"}
    removed = []
    for line in listing.splitlines():
        words = shlex.split(line)
        if words[:1] == ["-A"] and len(words) > 3 and words[1] not in ours and words[-2:-1] == ["-j"] \
                and words[-1] in ours and _run(["iptables", "-w", "-t", "nat", "-D", *words[1:]]).returncode == 0:
            removed.append(f"iptables nat rule in {words[1]}")
    present = {w.split()[1] for w in listing.splitlines() if w.startswith("-N ")} & ours
    for name in sorted(present):
        _run(["iptables", "-w", "-t", "nat", "-F", name])
        if _run(["iptables", "-w", "-t", "nat", "-X", name]).returncode == 0:
            removed.append(f"iptables nat chain {name}")
    return removed
