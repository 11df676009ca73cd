"""`python -m slurmpod_host.kube.dnsfeed KUBECONFIG HOSTS_FILE`: keep dnsmasq's hosts file current.

Debian packages no CoreDNS, and dnsmasq (packaged) serves a hosts directory it re-reads on every change.
This loop lists Services and Endpoints every POLL_S and writes the records (hostsfile.py) when they
change, by rename, so dnsmasq never reads half a file. A pod's name resolves at most about POLL_S after
the endpoints controller lists its address. Runs as a daemon of `slurmpod k8s up`.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

from slurmpod.errors import TransientError
from slurmpod_host.kube import hostsfile
from slurmpod_host.kube.api import Client
from slurmpod_host.kube.layout import CLUSTER_DOMAIN

POLL_S = 0.5
log = logging.getLogger(__name__)


def once(client: Client, out: Path, last: str | None) -> str:
    services = client.get("/api/v1/services")["items"]
    endpoints = client.get("/api/v1/endpoints")["items"]
    text = hostsfile.render(hostsfile.records(services, endpoints, CLUSTER_DOMAIN))
    if text != last:
        tmp = out.parent / f".{out.name}.tmp"  # a dot file in the same dir: dnsmasq skips it
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out)
    return text


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, format="%(asctime)s dnsfeed %(message)s")
    client = Client.from_kubeconfig(Path(args[0]))
    out = Path(args[1])
    last: str | None = None
    while True:
        try:
            last = once(client, out, last)
        except (TransientError, KeyError, ValueError) as exc:
            log.warning("list failed: %s", exc)
        time.sleep(POLL_S)


if __name__ == "__main__":
    sys.exit(main())
