"""What ``down`` removes from iptables: only KUBE-* chains and the jumps to them."""

from __future__ import annotations

from slurmpod_host.kube import iptables

RULES = """-P FORWARD DROP
-N DOCKER
-N KUBE-FORWARD
-N KUBE-SLURMPOD-BRIDGE
-A FORWARD -j KUBE-SLURMPOD-BRIDGE
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A FORWARD -j DOCKER
-A KUBE-FORWARD -m mark --mark 0x4000/0x4000 -j ACCEPT
"""


def test_kube_chains_and_the_jumps_to_them() -> None:
    chains, jumps = iptables.kube_chains(RULES)
    assert chains == ["KUBE-FORWARD", "KUBE-SLURMPOD-BRIDGE"]
    assert jumps == [["FORWARD", "-j", "KUBE-SLURMPOD-BRIDGE"],
                     ["FORWARD", "-m", "comment", "--comment", "kubernetes forwarding rules", "-j", "KUBE-FORWARD"]]
