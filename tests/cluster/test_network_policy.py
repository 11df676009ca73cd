"""The chart's NetworkPolicies enforced on the emulator's bridge (`cluster up --enforce-network-policy`).

Its own cluster (`spnetpol`, one worker) from deploy/kubernetes/accounting, so every role is there. Each
refused connection goes to a port that listens, and a peer the policies allow reaches that same port:
the refusal is the policy's, not a missing listener. REJECT answers at once, so a refusal takes well
under the probe's limit; a timeout would mean the packets were dropped instead.
Ref: https://kubernetes.io/docs/concepts/services-networking/network-policies/
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clusterkit import Session, own_cluster

from slurmpod import well_known as wk
from slurmpod_host.cluster import netenforce, netpolicy

pytestmark = [pytest.mark.docker, pytest.mark.cluster, pytest.mark.netpol]

NAME = "spnetpol"
WORKERS = 1
MANIFESTS = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "accounting"
PROBE = (Path(__file__).resolve().parent / "connect_probe.sh").read_text(encoding="utf-8")
PROBE_LIMIT_S = 3  # timeout(1) around one connect() inside the pod
REFUSED_WITHIN_S = 2.5  # a REJECT is answered at once; exec round trips make the rest
SLURMCTLD, SLURMDBD, MARIADB = 6817, 6819, 3306


def _filter_rules() -> str:
    listed = subprocess.run(["iptables", "-w", "-S"], capture_output=True, text=True, timeout=30, check=False)
    assert listed.returncode == 0, listed.stderr
    return listed.stdout


@pytest.fixture(scope="module")
def enforced(docker_client: Any, flavor: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with own_cluster(docker_client, NAME, flavor, WORKERS, tmp_path_factory.mktemp("spnetpol-state"),
                     "--manifests", str(MANIFESTS), "--enforce-network-policy") as s:
        assert s.cluster.db and s.cluster.accounting and s.cluster.restapi, s.cluster
        yield s
    # `cluster down` (own_cluster's exit) takes the chains and the DOCKER-USER jump away.
    left = netenforce.find_rules(_filter_rules(), NAME)
    assert left.empty, left


def _probe(s: Session, pod: str, host: str, port: int) -> tuple[str, float]:
    started = time.monotonic()
    result = s.root_in(pod, "bash", "-c", PROBE, "probe", host, str(port), str(PROBE_LIMIT_S), timeout=30)
    took = time.monotonic() - started
    print(f"{pod} -> {host}:{port}: {result.stdout.strip()} in {took:.2f} s")
    assert result.code == 0, result.stderr
    return result.stdout.strip(), took


def _refused(s: Session, pod: str, host: str, port: int) -> None:
    verdict, took = _probe(s, pod, host, port)
    assert verdict == "refused", (pod, host, port, verdict)
    assert took < REFUSED_WITHIN_S, f"{pod} -> {host}:{port} refused only after {took:.1f} s"


def _db(s: Session) -> str:
    assert s.cluster.db is not None
    return s.cluster.db


def _acct(s: Session) -> str:
    assert s.cluster.accounting is not None
    return s.cluster.accounting


def test_the_rules_are_loaded_from_docker_user(enforced: Session) -> None:
    found = netenforce.find_rules(_filter_rules(), NAME)
    assert found.chains and found.chains[0] == netpolicy.main_chain(NAME), found
    assert [j[0] for j in found.jumps] == [netenforce.DOCKER_USER], found.jumps


def test_allowed_connections_succeed(enforced: Session) -> None:
    c = enforced.cluster
    assert _probe(enforced, c.login, c.controller, SLURMCTLD)[0] == "open"  # clients to slurmctld
    assert _probe(enforced, c.login, _acct(enforced), SLURMDBD)[0] == "open"  # sacct to slurmdbd
    assert _probe(enforced, c.controller, _acct(enforced), SLURMDBD)[0] == "open"
    assert _probe(enforced, _acct(enforced), _db(enforced), MARIADB)[0] == "open"  # slurmdbd to MariaDB
    assert _probe(enforced, c.workers[0], c.controller, SLURMCTLD)[0] == "open"


def test_the_login_pod_cannot_scrape_the_health_agent(enforced: Session) -> None:
    """The port's ingress admits networkPolicy.metricsFrom (anyone by default), for a scraper outside the
    release; the login pod's egress, where users have a shell, lists no such port."""
    _refused(enforced, enforced.cluster.login, enforced.cluster.workers[0], wk.HEALTH_AGENT_METRICS_PORT)


def test_the_login_pod_cannot_reach_mariadb(enforced: Session) -> None:
    _refused(enforced, enforced.cluster.login, _db(enforced), MARIADB)
    _refused(enforced, enforced.cluster.controller, _db(enforced), MARIADB)


def test_mariadb_connects_nowhere(enforced: Session) -> None:
    _refused(enforced, _db(enforced), enforced.cluster.controller, SLURMCTLD)
    _refused(enforced, _db(enforced), _acct(enforced), SLURMDBD)


def test_a_job_reaches_neither_slurmdbd_nor_mariadb(enforced: Session) -> None:
    """A job step on the worker pod: srun itself needs the login <-> worker rules (6818, SrunPortRange)."""
    c = enforced.cluster
    for host, port, want in ((c.controller, SLURMCTLD, "open"), (_acct(enforced), SLURMDBD, "refused"),
                             (_db(enforced), MARIADB, "refused")):
        started = time.monotonic()
        result = enforced.as_researcher("srun", "-N1", "-n1", "-t", "2", "bash", "-c", PROBE, "probe", host, str(port),
                                  str(PROBE_LIMIT_S), timeout=120)
        print(f"job -> {host}:{port}: {result.stdout.strip()} ({time.monotonic() - started:.1f} s with srun)")
        assert result.code == 0, result.stderr
        assert result.stdout.strip() == want, (host, port, result.stdout, result.stderr)
