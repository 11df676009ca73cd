"""The hold slurmctld puts on a job it requeued, as slurm.conf says it per Slurm version (docs/requeue.md)."""

from __future__ import annotations

from typing import Any

import pytest

from slurmpod import well_known as wk
from slurmpod.entrypoints import cluster_spec, render
from slurmpod.errors import BadInput
from slurmpod.slurm_version import SlurmVersion

V24 = SlurmVersion(24, 11)
V26 = SlurmVersion(26, 5)


def _lines(doc: dict[str, Any], version: SlurmVersion) -> list[str]:
    conf = render.slurm_conf(cluster_spec.parse(doc), "c-0", version=version).splitlines()
    return [x for x in conf if x.startswith(("AuthInfo=", "SchedulerParameters="))]


@pytest.mark.parametrize(
    ("doc", "version", "want"),
    [
        ({}, V24, ["AuthInfo=cred_expire=15", "SchedulerParameters=nohold_on_prolog_fail"]),
        ({}, V26, ["SchedulerParameters=nohold_on_prolog_fail,requeue_delay=0"]),
        ({}, SlurmVersion(25, 11), ["SchedulerParameters=nohold_on_prolog_fail,requeue_delay=0"]),
        ({}, SlurmVersion(25, 5), ["AuthInfo=cred_expire=15", "SchedulerParameters=nohold_on_prolog_fail"]),
        ({"requeue": {"fast": False}}, V24, ["SchedulerParameters=nohold_on_prolog_fail"]),
        ({"requeue": {"fast": False}}, V26, ["SchedulerParameters=nohold_on_prolog_fail"]),
        ({"requeue": None}, V26, ["SchedulerParameters=nohold_on_prolog_fail,requeue_delay=0"]),
        # The credential outlives one launch RPC at the cluster's MessageTimeout.
        ({"extraLines": ["MessageTimeout=30"]}, V24,
         ["AuthInfo=cred_expire=35", "SchedulerParameters=nohold_on_prolog_fail"]),
        ({"extraLines": ["MessageTimeout=30"]}, V26, ["SchedulerParameters=nohold_on_prolog_fail,requeue_delay=0"]),
        # A hold the spec's extraLines set is theirs, merged into one line, never repeated.
        ({"extraLines": ["AuthInfo=socket=/run/m.sock,cred_expire=40"]}, V24,
         ["AuthInfo=socket=/run/m.sock,cred_expire=40", "SchedulerParameters=nohold_on_prolog_fail"]),
        ({"extraLines": ["AuthInfo=socket=/run/m.sock"]}, V24,
         ["AuthInfo=cred_expire=15,socket=/run/m.sock", "SchedulerParameters=nohold_on_prolog_fail"]),
        ({"extraLines": ["SchedulerParameters=bf_continue,requeue_delay=9"]}, V26,
         ["SchedulerParameters=nohold_on_prolog_fail,bf_continue,requeue_delay=9"]),
        ({"extraLines": ["AuthInfo=cred_expire=30"], "requeue": {"fast": False}}, V26,
         ["AuthInfo=cred_expire=30", "SchedulerParameters=nohold_on_prolog_fail"]),
    ],
    ids=["24.11", "26.05", "25.11", "25.05", "off-24.11", "off-26.05", "null-is-default", "message-timeout-24.11",
         "message-timeout-26.05", "own-cred-expire", "own-auth-info-merged", "own-requeue-delay", "off-own-lines"],
)
def test_fast_requeue_renders_the_versions_knob(doc: dict[str, Any], version: SlurmVersion, want: list[str]) -> None:
    assert _lines(doc, version) == want


def test_the_24_11_lifetime_is_one_message_timeout_and_a_margin_above_slurms_floor() -> None:
    # Slurm 24.11 refuses cred_expire under 5 s and then silently uses 120 s (src/interfaces/cred.c).
    assert wk.FAST_CRED_EXPIRE_S == wk.SLURM_DEFAULT_MESSAGE_TIMEOUT_S + wk.CRED_MARGIN_S >= 5


def test_spec_defaults_to_fast() -> None:
    assert cluster_spec.parse({}).requeue.fast is True


@pytest.mark.parametrize(("doc", "field", "value"), [
    ({"requeue": {"fast": "yes"}}, "requeue.fast", "yes"),
    ({"requeue": {"fast": 1}}, "requeue.fast", "1"),
    ({"requeue": {"fst": True}}, "requeue.fst", "True"),
    ({"requeue": ["fast"]}, "requeue", "fast"),
], ids=["string", "int", "unknown-key", "not-a-mapping"])
def test_bad_values_name_field_and_value(doc: dict[str, Any], field: str, value: str) -> None:
    with pytest.raises(BadInput) as err:
        cluster_spec.parse(doc)
    problems = [(p.field, p.value) for p in err.value.problems]
    assert any(f == field and value in str(v) for f, v in problems), problems
