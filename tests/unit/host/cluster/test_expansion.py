"""Kubernetes $(VAR) expansion, cases from kubernetes third_party/forked/golang/expansion tests."""

from __future__ import annotations

import pytest

from slurmpod_host.cluster.expansion import expand

ENV = {"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_REF": "$(VAR_A)", "VAR_EMPTY": ""}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$(VAR_A)", "A"),
        ("___$(VAR_B)___", "___B___"),
        ("$(VAR_A)-$(VAR_A)", "A-A"),
        ("$(VAR_A)$(VAR_B)$(VAR_C)", "ABC"),
        ("f000-$$VAR_A", "f000-$VAR_A"),  # $$ is an escaped $
        ("foo\\$(VAR_C)bar", "foo\\Cbar"),
        ("foo\\\\$(VAR_C)bar", "foo\\\\Cbar"),
        ("$$(VAR_A)", "$(VAR_A)"),
        ("$$$$(VAR_A)", "$$(VAR_A)"),
        ("$$$(VAR_A)", "$A"),
        ("$(VAR_REF)", "$(VAR_A)"),  # no recursion
        ("$(VAR_EMPTY)", ""),
        ("$(UNDEFINED)", "$(UNDEFINED)"),  # unknown references stay as written
        ("$()", "$()"),
        ("$(VAR_A", "$(VAR_A"),  # incomplete reference
        ("$VAR_A", "$VAR_A"),
        ("$", "$"),
        ("foo$", "foo$"),
        ("$(VAR_A)$", "A$"),
        ("$?_boo_$!", "$?_boo_$!"),
        ("", ""),
        ("$(SLURMPOD_CLUSTER_NAME)-controller-0", "$(SLURMPOD_CLUSTER_NAME)-controller-0"),
    ],
    ids=repr,
)
def test_expand(text: str, expected: str) -> None:
    assert expand(text, ENV) == expected


def test_expand_controller_name() -> None:
    env = {"SLURMPOD_CLUSTER_NAME": "demo"}
    assert expand("$(SLURMPOD_CLUSTER_NAME)-controller-0", env) == "demo-controller-0"
