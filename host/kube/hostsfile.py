"""The DNS records of the Kubernetes DNS specification, as a hosts file dnsmasq serves.

Pure: Services and Endpoints as the API lists them -> hosts-file text.
- a Service with a ClusterIP: ``<svc>.<ns>.svc.<domain>`` -> the ClusterIP;
- a headless Service: ``<svc>.<ns>.svc.<domain>`` -> every endpoint address, and each address that has
  a hostname (a StatefulSet's pod) ``<hostname>.<svc>.<ns>.svc.<domain>`` -> its address. The
  endpoints controller puts not-ready addresses into ``addresses`` when the Service sets
  publishNotReadyAddresses, which is what the chart's headless Service relies on.
Ref: https://github.com/kubernetes/dns/blob/master/docs/specification.md#24---records-for-a-service-with-clusterip
Ref: https://github.com/kubernetes/dns/blob/master/docs/specification.md#25---records-for-a-headless-service
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def records(services: Iterable[Mapping[str, Any]], endpoints: Iterable[Mapping[str, Any]],
            domain: str) -> list[tuple[str, str]]:
    """(address, name) pairs, sorted, one per record."""
    by_key = {(e["metadata"]["namespace"], e["metadata"]["name"]): e for e in endpoints}
    out: set[tuple[str, str]] = set()
    for svc in services:
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        fqdn = f"{name}.{ns}.svc.{domain}"
        cluster_ip = (svc.get("spec") or {}).get("clusterIP") or ""
        if cluster_ip and cluster_ip != "None":
            out.add((cluster_ip, fqdn))
            continue
        for subset in (by_key.get((ns, name)) or {}).get("subsets") or []:
            for address in subset.get("addresses") or []:
                ip = address.get("ip", "")
                if not ip:
                    continue
                out.add((ip, fqdn))
                if address.get("hostname"):
                    out.add((ip, f"{address['hostname']}.{fqdn}"))
    return sorted(out)


def render(pairs: Iterable[tuple[str, str]]) -> str:
    return "".join(f"{ip} {name}\n" for ip, name in pairs)
