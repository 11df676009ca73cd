"""Remove the KUBE-* chains kube-proxy made. ``kube-proxy --cleanup`` (1.20) removes its service rules
but leaves its canary chains and KUBE-MARK-DROP/KUBE-MARK-MASQ; this removes what is left, jumps to
those chains from other chains first. Only chains named KUBE-* are touched.
Ref: https://kubernetes.io/docs/reference/networking/virtual-ips/#proxy-mode-iptables
"""

from __future__ import annotations

import shlex
import subprocess

TIMEOUT_S = 30
TOOLS = ("iptables", "ip6tables")
TABLES = ("filter", "nat", "mangle", "raw")
PREFIX = "KUBE-"


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)


def kube_chains(rules: str) -> tuple[list[str], list[list[str]]]:
    """Pure: from `iptables -S` output, the KUBE-* chains and the rules elsewhere that jump to one."""
    chains, jumps = [], []
    for line in rules.splitlines():
        words = shlex.split(line)
        if words[:1] == ["-N"] and words[1].startswith(PREFIX):
            chains.append(words[1])
        elif words[:1] == ["-A"] and not words[1].startswith(PREFIX) and any(
                w.startswith(PREFIX) for w in words[2:]):
            jumps.append(words[1:])
    return chains, jumps


def remove_kube_chains() -> None:
    for tool in TOOLS:
        for table in TABLES:
            listed = _run([tool, "-w", "-t", table, "-S"])
            if listed.returncode != 0:
                continue
            chains, jumps = kube_chains(listed.stdout)
            for rule in jumps:
                _run([tool, "-w", "-t", table, "-D", *rule])
            for chain in chains:
                _run([tool, "-w", "-t", table, "-F", chain])
            for chain in chains:
                _run([tool, "-w", "-t", table, "-X", chain])


BRIDGE_CHAIN = "KUBE-SLURMPOD-BRIDGE"


def allow_bridge(bridge: str) -> None:
    """Let pods on ``bridge`` talk to each other. With br_netfilter loaded (Docker loads it), bridged
    frames traverse the FORWARD chain, whose policy Docker sets to DROP; kube-proxy's KUBE-FORWARD accepts
    only established flows. The chain is named KUBE-* so ``remove_kube_chains`` takes it away again.
    Ref: https://docs.docker.com/engine/network/packet-filtering-firewalls/#docker-on-a-router"""
    if _run(["iptables", "-w", "-t", "filter", "-N", BRIDGE_CHAIN]).returncode == 0:
        _run(["iptables", "-w", "-t", "filter", "-A", BRIDGE_CHAIN, "-i", bridge, "-o", bridge, "-j", "ACCEPT"])
    if _run(["iptables", "-w", "-t", "filter", "-C", "FORWARD", "-j", BRIDGE_CHAIN]).returncode != 0:
        _run(["iptables", "-w", "-t", "filter", "-I", "FORWARD", "1", "-j", BRIDGE_CHAIN])
