"""BlockSizes for topology/block: the default slurmpod writes, and Slurm's rules for a given list.

Rules (topology.conf(5), BlockSizes): the first size is the planning base block size and every block
must hold at least that many nodes; each later size is the base times a power of two, larger than the
one before (the man page's example: BlockSizes=30,120).
Ref: https://slurm.schedmd.com/topology.conf.html#OPT_BlockSizes
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from slurmpod.errors import BadInput, Problem


def default(block_counts: Sequence[int]) -> tuple[int, ...]:
    """Base = the smallest block, then doubling while a level still fits in the cluster."""
    if not block_counts:
        return ()
    base, total = min(block_counts), sum(block_counts)
    sizes = [base]
    while sizes[-1] * 2 <= total:
        sizes.append(sizes[-1] * 2)
    return tuple(sizes)


def validate(sizes: Sequence[int], block_counts: Sequence[int], field: str = "--block-sizes") -> tuple[int, ...]:
    """``sizes`` if they follow Slurm's rules for blocks of ``block_counts`` nodes; BadInput otherwise."""
    shown = ",".join(str(s) for s in sizes)
    problems: list[Problem] = []
    if not sizes:
        problems.append(Problem(field, shown, "needs at least the base block size"))
    elif any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes):
        problems.append(Problem(field, shown, "sizes must be positive integers"))
    else:
        base = sizes[0]
        for prior, size in itertools.pairwise(sizes):
            ratio, rest = divmod(size, base)
            if size <= prior or rest or ratio & (ratio - 1):
                problems.append(Problem(field, shown, f"{size} is not the base {base} times a power of two "
                                                      f"larger than {prior}"))
        if block_counts and base > min(block_counts):
            problems.append(Problem(field, shown, f"base {base} is larger than the smallest block "
                                                  f"({min(block_counts)} nodes)"))
    if problems:
        raise BadInput(problems)
    return tuple(sizes)
