"""Access by account holds only where Slurm enforces accounts: elsewhere --account is whatever the user types."""

from __future__ import annotations

import pytest
import yaml
from policykit import default_policy_text

from slurmpod.errors import BadInput
from slurmpod.policy import decide, loader
from slurmpod.policy.decision import Verdict
from slurmpod.policy.request import JobRequest
from slurmpod.slurm_plugins import bridge

BY_ACCOUNT = """
tiers:
  - {name: high, partitions: [high], access: {accounts: [inference]}}
"""


def test_a_policy_naming_accounts_is_refused_where_accounts_are_not_enforced() -> None:
    with pytest.raises(BadInput) as err:
        loader.parse(yaml.safe_load(BY_ACCOUNT), loader.Path("."), accounts_enforced=False)
    assert "tiers[0].access.accounts" in str(err.value) and "acceptUnverifiedAccounts" in str(err.value)


def test_opt_out_by_account_is_refused_too() -> None:
    doc = {"topology": {"plugin": "block", "groupSize": 4, "optOut": {"accounts": ["ops"]}}}
    with pytest.raises(BadInput, match=r"topology\.optOut\.accounts"):
        loader.parse(doc, loader.Path("."), accounts_enforced=False)


def test_a_policy_may_say_it_accepts_unverified_accounts() -> None:
    doc = {**yaml.safe_load(BY_ACCOUNT), "acceptUnverifiedAccounts": True}
    assert loader.parse(doc, loader.Path("."), accounts_enforced=False).tiers[0].access.accounts == {"inference"}


def test_account_inference_on_the_default_cluster_opens_no_tier() -> None:
    """The shipped policy loads where accounts are not enforced, and --account=inference gets no one into high."""
    policy = loader.parse(yaml.safe_load(default_policy_text()), loader.Path("."), accounts_enforced=False)
    d = decide.decide(policy, JobRequest(uid=2000, user="eve", partition="high", account="inference"))
    assert d.verdict is Verdict.REJECT and "may not use the high tier" in d.message


@pytest.mark.parametrize(("conf", "enforced"), [
    ("", False),
    ("AccountingStorageType=accounting_storage/slurmdbd\n", False),
    ("AccountingStorageEnforce=associations,limits,qos\n", True),
    ("accountingstorageenforce = Limits\n", True),
    ("AccountingStorageEnforce=nojobs,nosteps\n", False),
    ("#AccountingStorageEnforce=associations\n", False),
    ("AccountingStorageEnforce=associations\nAccountingStorageEnforce=nojobs\n", False),
], ids=["empty", "storage-only", "full", "limits-implies", "nojobs", "commented", "last-wins"])
def test_accounts_enforced_is_read_from_slurm_conf(conf: str, enforced: bool) -> None:
    assert bridge.accounts_enforced_in(conf) is enforced


def test_an_unreadable_slurm_conf_enforces_nothing(tmp_path: loader.Path) -> None:
    assert bridge.accounts_enforced(tmp_path / "missing.conf") is False
