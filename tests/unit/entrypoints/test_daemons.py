"""reconcile-node's pure parts: reading back the --conf string and spotting a stale node record."""

from __future__ import annotations

import pytest

from slurmpod.entrypoints.daemons import parse_conf, stale_fields
from slurmpod.nodestate import NodeState

CONF = "CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105 " \
       "CoreSpecCount=1 MemSpecLimit=23081 Features=workers,ib"


def _state(**kw: object) -> NodeState:
    base: dict[str, object] = dict(name="w-0", base="IDLE", flags=frozenset({"DYNAMIC_NORM"}), reason="", cpus=2,
                                   real_memory=24105, specialized_cores=1, specialized_memory=23081,
                                   features=("workers", "ib"))
    base.update(kw)
    return NodeState(**base)  # type: ignore[arg-type]


def test_parse_conf_reads_every_pair() -> None:
    conf = parse_conf(CONF)
    assert conf["CoreSpecCount"] == "1"
    assert conf["Features"] == "workers,ib"
    assert len(conf) == 9


def test_matching_record_is_not_stale() -> None:
    assert stale_fields(_state(), parse_conf(CONF)) == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"specialized_cores": 0}, "CoreSpecCount"),
        ({"specialized_memory": 22000}, "MemSpecLimit"),
        ({"real_memory": 1000}, "RealMemory"),
        ({"cpus": 4}, "CPUs"),
        ({"features": ("workers",)}, "Features"),
    ],
    ids=["core-spec", "mem-spec", "real-memory", "cpus", "features"],
)
def test_each_kept_value_is_reported(change: dict[str, object], field: str) -> None:
    stale = stale_fields(_state(**change), parse_conf(CONF))
    assert len(stale) == 1 and stale[0].startswith(field + "="), stale


def test_absent_spec_keys_mean_zero() -> None:
    conf = parse_conf("CPUs=2 RealMemory=24105 Features=workers,ib")
    assert stale_fields(_state(specialized_cores=0, specialized_memory=0), conf) == []
    assert stale_fields(_state(), conf) != []


def test_parse_conf_keeps_a_quoted_value_whole() -> None:
    conf = parse_conf('CPUs=2 Reason="gpu 3 lost" Features=workers')
    assert conf == {"CPUs": "2", "Reason": '"gpu 3 lost"', "Features": "workers"}
