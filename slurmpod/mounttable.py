"""The mount table of this process (/proc/self/mounts): read at pod start and by the mounts check."""

from __future__ import annotations


def mount_points(text: str) -> frozenset[str]:
    """Mount points from /proc/self/mounts (octal escapes as the kernel writes them). Ref: proc(5)"""
    points = set()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2:
            points.add(fields[1].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\"))
    return frozenset(points)
