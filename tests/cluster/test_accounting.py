"""Accounting (slurmdbd + MariaDB) and REST (slurmrestd, JWT) end to end, on both flavors.

This module runs its own cluster (`spacct`, one worker) from deploy/kubernetes/accounting, the chart's
render with `accounting.enabled` and `restapi.enabled`: a db pod (MariaDB on its own volume), slurmdbd,
the controller wired to it (the chart's QoS `low` and `urgent`, urgent preempting low by preempt/qos, and
its accounts `research` and `inference`, enforced: AccountingStorageEnforce=associations,limits,qos), and
slurmrestd. It is removed at the end, also when a test fails. The fixture waits until slurmctld takes
jobs under every association the chart names, since the controller's accounting-setup makes them after
cluster up returns.
Ref: https://slurm.schedmd.com/accounting.html, https://slurm.schedmd.com/preempt.html,
https://slurm.schedmd.com/rest.html
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusterkit import Session, job, lift_requeue_hold, own_cluster, wait_for
from policyvolume import BY_ACCOUNT, PolicyVolume

from slurmpod import well_known as wk

pytestmark = [pytest.mark.docker, pytest.mark.cluster, pytest.mark.smoke]

NAME = "spacct"
WORKERS = 1
MANIFESTS = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "accounting"
# Bounds, not timings (printed): slurmctld sends a finished job to slurmdbd at once, or when it reconnects.
SACCT_WAIT_S = 60.0
# A start waits at most one scheduling pass (main loop at least every 60 s); a preempted batch job is killed
# by SIGTERM at once (`sleep`); a requeued job may be held up to the credential lifetime (120 s) before it
# is eligible again, then runs 20 s. Ref: https://slurm.schedmd.com/sched_config.html
START_WAIT_S = 90.0
PREEMPT_WAIT_S = 120.0
REQUEUE_COMPLETE_WAIT_S = 300.0
# accounting-setup waits for slurmdbd (backing off to 10 s), then adds the associations; slurmdbd sends
# each to slurmctld as it is made. Ref: https://slurm.schedmd.com/sacctmgr.html
ASSOCIATIONS_WAIT_S = 120.0


def _chart_associations() -> set[tuple[str, str]]:
    """(account, user) for every user of the chart's `accounting.accounts`, as rendered into cluster.yaml."""
    for doc in yaml.safe_load_all((MANIFESTS / "slurmpod.yaml").read_text(encoding="utf-8")):
        if doc and doc.get("kind") == "ConfigMap" and "cluster.yaml" in doc.get("data", {}):
            spec = yaml.safe_load(doc["data"]["cluster.yaml"])
            return {(a["name"], u) for a in spec["accounting"].get("accounts", []) for u in a.get("users", [])}
    raise AssertionError(f"no cluster.yaml ConfigMap in {MANIFESTS}")


def _held(s: Session, *args: str, as_root: bool = False) -> tuple[int, str]:
    """A held `sbatch` from the login pod (as researcher, or root), cancelled at once when accepted."""
    argv = ("sbatch", "--parsable", "-o", "/dev/null", "--hold", *args, "--wrap", "true")
    r = s.root_in(s.cluster.login, *argv, timeout=60) if as_root else s.as_researcher(*argv, timeout=60)
    if r.code == 0:
        s.root_in(s.cluster.controller, "scancel", r.stdout.strip().split(";")[0], timeout=30)
    return r.code, r.stderr


def _wait_for_associations(s: Session) -> None:
    """Until slurmdbd lists every association of the chart and slurmctld takes the researcher's jobs under
    each of theirs: with associations enforced, a job submitted before then is refused."""
    wanted = _chart_associations()
    assert ("research", wk.DEMO_USER) in wanted, wanted

    def in_slurmdbd() -> bool | None:
        out = s.root_in(s.cluster.controller, "sacctmgr", "-n", "-P", "show", "associations",
                        "format=account,user", timeout=60).stdout
        have = {tuple(line.split("|")[:2]) for line in out.splitlines() if "|" in line}
        return wanted <= have or None

    _, took = wait_for("the chart's associations in slurmdbd", in_slurmdbd, ASSOCIATIONS_WAIT_S, poll=1.0)
    print(f"associations made by the controller's accounting-setup {took:.1f} s after cluster up")
    for account in sorted(a for a, u in wanted if u == wk.DEMO_USER):
        _, took = wait_for(f"slurmctld taking {wk.DEMO_USER}'s jobs under account {account}",
                           lambda account=account: _held(s, f"--account={account}")[0] == 0 or None,
                           ASSOCIATIONS_WAIT_S, poll=1.0)
        print(f"slurmctld took a job under {account} {took:.1f} s later")


@pytest.fixture(scope="module")
def acct(docker_client: Any, flavor: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with own_cluster(docker_client, NAME, flavor, WORKERS, tmp_path_factory.mktemp("spacct-state"),
                     "--manifests", str(MANIFESTS)) as s:
        assert s.cluster.db and s.cluster.accounting and s.cluster.restapi, s.cluster
        _wait_for_associations(s)
        yield s


@pytest.fixture
def acct_policy(acct: Session) -> Iterator[PolicyVolume]:
    """This cluster's policy volume; the chart's policy comes back after the test."""
    volume = PolicyVolume(acct, NAME)
    try:
        yield volume
    finally:
        volume.restore()


def _root(s: Session, *argv: str) -> str:
    result = s.root_in(s.cluster.controller, *argv, timeout=60)
    assert result.code == 0, f"{' '.join(argv)}: {result.stderr}"
    return result.stdout


def _submit(s: Session, *args: str) -> str:
    result = s.as_researcher("sbatch", "--parsable", "-o", "/dev/null", *args)
    assert result.code == 0, result.stderr
    return result.stdout.strip().split(";")[0]


def test_slurmdbd_conf_and_key_files_are_slurms_alone(acct: Session) -> None:
    pod = acct.cluster.accounting
    assert pod is not None
    conf = acct.root_in(pod, "stat", "-c", "%a %U %G", wk.SLURMDBD_CONF).stdout.split()
    assert conf == ["600", "slurm", "slurm"]
    text = acct.root_in(pod, "cat", wk.SLURMDBD_CONF).stdout
    assert f"StorageHost={acct.cluster.db}" in text
    assert acct.root_in(pod, "ps", "-o", "user=", "-C", "slurmdbd").stdout.split() == ["slurm"]
    for p in (acct.cluster.controller, pod):
        assert acct.root_in(p, "stat", "-c", "%a %U", wk.JWT_KEY).stdout.split() == ["400", "slurm"], p
    assert acct.cluster.db is not None
    assert acct.root_in(acct.cluster.db, "ps", "-o", "user=", "-C", "mariadbd").stdout.split() == ["mysql"]


def test_controller_is_wired_to_slurmdbd(acct: Session) -> None:
    config = _root(acct, "scontrol", "show", "config")
    settings = {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in config.splitlines())}
    assert settings["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert settings["AccountingStorageHost"] == acct.cluster.accounting
    assert settings["PreemptType"] == "preempt/qos"
    assert set(settings["AccountingStorageEnforce"].split(",")) >= {"associations", "limits", "qos"}
    assert "auth/jwt" in settings["AuthAltTypes"]
    clusters = _root(acct, "sacctmgr", "-n", "-P", "show", "cluster", "format=cluster").split()
    assert "slurmpod" in clusters  # the chart's clusterName (the release)

    def qos() -> dict[str, list[str]] | None:
        out = _root(acct, "sacctmgr", "-n", "-P", "show", "qos", "format=name,priority,preempt,preemptmode")
        rows = {line.split("|")[0]: line.split("|") for line in out.splitlines() if line}
        return rows if {"low", "urgent"} <= rows.keys() else None

    rows, took = wait_for("QoS low and urgent in slurmdbd", qos, 60.0, poll=1.0)
    print(f"QoS made by the controller's accounting-setup {took:.1f} s after cluster up")
    assert rows["urgent"][1:3] == ["1000", "low"] and rows["low"][1] == "10"
    assert rows["low"][3].lower() == "requeue"


def test_a_tier_opened_by_account_admits_only_that_accounts_users(acct: Session, acct_policy: PolicyVolume) -> None:
    """The policy loads (accounts are enforced here; on the default cluster it is refused, test_policy_attacks)
    and trusts --account, because slurmctld refuses an account the user has no association with."""
    acct_policy.publish({"policy.yaml": BY_ACCOUNT})
    # root has no association with inference (only the chart's researcher has): Slurm's check refuses it.
    code, err = _held(acct, "-p", "high", "--account=inference", "-t", "30", as_root=True)
    assert code != 0, "root's job under account inference was accepted"
    assert "Invalid account" in err, err
    assert "does not enforce" not in err and "rejected by cluster policy" not in err, err
    code, err = _held(acct, "-p", "high", "--account=inference", "-t", "30")
    assert code == 0, err
    # The researcher's default account, research, does not open the tier: the policy refuses it.
    code, err = _held(acct, "-p", "high", "-t", "30")
    assert code != 0 and "may not use the high tier" in err, err


def test_an_account_the_user_is_not_in_is_refused(acct: Session) -> None:
    """Enforced associations: --account names only an account the user is in, whatever the policy says."""
    code, err = _held(acct, "--account=nosuchaccount")
    assert code != 0 and "Invalid account" in err, err


def test_sacct_lists_finished_jobs(acct: Session) -> None:
    done = acct.as_researcher("sbatch", "--parsable", "--wait", "-o", "/dev/null", "--wrap", "true", timeout=180)
    assert done.code == 0, done.stderr
    job_id = done.stdout.strip().split(";")[0]

    def listed() -> list[str] | None:
        out = _root(acct, "sacct", "-a", "-n", "-P", "-X", "-j", job_id, "--format=JobID,State,User")
        rows = [line.split("|") for line in out.splitlines() if line]
        return rows[0] if rows and rows[0][1] == "COMPLETED" else None

    row, took = wait_for(f"job {job_id} COMPLETED in sacct", listed, SACCT_WAIT_S, poll=1.0)
    print(f"sacct listed job {job_id} {took:.1f} s after it ended")
    assert row == [job_id, "COMPLETED", wk.DEMO_USER]
    mine = acct.as_researcher("sacct", "-n", "-P", "-X", "--format=JobID,State")  # an ordinary user's own jobs
    assert mine.code == 0, mine.stderr
    assert f"{job_id}|COMPLETED" in mine.stdout.split()


def test_urgent_qos_requeues_a_running_low_qos_job_which_completes_later(acct: Session) -> None:
    whole = ("-N", "1", "--exclusive")
    low = _submit(acct, "--qos=low", *whole, "-t", "10", "--wrap", "sleep 20")
    high = ""
    try:
        _, took = wait_for(f"job {low} running", lambda: job(acct, low).state == "RUNNING" or None,
                           START_WAIT_S, poll=1.0)
        print(f"low-QoS job {low} running after {took:.1f} s (bound {START_WAIT_S:.0f} s)")
        high = _submit(acct, "--qos=urgent", *whole, "-t", "5", "--wrap", "sleep 5")

        def preempted() -> bool | None:
            lj, hj = job(acct, low), job(acct, high)
            return (lj.restarts >= 1 and hj.state in ("RUNNING", "COMPLETED")) or None

        _, took = wait_for(f"job {low} preempted by {high}", preempted, PREEMPT_WAIT_S, poll=1.0)
        print(f"urgent-QoS job {high} running, {low} requeued, after {took:.1f} s (bound {PREEMPT_WAIT_S:.0f} s)")
        requeued = job(acct, low)
        assert requeued.state not in ("CANCELLED", "FAILED", "PREEMPTED")
        lift_requeue_hold(acct, low, requeued)
        _, took = wait_for(f"job {low} completed after its requeue",
                           lambda: job(acct, low).state == "COMPLETED" or None, REQUEUE_COMPLETE_WAIT_S,
                           poll=1.0)
        print(f"requeued job {low} completed {took:.1f} s later (bound {REQUEUE_COMPLETE_WAIT_S:.0f} s)")
        assert job(acct, high).state == "COMPLETED"
        assert job(acct, low).restarts >= 1
    finally:
        for job_id in (low, high):
            if job_id:
                acct.root_in(acct.cluster.controller, "scancel", job_id)


# Runs in the login pod (python from slurmpod's venv): one GET, prints "<status> <body>".
_GET = r"""
import sys, urllib.request, urllib.error
req = urllib.request.Request(sys.argv[1])
if len(sys.argv) > 2:
    req.add_header("X-SLURM-USER-NAME", sys.argv[2]); req.add_header("X-SLURM-USER-TOKEN", sys.argv[3])
try:
    with urllib.request.urlopen(req, timeout=30) as r:
        print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
"""


def _get(s: Session, path: str, token: str | None) -> tuple[int, str]:
    url = f"http://{s.cluster.restapi}:{wk.SLURMRESTD_PORT}{path}"
    auth = [wk.DEMO_USER, token] if token else []
    result = s.root_in(s.cluster.login, f"{wk.VENV_DIR}/bin/python", "-c", _GET, url, *auth, timeout=60)
    assert result.code == 0, result.stderr
    status, _, body = result.stdout.partition(" ")
    return int(status), body


def _token(s: Session) -> str:
    out = _root(s, "scontrol", "token", f"username={wk.DEMO_USER}", "lifespan=600")
    match = re.search(r"SLURM_JWT=(\S+)", out)
    assert match, out
    return match.group(1)


def test_slurmrestd_answers_with_a_token_and_refuses_without(acct: Session) -> None:
    pod = acct.cluster.restapi
    assert pod is not None
    assert acct.root_in(pod, "ps", "-o", "user=", "-C", "slurmrestd").stdout.split() == [wk.SLURMRESTD_USER]
    token = _token(acct)
    status, body = _get(acct, "/openapi/v3", token)
    assert status == 200, body
    versions = sorted({m.group(1) for m in re.finditer(r"/slurm/(v0\.0\.\d+)/ping", body.replace("\\/", "/"))},
                      key=lambda v: int(v.rsplit(".", 1)[1]))
    assert versions, body[:400]
    version = versions[-1]  # the newest data_parser this flavor's slurmrestd serves
    print(f"slurmrestd {acct.flavor}: OpenAPI versions {', '.join(versions)}; using {version}")
    if acct.flavor == "24.11":
        assert "v0.0.41" in versions
    status, body = _get(acct, f"/slurm/{version}/ping", token)
    assert status == 200, body
    pings = json.loads(body)["pings"]
    assert pings and pings[0]["hostname"] == acct.cluster.controller, pings
    job = _submit(acct, "--wrap", "true")
    status, body = _get(acct, f"/slurm/{version}/jobs", token)
    assert status == 200, body
    assert int(job) in [j["job_id"] for j in json.loads(body)["jobs"]]
    status, body = _get(acct, f"/slurm/{version}/ping", None)
    assert status in (401, 403), (status, body)
    # A token slurmctld does not accept: slurmrestd passes it through and reports the controller as not
    # answering this client (Slurm's error), or refuses it itself.
    status, body = _get(acct, f"/slurm/{version}/ping", "not-a-token")
    if status not in (401, 403):
        assert status == 200, body
        (ping,) = json.loads(body)["pings"]
        assert ping["responding"] is False and ping.get("pinged", "DOWN") != "UP", ping
