"""The downward API as kubelet serves it: fieldRef paths and the labels/annotations file format.

Ref: https://kubernetes.io/docs/concepts/workloads/pods/downward-api/
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from slurmpod import kubelet_format

_MAP_KEY = re.compile(r"metadata\.(?P<map>labels|annotations)\['(?P<key>[^']+)'\]")


@dataclass(frozen=True, slots=True)
class PodMeta:
    """The pod fields a fieldRef can name."""

    name: str
    namespace: str
    uid: str
    node_name: str
    pod_ip: str
    host_ip: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]


# Which fieldRef paths each consumer accepts.
# Ref: https://kubernetes.io/docs/concepts/workloads/pods/downward-api/#downwardapi-fieldRef
ENV_ONLY = frozenset({"spec.nodeName", "status.podIP", "status.hostIP"})
EITHER = frozenset({"metadata.name", "metadata.namespace", "metadata.uid"})
VOLUME_ONLY = frozenset({"metadata.labels", "metadata.annotations"})


def field_value(meta: PodMeta, path: str, *, for_volume: bool) -> str | None:
    """The value kubelet gives for ``path``, or None when it does not serve that path there."""
    simple = {
        "metadata.name": meta.name,
        "metadata.namespace": meta.namespace,
        "metadata.uid": meta.uid,
        "spec.nodeName": meta.node_name,
        "status.podIP": meta.pod_ip,
        "status.hostIP": meta.host_ip,
    }
    allowed = EITHER | (VOLUME_ONLY if for_volume else ENV_ONLY)
    if path in allowed and path in simple:
        return simple[path]
    if for_volume and path == "metadata.labels":
        return format_map(meta.labels)
    if for_volume and path == "metadata.annotations":
        return format_map(meta.annotations)
    m = _MAP_KEY.fullmatch(path)
    if m is not None:
        source = meta.labels if m["map"] == "labels" else meta.annotations
        return source.get(m["key"], "")  # a missing key reads as "" (fieldpath.ExtractFieldPathAsString)
    return None


def format_map(mapping: Mapping[str, str]) -> str:
    """kubelet's fieldpath.FormatMap: `key=%q` lines sorted by key, the last newline trimmed.

    Ref: https://github.com/kubernetes/kubernetes/blob/master/pkg/fieldpath/fieldpath.go (FormatMap)
    """
    return kubelet_format.render(dict(mapping)).removesuffix("\n")
