"""The plugin bench's pure part: it times the policy the chart ships."""

from __future__ import annotations

import paths
from policykit import default_policy_text

from slurmpod_host.bench import plugin


def test_the_bench_uses_the_shipped_policy() -> None:
    assert plugin.default_policy(paths.REPO) == default_policy_text()
