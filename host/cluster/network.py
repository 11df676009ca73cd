"""The cluster's bridge network: a /24 chosen so that it overlaps nothing on this host.

A fixed subnet lets the emulator give every pod its IP before start (status.podIP in the env);
Docker accepts a user-chosen container IP only on networks created with a user-chosen subnet.
Ref: https://docs.docker.com/engine/network/#ip-address-and-hostname
"""

from __future__ import annotations

import ipaddress
import zlib
from collections.abc import Iterable
from pathlib import Path

# Outside Docker's default address pools (172.17.0.0/12 and 192.168.0.0/16 in /20s).
# Ref: https://docs.docker.com/reference/cli/dockerd/#default-address-pools
POOL = ipaddress.IPv4Network("10.213.0.0/16")
PREFIX = 24


def choose_subnet(name: str, taken: Iterable[ipaddress.IPv4Network]) -> ipaddress.IPv4Network:
    """A /24 of POOL overlapping nothing in ``taken``; the cluster name picks where the search starts."""
    used = list(taken)
    candidates: list[ipaddress.IPv4Network] = list(POOL.subnets(new_prefix=PREFIX))
    start = zlib.crc32(name.encode()) % len(candidates)
    for offset in range(len(candidates)):
        subnet = candidates[(start + offset) % len(candidates)]
        if not any(subnet.overlaps(t) for t in used):
            return subnet
    raise RuntimeError(f"no free /{PREFIX} left in {POOL}")


def parse_proc_route(text: str) -> list[ipaddress.IPv4Network]:
    """Destinations of the host's IPv4 routes (/proc/net/route: little-endian hex), default route left out.

    Ref: https://man7.org/linux/man-pages/man5/proc_net.5.html
    """
    nets = []
    for line in text.splitlines()[1:]:
        cols = line.split()
        if len(cols) < 8:
            continue
        dest = ipaddress.IPv4Address(int(cols[1], 16).to_bytes(4, "little"))
        mask = ipaddress.IPv4Address(int(cols[7], 16).to_bytes(4, "little"))
        net = ipaddress.IPv4Network(f"{dest}/{mask}", strict=False)
        if net.prefixlen > 0:
            nets.append(net)
    return nets


def host_routes(path: Path = Path("/proc/net/route")) -> list[ipaddress.IPv4Network]:
    try:
        return parse_proc_route(path.read_text(encoding="ascii"))
    except OSError:
        return []
