"""The chart's NetworkPolicies as the emulator enforces them (slurmpod_host.cluster.netpolicy, netenforce):
parsed from the manifests `cluster up` runs, resolved against the planned pods, rendered as iptables rules.

The rendered rules are run by a small interpreter of the iptables subset they use, so every check below
holds for the rules themselves, not only for the model.
"""

from __future__ import annotations

import ipaddress
import shlex
import subprocess
import uuid
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

import paths
import pytest
import yaml

from slurmpod.errors import BadInput
from slurmpod_host.cluster import applied, manifests, netenforce, netpolicy, podspec
from slurmpod_host.cluster import auth as cluster_auth
from slurmpod_host.cluster.manifests import Bundle, Document

ROOT = paths.REPO
DEFAULT = ROOT / "deploy" / "kubernetes"
ACCOUNTING = DEFAULT / "accounting"
HELM = ROOT / ".tools" / "bin" / "helm"
CHART = ROOT / "deploy" / "helm" / "slurmpod"
SUBNET = ipaddress.IPv4Network("10.213.9.0/24")
OUTSIDE = "10.213.9.250"  # an address on the bridge that no pod holds
BRIDGE = "br-0123456789ab"
SRUN = (60001, 63000)


def _params(name: str = "emu", workers: int = 2) -> podspec.ClusterParams:
    return podspec.ClusterParams(name=name, subnet=SUBNET, cluster_uid=uuid.UUID(int=7),
                                 created=datetime(2025, 1, 2, tzinfo=UTC), node_cpu=Fraction(2),
                                 node_memory=Fraction(2**34), workers=workers, enforce_network_policy=True)


def _bundle(directory: Path) -> Bundle:
    return cluster_auth.configure(manifests.load(directory), "munge", ssh_host_key=b"k")


def _cluster(directory: Path, name: str = "emu") -> tuple[tuple[netpolicy.PodFilter, ...], netpolicy.RuleSet,
                                                           dict[str, list[str]]]:
    bundle = _bundle(directory)
    params = _params(name)
    plans = podspec.plan_cluster(bundle, params, lambda n: b"k" * n)
    members = [netpolicy.Member.of(p) for p in plans]
    filters = netpolicy.resolve(netpolicy.parse(bundle, name), members)
    rules = netpolicy.render(name, BRIDGE, SUBNET, filters)
    ips: dict[str, list[str]] = {}
    for m in members:
        ips.setdefault(m.role, []).append(m.ip)
    return filters, rules, ips


# --- an interpreter of the rendered rules -----------------------------------------------------------------

def _chains(restore: str) -> dict[str, list[list[str]]]:
    chains: dict[str, list[list[str]]] = {}
    for line in restore.splitlines():
        if line.startswith(":"):
            chains[line[1:].split()[0]] = []
        elif line.startswith("-A "):
            words = shlex.split(line)
            chains[words[1]].append(words[2:])
    return chains


def _rule_matches(words: list[str], src: str, dst: str, *, proto: str, port: int) -> bool:
    i = 0
    while i < len(words):
        w = words[i]
        if w in {"-s", "-d"}:
            if ipaddress.IPv4Address(src if w == "-s" else dst) not in ipaddress.IPv4Network(words[i + 1]):
                return False
            i += 2
        elif w == "-p":
            if words[i + 1] != proto.lower():
                return False
            i += 2
        elif w == "--dport":
            first, _, last = words[i + 1].partition(":")
            if not int(first) <= port <= int(last or first):
                return False
            i += 2
        elif w == "!" and words[i + 1:i + 3] == ["--ctstate", "NEW"]:
            return False  # the packets asked about open a connection
        elif w == "--ctstate":
            if "NEW" not in words[i + 1].split(","):
                return False
            i += 2
        elif w in {"-m", "--comment", "-j", "--reject-with"}:
            if w == "-j":
                return True
            i += 2
        else:
            raise AssertionError(f"interpreter does not know {w!r} in {words}")
    return True


def _verdict(chains: dict[str, list[list[str]]], chain: str, src: str, dst: str, *, proto: str, port: int) -> str:
    """RETURN or REJECT for a NEW packet entering ``chain``."""
    for words in chains[chain]:
        if not _rule_matches(words, src, dst, proto=proto, port=port):
            continue
        target = words[words.index("-j") + 1]
        if target in {"RETURN", "REJECT"}:
            return target
        if _verdict(chains, target, src, dst, proto=proto, port=port) == "REJECT":
            return "REJECT"
    return "RETURN"


def _passes(rules: netpolicy.RuleSet, filters: tuple[netpolicy.PodFilter, ...], src: str, dst: str,
            proto_port: tuple[str, int]) -> bool:
    proto, port = proto_port
    chains = _chains(rules.restore)
    by_rules = _verdict(chains, rules.chains[0], src, dst, proto=proto, port=port) == "RETURN"
    assert by_rules == netpolicy.allowed(filters, src, dst, proto, port), (src, dst, proto, port)
    return by_rules


# --- what the chart allows, on the accounting render (every role) -----------------------------------------

@pytest.fixture(scope="module")
def acct() -> tuple[tuple[netpolicy.PodFilter, ...], netpolicy.RuleSet, dict[str, list[str]]]:
    return _cluster(ACCOUNTING)


ROLES = ("controller", "worker", "login", "accounting", "db", "restapi")


def _from(acct: tuple[tuple[netpolicy.PodFilter, ...], netpolicy.RuleSet, dict[str, list[str]]], role: str,
          port: int, proto: str = "TCP") -> set[str]:
    """The roles (and 'outside' for an address no pod holds) whose pods may open ``role``:``port``."""
    filters, rules, ips = acct
    dst = ips[role][0]
    sources = {r: [ip for ip in ips[r] if ip != dst] for r in ROLES}
    sources["outside"] = [OUTSIDE]
    ok = set()
    for r, addresses in sources.items():
        verdicts = {_passes(rules, filters, ip, dst, (proto, port)) for ip in addresses}
        assert len(verdicts) <= 1, (r, role, port)  # every pod of a role alike
        if verdicts == {True}:
            ok.add(r)
    return ok


@pytest.mark.parametrize(("role", "port", "sources"), [
    ("db", 3306, {"accounting"}),  # MariaDB: slurmdbd only
    ("accounting", 6819, {"controller", "login", "restapi"}),  # slurmdbd: never a job
    ("controller", 6817, {"worker", "login", "accounting", "restapi"}),
    ("worker", 6818, {"controller", "login", "worker"}),  # slurmd: srun from login, fan-out between workers
    ("worker", 22, {"login", "worker"}),  # ssh into allocations (and any TCP port between workers)
    ("worker", 50000, {"worker"}),  # OpenMPI's TCP range
    ("worker", 50999, {"worker"}),
    ("worker", 41234, {"worker"}),  # PMIx: an ephemeral port
    ("worker", SRUN[0], {"controller", "worker"}),  # srun in a batch step
    ("login", SRUN[0], {"worker", "controller"}),  # slurmstepd's task I/O, slurmctld's messages to srun
    ("login", SRUN[1], {"worker", "controller"}),
    ("login", SRUN[0] - 1, set()),
    ("login", SRUN[1] + 1, set()),
    ("login", 22, {"outside"}),  # anyone, but no slurmpod pod's egress allows it
    ("restapi", 6820, {"login", "outside"}),  # of slurmpod's pods only login
    ("controller", 6818, set()),
    ("db", 6817, set()),
])
def test_each_listener_hears_exactly_the_roles_the_chart_names(acct: tuple[tuple[netpolicy.PodFilter, ...],
                                                               netpolicy.RuleSet, dict[str, list[str]]],
                                                               role: str, port: int, sources: set[str]) -> None:
    assert _from(acct, role, port) == sources


def test_mariadb_connects_nowhere_and_dns_goes_anywhere_but_from_it(acct: tuple[tuple[netpolicy.PodFilter, ...],
                                                                   netpolicy.RuleSet, dict[str, list[str]]]) -> None:
    filters, rules, ips = acct
    db = ips["db"][0]
    for role in ROLES:
        for ip in ips[role]:
            if ip != db:
                assert not _passes(rules, filters, db, ip, ("TCP", 6817 if role == "controller" else 6819))
    assert not _passes(rules, filters, db, OUTSIDE, ("UDP", 53))
    for role in ("controller", "worker", "login", "accounting", "restapi"):
        assert _passes(rules, filters, ips[role][0], OUTSIDE, ("UDP", 53)), role
        assert _passes(rules, filters, ips[role][0], OUTSIDE, ("TCP", 53)), role
        assert not _passes(rules, filters, ips[role][0], OUTSIDE, ("TCP", 80)), role


def test_no_udp_between_pods(acct: tuple[tuple[netpolicy.PodFilter, ...], netpolicy.RuleSet,
                                         dict[str, list[str]]]) -> None:
    filters, rules, ips = acct
    a, b = ips["worker"]
    assert _passes(rules, filters, a, b, ("TCP", 5000))
    assert not _passes(rules, filters, a, b, ("UDP", 5000))
    assert not _passes(rules, filters, a, ips["controller"][0], ("UDP", 53))  # no pod hears UDP 53


# --- the rules themselves ---------------------------------------------------------------------------------

def test_rule_set_shape(acct: tuple[tuple[netpolicy.PodFilter, ...], netpolicy.RuleSet,
                                    dict[str, list[str]]]) -> None:
    _, rules, ips = acct
    main = rules.chains[0]
    assert main == netpolicy.main_chain("emu") and main.startswith(netpolicy.CHAIN_PREFIX)
    assert all(len(c) <= netpolicy.MAX_CHAIN for c in rules.chains)
    lines = rules.restore.splitlines()
    assert lines[0] == "*filter" and lines[-1] == "COMMIT"
    body = [line for line in lines if line.startswith(f"-A {main} ")]
    assert body[:3] == [f"-A {main} -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN",
                        f"-A {main} -m conntrack ! --ctstate NEW -j RETURN", f"-A {main} -p icmp -j RETURN"]
    pods = sum(len(v) for v in ips.values())
    assert len(body) == 3 + 2 * pods and len(rules.chains) == 1 + 2 * pods  # every pod isolated both ways
    assert list(rules.jump) == ["-i", BRIDGE, "-o", BRIDGE, "-s", str(SUBNET), "-d", str(SUBNET), "-m", "comment",
                                "--comment", "slurmpod cluster emu: NetworkPolicy", "-j", main]
    chains = _chains(rules.restore)
    (db_in,) = [c for c in chains if any(w == "ingress of emu-db-0" for r in chains[main] for w in r
                                         if r[-1] == c)]
    returns = [r for r in chains[db_in] if r[-1] == "RETURN"]
    assert [r[:7] for r in returns] == [["-s", f"{ips['accounting'][0]}/32", "-p", "tcp", "-m", "tcp", "--dport"]]
    assert returns[0][7] == "3306"
    assert [r[-3:] for r in chains[db_in][-2:]] == [["REJECT", "--reject-with", "tcp-reset"],
                                                    ["REJECT", "--reject-with", "icmp-port-unreachable"]]
    assert f"--dport {SRUN[0]}:{SRUN[1]}" in rules.restore


def test_default_manifests_have_the_three_roles_policies() -> None:
    filters, rules, ips = _cluster(DEFAULT, "sptest")
    assert set(ips) == {"controller", "worker", "login"}
    assert all(f.ingress is not None and f.egress is not None for f in filters)
    assert rules.chains[0] == netpolicy.main_chain("sptest")
    login, (w0, w1), ctl = ips["login"][0], ips["worker"], ips["controller"][0]
    assert _passes(rules, filters, login, ctl, ("TCP", 6817))
    assert _passes(rules, filters, login, w0, ("TCP", 22))
    assert _passes(rules, filters, w0, w1, ("TCP", 41234))
    assert not _passes(rules, filters, w0, login, ("TCP", 22))  # ssh from a worker to the login pod
    assert not _passes(rules, filters, login, ctl, ("TCP", 6818))


def test_the_instance_label_names_the_emulated_cluster() -> None:
    """The manifests select release `slurmpod`; the emulated pods carry the cluster's name instead."""
    policies = netpolicy.parse(_bundle(DEFAULT), "other")
    assert {dict(p.selector.match_labels)["app.kubernetes.io/instance"] for p in policies} == {"other"}


def test_a_pod_no_policy_selects_is_not_isolated() -> None:
    member = netpolicy.Member("x-0", "10.213.9.9", "default", (("app", "x"),))
    (f,) = netpolicy.resolve(netpolicy.parse(_bundle(DEFAULT), "emu"), [member])
    assert f.ingress is None and f.egress is None
    rules = netpolicy.render("emu", BRIDGE, SUBNET, (f,))
    assert rules.chains == (netpolicy.main_chain("emu"),)


# --- the chart with other values (helm template, as tests/unit/deploy renders it) -------------------------

def _helm_bundle(tmp_path: Path, *args: str) -> Bundle:
    assert HELM.is_file(), f"{HELM} missing: run scripts/bootstrap-host.sh"
    done = subprocess.run([str(HELM), "template", "slurmpod", str(CHART), "--namespace", "slurmpod", *args],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    (tmp_path / "slurmpod.yaml").write_text(done.stdout)
    (tmp_path / manifests.KUSTOMIZATION).write_text("resources: [slurmpod.yaml]\n")
    return cluster_auth.configure(manifests.load(tmp_path), "munge", ssh_host_key=b"k")


def test_values_narrowing_ssh_and_kubernetes_1_20_ranges(tmp_path: Path) -> None:
    bundle = _helm_bundle(tmp_path, "--kube-version=1.20.2",
                          "--set=networkPolicy.loginSshFrom[0].ipBlock.cidr=192.0.2.0/24")
    plans = podspec.plan_cluster(bundle, _params(), lambda n: b"k" * n)
    filters = netpolicy.resolve(netpolicy.parse(bundle, "emu"), [netpolicy.Member.of(p) for p in plans])
    rules = netpolicy.render("emu", BRIDGE, SUBNET, filters)
    login = next(p.ip for p in plans if p.role == "login")
    worker = next(p.ip for p in plans if p.role == "worker")
    assert _passes(rules, filters, "192.0.2.7", login, ("TCP", 22))
    assert not _passes(rules, filters, OUTSIDE, login, ("TCP", 22))
    # 1.20 has no endPort: the srun rules allow every TCP port from those peers.
    assert _passes(rules, filters, worker, login, ("TCP", 1234))


@pytest.mark.parametrize(("port", "field"), [
    ({"protocol": "TCP", "port": "ssh"}, "ports[0].port"),
    ({"protocol": "ICMP"}, "ports[0].protocol"),
])
def test_what_the_emulator_cannot_enforce_is_refused_by_name(port: dict[str, object], field: str) -> None:
    body = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "p"},
            "spec": {"podSelector": {}, "ingress": [{"ports": [port]}],
                     "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}]}]}}
    with pytest.raises(BadInput) as exc:
        netpolicy.parse(Bundle("default", (Document("x.yaml", body),)), "emu")
    fields = [p.field for p in exc.value.problems]
    assert any(f.endswith(f"ingress[0].{field}") for f in fields), fields
    assert any(f.endswith("egress[0].to[0].ipBlock.except") for f in fields), fields


def test_policy_types_default_and_selector_expressions() -> None:
    body = yaml.safe_load("""
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: p, namespace: ns}
spec:
  podSelector: {matchExpressions: [{key: tier, operator: In, values: [db]}]}
  ingress: [{from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ns}}}]}]
""")
    (policy,) = netpolicy.parse(Bundle("ns", (Document("x.yaml", body),)), "emu")
    assert policy.egress is None and policy.ingress is not None  # policyTypes left out, no egress: Ingress
    db = netpolicy.Member("db-0", "10.213.9.2", "ns", (("tier", "db"),))
    app = netpolicy.Member("app-0", "10.213.9.3", "ns", (("tier", "app"),))
    filters = netpolicy.resolve([policy], [db, app])
    assert netpolicy.allowed(filters, app.ip, db.ip, "TCP", 1)
    assert not netpolicy.allowed(filters, OUTSIDE, db.ip, "TCP", 1)
    assert netpolicy.allowed(filters, OUTSIDE, app.ip, "TCP", 1)  # not selected: not isolated


# --- host side, pure parts --------------------------------------------------------------------------------

def test_find_rules_in_iptables_listing() -> None:
    main = netpolicy.main_chain("sptest")
    other = netpolicy.main_chain("spacct")
    listing = "\n".join([
        "-P FORWARD DROP", "-N DOCKER-USER", f"-N {main}", f"-N {main}-e0", f"-N {other}",
        f'-A DOCKER-USER -s 10.213.9.0/24 -d 10.213.9.0/24 -i {BRIDGE} -o {BRIDGE} -m comment --comment '
        f'"slurmpod cluster sptest: NetworkPolicy" -j {main}',
        f"-A DOCKER-USER -j {other}", "-A DOCKER-USER -j RETURN",
        f"-A {main} -s 10.213.9.2/32 -j {main}-e0", f"-A {main}-e0 -j REJECT"])
    found = netenforce.find_rules(listing, "sptest")
    assert found.chains == (main, f"{main}-e0")
    assert found.jumps == (("DOCKER-USER", "-s", "10.213.9.0/24", "-d", "10.213.9.0/24", "-i", BRIDGE, "-o", BRIDGE,
                            "-m", "comment", "--comment", "slurmpod cluster sptest: NetworkPolicy", "-j", main),)
    assert netenforce.find_rules(listing, "nothere").empty


def test_bridge_name() -> None:
    assert netenforce.bridge_name({"Id": "0123456789abcdef", "Options": {}}) == "br-0123456789ab"
    assert netenforce.bridge_name({"Id": "x", "Options": {netenforce.BRIDGE_NAME_OPTION: "spbr"}}) == "spbr"


def test_the_switch_is_saved_with_the_cluster_and_off_in_older_saves() -> None:
    params = _params()
    saved = applied.from_json(applied.to_json(applied.Applied(params, Bundle("default", ()))))
    assert saved.params.enforce_network_policy is True
    text = applied.to_json(applied.Applied(podspec.ClusterParams(
        name="emu", subnet=SUBNET, cluster_uid=uuid.UUID(int=7), created=datetime(2025, 1, 2, tzinfo=UTC),
        node_cpu=Fraction(2), node_memory=Fraction(2**34)), Bundle("default", ())))
    assert '"enforceNetworkPolicy": false' in text
    older = text.replace(',\n  "enforceNetworkPolicy": false', "").replace('"enforceNetworkPolicy": false,', "")
    assert "enforceNetworkPolicy" not in older
    assert applied.from_json(older).params.enforce_network_policy is False
