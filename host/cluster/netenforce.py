"""Enforce the applied NetworkPolicies on the emulator's bridge with iptables (`cluster up
--enforce-network-policy`), and remove the rules again.

Pods are containers on one Linux bridge. With br_netfilter loaded and net.bridge.bridge-nf-call-iptables=1
(Docker loads the module when it sets up its bridge driver; the kernel's default for the sysctl is 1),
frames between two ports of a bridge pass the host's FORWARD chain, whose first rule jumps to DOCKER-USER:
there one rule per cluster, matching its bridge and subnet, jumps to the chains netpolicy.render makes.
Traffic to and from the host (the gateway) and Docker's DNS at 127.0.0.11 in each pod's namespace never
cross FORWARD, as kubelet's probes and the node's own traffic are exempt from NetworkPolicy.
The host's `iptables` must be the backend Docker uses (Debian: iptables-nft for both, via alternatives).
Ref: https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/network-plugins/#network-plugin-requirements
(bridge-nf-call-iptables), https://docs.docker.com/engine/network/packet-filtering-firewalls/
"""

from __future__ import annotations

import logging
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurmpod.errors import PermanentError
from slurmpod_host.cluster import netpolicy, podspec
from slurmpod_host.cluster.manifests import Bundle

log = logging.getLogger(__name__)

TIMEOUT_S = 30
DOCKER_USER = "DOCKER-USER"
BRIDGE_NF = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
# Docker names a user-defined bridge br-<first 12 hex digits of the network id> unless this option names it.
# Ref: https://docs.docker.com/engine/network/drivers/bridge/#options
BRIDGE_NAME_OPTION = "com.docker.network.bridge.name"


@dataclass(frozen=True, slots=True)
class Found:
    """This cluster's rules in `iptables -S` output."""

    chains: tuple[str, ...]
    jumps: tuple[tuple[str, ...], ...]  # rules of other chains (DOCKER-USER) that jump to one, as after -A

    @property
    def empty(self) -> bool:
        return not (self.chains or self.jumps)


def _run(argv: Sequence[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)


def bridge_name(network_attrs: dict[str, Any]) -> str:
    options = network_attrs.get("Options") or {}
    return str(options.get(BRIDGE_NAME_OPTION) or f"br-{str(network_attrs['Id'])[:12]}")


def find_rules(listing: str, cluster: str) -> Found:
    """Pure: from `iptables -S` (filter table) output, the chains of ``cluster`` and the jumps into them."""
    main = netpolicy.main_chain(cluster)
    chains, jumps = [], []
    for line in listing.splitlines():
        words = shlex.split(line)
        if words[:1] == ["-N"] and len(words) > 1 and (words[1] == main or words[1].startswith(f"{main}-")):
            chains.append(words[1])
        elif words[:1] == ["-A"] and len(words) > 1 and not words[1].startswith(main) and main in words[2:]:
            jumps.append(tuple(words[1:]))
    return Found(tuple(chains), tuple(jumps))


def check_host() -> None:
    """PermanentError naming what this host lacks for enforcement; nothing when it has it all."""
    try:
        value = BRIDGE_NF.read_text(encoding="ascii").strip()
    except OSError:
        value = "absent (br_netfilter not loaded)"
    if value != "1":
        raise PermanentError(f"--enforce-network-policy: bridged traffic bypasses iptables here ({BRIDGE_NF}: "
                             f"{value}); load br_netfilter and set net.bridge.bridge-nf-call-iptables=1")
    try:
        listed = _run(["iptables", "-w", "-S", DOCKER_USER])
    except OSError as exc:
        raise PermanentError(f"--enforce-network-policy: cannot run iptables: {exc}") from None
    if listed.returncode != 0:
        version = _run(["iptables", "-V"]).stdout.strip()
        raise PermanentError(f"--enforce-network-policy: no {DOCKER_USER} chain in `iptables` ({version}): "
                             f"{listed.stderr.strip()}; is Docker running with the other iptables backend "
                             "(legacy or nft)?")


def rule_set(client: Any, params: podspec.ClusterParams, bundle: Bundle,
             members: Sequence[netpolicy.Member]) -> netpolicy.RuleSet:
    policies = netpolicy.parse(bundle, params.name)
    filters = netpolicy.resolve(policies, members)
    bridge = bridge_name(client.api.inspect_network(params.network))
    return netpolicy.render(params.name, bridge, params.subnet, filters)


def apply(rules: netpolicy.RuleSet) -> None:
    """Load ``rules`` in one iptables-restore transaction (declaring a chain flushes it), then make sure
    DOCKER-USER jumps to them, before Docker's own rules."""
    done = _run(["iptables-restore", "-w", "--noflush"], stdin=rules.restore)
    if done.returncode != 0:
        raise PermanentError(f"iptables-restore refused the NetworkPolicy rules: {done.stderr.strip()}")
    if _run(["iptables", "-w", "-C", DOCKER_USER, *rules.jump]).returncode != 0:
        done = _run(["iptables", "-w", "-I", DOCKER_USER, "1", *rules.jump])
        if done.returncode != 0:
            raise PermanentError(f"iptables refused the {DOCKER_USER} jump: {done.stderr.strip()}")
    log.info("NetworkPolicy rules loaded", extra={"ctx": {"chains": len(rules.chains)}})


def enforce(client: Any, params: podspec.ClusterParams, bundle: Bundle,
            members: Sequence[netpolicy.Member]) -> netpolicy.RuleSet:
    """Check the host, then load the rules for ``members``; what was loaded."""
    check_host()
    rules = rule_set(client, params, bundle, members)
    apply(rules)
    return rules


def remove(cluster: str) -> list[str]:
    """Delete the jumps into ``cluster``'s chains, then the chains; what was removed. Idempotent, and
    nothing where iptables cannot run (a host that never enforced)."""
    try:
        listed = _run(["iptables", "-w", "-S"])
    except OSError:
        return []
    if listed.returncode != 0:
        log.debug("iptables -S failed", extra={"ctx": {"stderr": listed.stderr.strip()}})
        return []
    found = find_rules(listed.stdout, cluster)
    removed = []
    for rule in found.jumps:
        if _run(["iptables", "-w", "-D", *rule]).returncode == 0:
            removed.append(f"iptables rule in {rule[0]}")
    for chain in found.chains:
        _run(["iptables", "-w", "-F", chain])
    for chain in found.chains:
        if _run(["iptables", "-w", "-X", chain]).returncode == 0:
            removed.append(f"iptables chain {chain}")
    return removed
