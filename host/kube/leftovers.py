"""What a local cluster can leave on the machine, found the same way by ``down`` and by the tests.

Processes (the built binaries, and etcd, dnsmasq and the DNS feed by their state-dir arguments), the
kubelet's containers (dockershim's label), the bridge, mounts under the state dir (the kubelet's tmpfs
for Secret volumes), iptables rules (kube-proxy's KUBE-* chains) and the state dir itself.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurmpod_host.kube.layout import DOCKERSHIM_TYPE_LABEL, Layout

IPTABLES_TIMEOUT_S = 30


@dataclass(frozen=True, slots=True)
class Leftovers:
    processes: tuple[str, ...]
    containers: tuple[str, ...]
    bridge: bool
    mounts: tuple[str, ...]
    iptables: tuple[str, ...]
    state_dir: bool

    @property
    def empty(self) -> bool:
        return not (self.processes or self.containers or self.bridge or self.mounts or self.iptables
                    or self.state_dir)


def processes(layout: Layout) -> list[tuple[int, str]]:
    """(pid, command line) of every process that belongs to the local cluster."""
    bin_dir = str(layout.cache / "bin") + "/"
    marks = (str(layout.state), "slurmpod_host.kube.dnsfeed")
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            exe = os.readlink(f"/proc/{entry.name}/exe")
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if exe.startswith(bin_dir) or (any(m in cmdline for m in marks) and "pytest" not in cmdline):
            out.append((int(entry.name), cmdline.strip()))
    return out


def containers(client: Any) -> list[str]:
    return sorted(c.name for c in client.containers.list(all=True, filters={"label": DOCKERSHIM_TYPE_LABEL}))


def mounts(layout: Layout) -> list[str]:
    root = str(layout.state)
    found = []
    for line in Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines():
        point = line.split(" ")[4].replace("\\040", " ")
        if point == root or point.startswith(root + "/"):
            found.append(point)
    return found


def iptables_rules(layout: Layout) -> list[str]:
    out = []
    for tool in ("iptables-save", "ip6tables-save"):
        try:
            text = subprocess.run([tool], capture_output=True, text=True, timeout=IPTABLES_TIMEOUT_S,
                                  check=False).stdout
        except FileNotFoundError:
            continue
        out += [line for line in text.splitlines()
                if "KUBE-" in line or layout.net.bridge in line or layout.net.pod_cidr in line]
    return out


def find(layout: Layout, client: Any) -> Leftovers:
    return Leftovers(
        processes=tuple(cmd for _, cmd in processes(layout)),
        containers=tuple(containers(client)),
        bridge=Path(f"/sys/class/net/{layout.net.bridge}").exists(),
        mounts=tuple(mounts(layout)),
        iptables=tuple(iptables_rules(layout)),
        state_dir=layout.state.exists(),
    )
