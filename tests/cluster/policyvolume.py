"""The controller's mounted `policy` ConfigMap in the emulator, updated the way the kubelet updates it."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from clusterkit import NAME, Session

from slurmpod_host.cluster import well_known as host_wk

POLICY_VOLUME = "policy"
# A tier opened by account: refused at load where Slurm does not check --account (the default cluster),
# trusted where it checks it against the user's associations (the accounting cluster).
BY_ACCOUNT = """
tiers:
  - name: high
    partitions: [high]
    access: {accounts: [inference]}
  - name: normal
    partitions: [main]
defaultTier: normal
"""

_STAMPS = itertools.count(1)


class PolicyVolume:
    """The controller's mounted `policy` ConfigMap, updated in kubelet's atomic-writer way."""

    def __init__(self, session: Session, cluster: str = NAME) -> None:
        """``cluster``: the emulated cluster's name (the session's own by default)."""
        self.base = Path(session.env[host_wk.ENV_STATE_DIR]) / cluster / "pods" / session.cluster.controller \
            / "volumes" / POLICY_VOLUME
        assert (self.base / "..data").is_symlink(), f"no `{POLICY_VOLUME}` volume on the controller: {self.base}"
        self.original = os.readlink(self.base / "..data")

    def publish(self, files: dict[str, str]) -> None:
        stamp = f"..test_{os.getpid()}_{next(_STAMPS)}"  # unique across tests: each gets a new PolicyVolume
        (self.base / stamp).mkdir(mode=0o755)
        for name, text in files.items():
            (self.base / stamp / name).write_text(text, encoding="utf-8")
            (self.base / stamp / name).chmod(0o644)
            if not (self.base / name).is_symlink():
                (self.base / name).symlink_to(f"..data/{name}")
        tmp = self.base / "..data_tmp"
        tmp.symlink_to(stamp)
        tmp.replace(self.base / "..data")  # rename(2): the swap kubelet makes

    def restore(self) -> None:
        tmp = self.base / "..data_tmp"
        tmp.symlink_to(self.original)
        tmp.replace(self.base / "..data")
