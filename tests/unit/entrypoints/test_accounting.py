"""Accounting and REST: the spec keys, slurm.conf/slurmdbd.conf rendering, the db/accounting/restapi pod
plans, the password and init file, and the controller's idempotent sacctmgr setup (on a recording runner)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import podkit
import pytest
import yaml
from golden import check_golden

from slurmpod import well_known as wk
from slurmpod.commands import Result
from slurmpod.entrypoints import accounting, accounting_setup, cluster_spec, render, start
from slurmpod.errors import BadInput, TransientError
from slurmpod.slurm_plugins import bridge

ACCOUNTING = """
accounting:
  enabled: true
  qos:
    - {name: low, priority: 10, preemptMode: REQUEUE}
    - {name: high, priority: 1000, preempt: [low]}
restapi: {enabled: true}
"""
ACCOUNTS = """
accounting:
  enabled: true
  qos:
    - {name: low, priority: 10}
  accounts:
    - {name: research, users: [researcher, ada], qos: [normal, low], defaultQos: normal}
    - {name: inference, parent: research, users: [researcher]}
"""
PASSWORD = "Zm9vYmFyYmF6cXV4cXV1eA-_.~+/"


def _spec(extra: str = ACCOUNTING) -> cluster_spec.ClusterSpec:
    return cluster_spec.parse(yaml.safe_load(podkit.SPEC_BASIC + extra))


def test_spec_keys_parse() -> None:
    spec = _spec()
    assert spec.accounting.enabled and spec.restapi.enabled and spec.accounting.preempt_qos
    assert spec.accounting.qos == (cluster_spec.QosSpec("low", 10, (), "REQUEUE"),
                                   cluster_spec.QosSpec("high", 1000, ("low",), None))
    off = _spec("")
    assert not off.accounting.enabled and not off.restapi.enabled and not off.accounting.preempt_qos


@pytest.mark.parametrize(("extra", "field", "value"), [
    ("accounting: {enabled: yes please}\n", "accounting.enabled", "yes please"),
    ("accounting: {enabled: true, qos: [{name: 'a b'}]}\n", "accounting.qos[0].name", "a b"),
    ("accounting: {enabled: true, qos: [{name: hi, preempt: [lo]}]}\n", "accounting.qos[0].preempt[0]", "lo"),
    ("accounting: {enabled: true, qos: [{name: hi, preempt: [hi]}]}\n", "accounting.qos[0].preempt[0]", "hi"),
    ("accounting: {enabled: true, qos: [{name: hi, preemptMode: gang}]}\n", "accounting.qos[0].preemptMode",
     "GANG"),
    ("accounting: {enabled: true, qos: [{name: hi, priority: -1}]}\n", "accounting.qos[0].priority", "-1"),
    ("accounting: {enabled: true, qos: [{name: a}, {name: a}]}\n", "accounting.qos", "a"),
    ("accounting: {qos: [{name: a}]}\n", "accounting.qos", "a"),
    ("accounting: {enabled: true, storagePass: x}\n", "accounting.storagePass", "x"),
    ("restapi: {enabled: true, jwtKey: k}\n", "restapi.jwtKey", "k"),
    ("restapi: on\n", "restapi", "True"),
], ids=["flag", "name", "unknown-preempt", "self-preempt", "mode", "priority", "twice", "not-enabled",
        "no-password-key", "no-key-key", "not-a-mapping"])
def test_bad_spec_keys_are_named(extra: str, field: str, value: str) -> None:
    with pytest.raises(BadInput) as exc:
        _spec(extra)
    assert any(p.field == field and str(p.value) == value for p in exc.value.problems), exc.value.problems


def test_account_keys_parse() -> None:
    research, inference = _spec(ACCOUNTS).accounting.accounts
    assert research == cluster_spec.AccountSpec("research", ("researcher", "ada"), "root", ("normal", "low"), "normal")
    assert inference == cluster_spec.AccountSpec("inference", ("researcher",), "research", (), None)
    assert _spec("").accounting.accounts == ()


def _accounts(*items: str) -> str:
    return "accounting:\n  enabled: true\n  qos: [{name: low}]\n  accounts:\n" + "".join(f"    - {i}\n" for i in items)


@pytest.mark.parametrize(("extra", "field", "value"), [
    (_accounts("{name: 'ml ops'}"), "accounting.accounts[0].name", "ml ops"),
    (_accounts("{name: ML}"), "accounting.accounts[0].name", "ML"),
    (_accounts("{name: 'a=b'}"), "accounting.accounts[0].name", "a=b"),
    (_accounts('{name: "ml\\nAccountingStorageEnforce=nojobs"}'), "accounting.accounts[0].name",
     "ml\nAccountingStorageEnforce=nojobs"),
    (_accounts("{name: root}"), "accounting.accounts[0].name", "root"),
    (_accounts("{name: ml, users: ['alice,bob']}"), "accounting.accounts[0].users[0]", "alice,bob"),
    (_accounts("{name: ml, users: ['\"eve\"']}"), "accounting.accounts[0].users[0]", '"eve"'),
    (_accounts("{name: ml, users: ['-i']}"), "accounting.accounts[0].users[0]", "-i"),
    (_accounts("{name: ml, users: [ada, ada]}"), "accounting.accounts[0].users", "ada"),
    (_accounts("{name: ml, users: ada}"), "accounting.accounts[0].users", "ada"),
    (_accounts("{name: ml, qos: [urgent]}"), "accounting.accounts[0].qos[0]", "urgent"),
    (_accounts("{name: ml, qos: [low], defaultQos: normal}"), "accounting.accounts[0].defaultQos", "normal"),
    (_accounts("{name: ml, defaultQos: low}"), "accounting.accounts[0].defaultQos", "low"),
    (_accounts("{name: ml, parent: ops}", "{name: ops}"), "accounting.accounts[0].parent", "ops"),
    (_accounts("{name: ml, parent: ml}"), "accounting.accounts[0].parent", "ml"),
    (_accounts("{name: ml}", "{name: ml}"), "accounting.accounts", "ml"),
    (_accounts("{name: ml, limits: {}}"), "accounting.accounts[0].limits", "{}"),
    ("accounting: {accounts: [{name: ml}]}\n", "accounting.accounts", "ml"),
], ids=["space", "upper", "assign", "newline", "root", "comma", "quotes", "option", "user-twice", "users-not-list",
        "unknown-qos", "default-not-listed", "default-without-qos", "parent-after", "parent-self", "twice",
        "unknown-key", "not-enabled"])
def test_bad_account_keys_are_named(extra: str, field: str, value: str) -> None:
    with pytest.raises(BadInput) as exc:
        _spec(extra)
    assert any(p.field == field and str(p.value) == value for p in exc.value.problems), exc.value.problems


def test_accounting_enforces_associations_and_the_policy_plugin_sees_it() -> None:
    """The plugin reads slurmctld's slurm.conf: accounting on, a policy may open a tier by account."""
    on = render.slurm_conf(_spec(), podkit.CONTROLLER, "slurmpod-accounting-0")
    assert "AccountingStorageEnforce=associations,limits,qos" in on.splitlines()
    assert bridge.accounts_enforced_in(on) is True
    off = render.slurm_conf(_spec(""), podkit.CONTROLLER)
    assert "AccountingStorageEnforce" not in off
    assert bridge.accounts_enforced_in(off) is False


def test_slurm_conf_with_accounting_and_jwt() -> None:
    text = render.slurm_conf(_spec(), podkit.CONTROLLER, "slurmpod-accounting-0")
    check_golden("slurm.conf.accounting", text)
    lines = set(text.splitlines())
    assert {"AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=slurmpod-accounting-0",
            "PreemptType=preempt/qos", "AuthAltTypes=auth/jwt", f"AuthAltParameters=jwt_key={wk.JWT_KEY}",
            "JobAcctGatherType=jobacct_gather/linux"} <= lines
    assert "JobAcctGatherType=jobacct_gather/none" in render.slurm_conf(_spec(""), podkit.CONTROLLER)
    with pytest.raises(ValueError, match="slurmdbd host"):
        render.slurm_conf(_spec(), podkit.CONTROLLER)


def test_slurmdbd_conf_golden() -> None:
    conf = render.SlurmdbdConf(auth="munge", dbd_host="slurmpod-accounting-0", storage_host="slurmpod-db-0",
                               storage_pass=PASSWORD, jwt=True)
    check_golden("slurmdbd.conf", render.slurmdbd_conf(conf))


def _secret(path: Path, text: str, mode: int = 0o400) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize(("text", "mode", "reason"), [
    ("short", 0o400, "16-128 characters"),
    ("x" * 20 + "'; DROP DATABASE x; --", 0o400, "16-128 characters"),
    ("x" * 20 + " #comment", 0o400, "16-128 characters"),
    ("x" * 20 + "\nStoragePass=y", 0o400, "16-128 characters"),
    ("x" * 20, 0o444, "too open"),
])
def test_bad_passwords_exit_2_naming_the_file(tmp_path: Path, text: str, mode: int, reason: str) -> None:
    path = _secret(tmp_path / "password", text, mode)
    with pytest.raises(BadInput) as exc:
        accounting.read_password(path)
    assert reason in str(exc.value)
    assert "db password secret" in str(exc.value)


def test_password_and_init_sql(tmp_path: Path) -> None:
    assert accounting.read_password(_secret(tmp_path / "p", PASSWORD + "\n")) == PASSWORD
    sql = accounting.init_sql(PASSWORD)
    assert f"IDENTIFIED BY '{PASSWORD}'" in sql and "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'%'" in sql
    with pytest.raises(ValueError):
        accounting.init_sql("a'b")
    with pytest.raises(BadInput, match="missing"):
        accounting.read_password(tmp_path / "none")


def _pod(tmp_path: Path, role: str, spec: str = podkit.SPEC_BASIC) -> tuple[dict[str, str], start.Settings]:
    pod = podkit.make_pod(tmp_path, role, spec=spec)
    pw = _secret(tmp_path / "secrets/db/password", PASSWORD)
    jwt = tmp_path / "secrets/jwt/jwt_hs256.key"
    podkit.write_key(jwt)
    env = pod.env(role, SLURMPOD_DB_PASSWORD_FILE=str(pw), SLURMPOD_JWT_KEY_FILE=str(jwt),
                  SLURMPOD_DB_HOST="slurmpod-db-0", SLURMPOD_ACCOUNTING_HOST="slurmpod-accounting-0")
    return env, start.Settings.from_env(env)


def test_db_plan(tmp_path: Path) -> None:
    env, settings = _pod(tmp_path, "db")
    p = podkit.plan("db", env, settings)
    assert [prog.name for prog in p.programs] == ["mariadbd"]
    assert p.keys == ()  # no Slurm daemon, no auth key
    (init,) = p.files
    assert (init.path, init.mode, init.uid) == (wk.DB_INIT_FILE, 0o600, wk.MYSQL_UID)
    assert PASSWORD in init.content
    assert next(prog for prog in p.programs).user == "mysql"


def test_accounting_plan(tmp_path: Path) -> None:
    env, settings = _pod(tmp_path, "accounting")
    p = podkit.plan("accounting", env, settings)
    assert [prog.name for prog in p.programs] == ["munged", "slurmdbd"]
    (conf,) = p.files
    assert (conf.path, conf.mode, conf.uid, conf.gid) == (wk.SLURMDBD_CONF, 0o600, wk.SLURM_UID, wk.SLURM_UID)
    assert "StorageHost=slurmpod-db-0\n" in conf.content and f"StoragePass={PASSWORD}\n" in conf.content
    assert "AuthAltTypes=auth/jwt" in conf.content
    assert [(k.dest, k.user) for k in p.keys] == [(wk.MUNGE_KEY, "munge"), (wk.JWT_KEY, "slurm")]
    with pytest.raises(BadInput, match="SLURMPOD_DB_HOST"):
        podkit.plan("accounting", {**env, "SLURMPOD_DB_HOST": "db;x"}, settings)


def test_restapi_plan(tmp_path: Path) -> None:
    env, settings = _pod(tmp_path, "restapi")
    p = podkit.plan("restapi", env, settings)
    assert [prog.name for prog in p.programs] == ["munged", "sackd", "slurmrestd"]
    rest = p.programs[-1]
    assert rest.user == wk.SLURMRESTD_USER
    assert "rest_auth/jwt" in rest.script and f"0.0.0.0:{wk.SLURMRESTD_PORT}" in rest.script


def test_controller_plan_with_accounting(tmp_path: Path) -> None:
    env, settings = _pod(tmp_path, "controller", podkit.SPEC_BASIC + ACCOUNTING)
    p = podkit.plan("controller", env, settings)
    assert [prog.name for prog in p.programs] == ["munged", "slurmctld", "node-reaper", "accounting-setup",
                                                        "exporter"]
    assert (wk.JWT_KEY, "slurm") in [(k.dest, k.user) for k in p.keys]
    slurmctld = next(prog for prog in p.programs if prog.name == "slurmctld")
    assert f"/dev/tcp/slurmpod-accounting-0/{wk.SLURMDBD_PORT}" in slurmctld.script
    with pytest.raises(BadInput, match="SLURMPOD_ACCOUNTING_HOST"):
        podkit.plan("controller", {k: v for k, v in env.items() if k != "SLURMPOD_ACCOUNTING_HOST"}, settings)
    os.unlink(settings.jwt_key)
    with pytest.raises(BadInput, match="jwt key secret"):  # restapi on: the key must be mounted
        podkit.plan("controller", env, settings)


class Sacctmgr:
    """A recording stand-in for sacctmgr over a tiny database (clusters, QoS, associations)."""

    def __init__(self, clusters: set[str], qos: set[str], down: int = 0,
                 assocs: set[tuple[str, str]] | None = None) -> None:
        self.clusters, self.qos, self.down = clusters, qos, down
        self.assocs = {("root", ""), ("root", "root")} if assocs is None else assocs
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str], timeout: float) -> Result:
        argv = tuple(argv)
        self.calls.append(argv)
        if self.down:
            self.down -= 1
            return Result(argv, 1, "", "sacctmgr: error: Problem talking to the database: Connection refused")
        if argv[3:5] == ("show", "cluster"):
            return Result(argv, 0, "".join(f"{c}\n" for c in sorted(self.clusters)), "")
        if argv[3:5] == ("show", "qos"):
            return Result(argv, 0, "".join(f"{q}\n" for q in sorted(self.qos)), "")
        if argv[3:5] == ("show", "associations"):
            return Result(argv, 0, "".join(f"{a}|{u}\n" for a, u in sorted(self.assocs)), "")
        if argv[2:4] == ("add", "cluster"):
            self.clusters.add(argv[4])
        elif argv[2:4] == ("add", "qos"):
            self.qos.add(argv[4])
        elif argv[2:4] == ("add", "account"):
            self.assocs.add((argv[4], ""))
        elif argv[2:4] == ("add", "user"):
            account = next(a.removeprefix("account=") for a in argv if a.startswith("account="))
            if (account, "") not in self.assocs:
                return Result(argv, 1, "", " Need a valid account name to add a user")
            if (account, argv[4]) in self.assocs:
                return Result(argv, 1, " Nothing new added.\n", "")
            self.assocs.add((account, argv[4]))
        return Result(argv, 0, "", "")


class NoSleep:
    def monotonic(self) -> float:
        return 0.0

    def sleep(self, seconds: float) -> None:
        del seconds


def test_setup_registers_the_cluster_and_qos_once_slurmdbd_answers() -> None:
    db = Sacctmgr(set(), {"normal"}, down=2)
    done = accounting_setup.Setup(db, NoSleep()).apply(_spec())
    assert done == ["added cluster slurmpod", "added qos low", "added qos high", "set qos low", "set qos high"]
    assert db.calls[-2:] == [
        ("sacctmgr", "-i", "modify", "qos", "where", "name=low", "set", "priority=10", "preemptmode=requeue"),
        ("sacctmgr", "-i", "modify", "qos", "where", "name=high", "set", "priority=1000", "preempt=low"),
    ]
    again = accounting_setup.Setup(db, NoSleep()).apply(_spec())  # a restarted controller: nothing added
    assert again == ["set qos low", "set qos high"]


def _adds(calls: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    return [c for c in calls if c[2] in ("add", "modify")]


def test_setup_adds_accounts_then_users_after_the_qos() -> None:
    db = Sacctmgr({"slurmpod"}, {"normal"})
    done = accounting_setup.Setup(db, NoSleep()).apply(_spec(ACCOUNTS))
    assert done == ["added qos low", "set qos low", "added account research", "added account inference",
                    "added user researcher to account research", "added user ada to account research",
                    "added user researcher to account inference"]
    assert _adds(db.calls) == [
        ("sacctmgr", "-i", "add", "qos", "low"),
        ("sacctmgr", "-i", "modify", "qos", "where", "name=low", "set", "priority=10"),
        ("sacctmgr", "-i", "add", "account", "research", "cluster=slurmpod"),
        ("sacctmgr", "-i", "add", "account", "inference", "cluster=slurmpod", "parent=research"),
        ("sacctmgr", "-i", "add", "user", "researcher", "account=research", "cluster=slurmpod", "qos=normal,low",
         "defaultqos=normal"),
        ("sacctmgr", "-i", "add", "user", "ada", "account=research", "cluster=slurmpod", "qos=normal,low",
         "defaultqos=normal"),
        ("sacctmgr", "-i", "add", "user", "researcher", "account=inference", "cluster=slurmpod"),
    ]
    assert {("research", "researcher"), ("research", "ada"), ("inference", "researcher")} <= db.assocs


def test_setup_leaves_present_associations_and_sets_their_qos() -> None:
    db = Sacctmgr({"slurmpod"}, {"normal", "low"},
                  assocs={("root", ""), ("research", ""), ("inference", ""), ("research", "researcher"),
                          ("inference", "researcher")})
    done = accounting_setup.Setup(db, NoSleep()).apply(_spec(ACCOUNTS))
    assert done == ["set qos low", "set user researcher in account research", "added user ada to account research"]
    assert ("sacctmgr", "-i", "modify", "user", "where", "name=researcher", "account=research", "cluster=slurmpod",
            "set", "qos=normal,low", "defaultqos=normal") in db.calls
    again = accounting_setup.Setup(db, NoSleep()).apply(_spec(ACCOUNTS))  # nothing new, nothing to set for inference
    assert again == ["set qos low", "set user researcher in account research", "set user ada in account research"]


def test_setup_takes_nothing_added_for_done() -> None:
    """A user added between the listing and the add (another controller start): sacctmgr's "Nothing new added"."""
    db = Sacctmgr({"slurmpod"}, {"normal", "low"}, assocs={("root", ""), ("research", ""), ("inference", "")})
    listing = db.__call__

    def racing(argv: Sequence[str], timeout: float) -> Result:
        result = listing(argv, timeout)
        if tuple(argv[3:5]) == ("show", "associations"):
            db.assocs.add(("inference", "researcher"))
        return result

    done = accounting_setup.Setup(racing, NoSleep()).apply(_spec(ACCOUNTS))
    assert "added user researcher to account inference" in done


def test_setup_fails_on_a_refused_add() -> None:
    """Anything but "nothing new added" is an error: supervisord starts the setup again."""
    db = Sacctmgr({"slurmpod"}, {"normal", "low"})

    def refusing(argv: Sequence[str], timeout: float) -> Result:
        if tuple(argv[2:4]) == ("add", "account"):
            return Result(tuple(argv), 1, "", " Problem adding account")
        return db(argv, timeout)

    with pytest.raises(TransientError, match="Problem adding account"):
        accounting_setup.Setup(refusing, NoSleep()).apply(_spec(ACCOUNTS))
    assert not [c for c in db.calls if c[2:4] == ("add", "user")]


def test_associations_parse() -> None:
    assert accounting_setup.associations("root|\nroot|root\nResearch|Researcher\n\n") == {
        ("root", ""), ("root", "root"), ("research", "researcher")}
