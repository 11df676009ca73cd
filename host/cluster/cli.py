"""`slurmpod cluster up|down|status`: pods from deploy/kubernetes, run as Docker containers.

Exit codes: 0 success, 1 the cluster did not come up (diagnostics printed), 2 bad input.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any, TextIO

from slurmpod import well_known as wk
from slurmpod.errors import PermanentError, SlurmpodError, TransientError
from slurmpod_host.cluster import (
    applied,
    manifests,
    netenforce,
    netpolicy,
    network,
    no_api,
    podspec,
    publish,
    runtime,
    services,
    slurmstate,
    state,
)
from slurmpod_host.cluster import auth as cluster_auth
from slurmpod_host.cluster import secret_files as user_secret_files
from slurmpod_host.cluster.plan import PodPlan

log = logging.getLogger(__name__)

POLL_S = 2.0
QUERY_TIMEOUT_S = 20
LOG_TAIL_LINES = 30
DEFAULT_UP_TIMEOUT_S = 180.0  # `demo` (cli.py gives `cluster up --timeout` its own default)


@dataclass(frozen=True, slots=True)
class Cluster:
    """A running cluster: its pods by role."""

    name: str
    root: Path
    controller: str
    login: str
    workers: tuple[str, ...]
    seconds: float = 0.0
    # The pods of the optional roles (deploy/kubernetes/accounting), None where the manifests have none.
    db: str | None = None
    accounting: str | None = None
    restapi: str | None = None

    @classmethod
    def from_plans(cls, name: str, root: Path, plans: Sequence[PodPlan], seconds: float = 0.0) -> Cluster:
        by_role = {r: [p.name for p in plans if p.role == r] for r in wk.POD_ROLES}
        workers = tuple(by_role["worker"])
        first = {r: next(iter(by_role[r]), None) for r in wk.OPTIONAL_ROLES}
        return cls(name, root, by_role["controller"][0], by_role["login"][0], workers, seconds,
                   first["db"], first["accounting"], first["restapi"])


def attach(client: Any, name: str) -> Cluster | None:
    """The cluster ``name`` if its controller and login pods run; None otherwise."""
    pods = runtime.statuses(client, name, state.state_dir(name))
    running = {r: [s.name for s in pods if s.role == r and s.state == "running"] for r in wk.POD_ROLES}
    if not running["controller"] or not running["login"] or not running["worker"]:
        return None
    first = {r: next(iter(running[r]), None) for r in wk.OPTIONAL_ROLES}
    return Cluster(name, state.state_dir(name), running["controller"][0], running["login"][0],
                   tuple(running["worker"]), 0.0, first["db"], first["accounting"], first["restapi"])


def published(name: str) -> tuple[services.Published, ...]:
    """The Service ports ``name`` publishes on the host's loopback (none when it has no saved state)."""
    try:
        return applied.load(state.state_dir(name)).params.published
    except PermanentError:
        return ()


def _node_resources() -> tuple[Fraction, Fraction]:
    """This host's CPUs and memory: what kubelet reports as allocatable for a pod without limits."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return Fraction(os.cpu_count() or 1), Fraction(memory)


def slurm_query(client: Any, pods: Sequence[str], argv: Sequence[str]) -> runtime.ExecResult:
    """Run a Slurm client command in the first of ``pods`` that has it (controller, then login)."""
    result = runtime.ExecResult(-1, "", "no pod to ask")
    for pod in pods:
        result = runtime.exec_in(client, pod, argv, timeout_s=QUERY_TIMEOUT_S)
        if result.code not in {126, 127}:  # not found / not executable: try the next pod
            return result
    return result


def diagnostics(client: Any, name: str, root: Path, out: TextIO) -> None:
    """State, termination message and log tail of every pod."""
    for st in runtime.statuses(client, name, root):
        print(f"--- {st.name}: {st.state} health={st.health or '-'} restarts={st.restarts} "
              f"exit={st.exit_code}", file=out)
        if st.message:
            print(f"termination message: {st.message}", file=out)
        if st.probe:
            print(f"last readiness check: {st.probe}", file=out)
        print(runtime.logs_tail(client, st.name, LOG_TAIL_LINES).rstrip(), file=out)


def wait_idle(client: Any, cluster: Cluster, timeout_s: float, out: TextIO) -> None:
    """Until every worker is IDLE in Slurm and every pod is Ready (`kubectl wait --for=condition=Ready`)."""
    deadline = time.monotonic() + timeout_s
    slurm = slurmstate.client_in(client, [cluster.controller, cluster.login])
    last = ""
    while True:
        pods = runtime.statuses(client, cluster.name, cluster.root)
        crashed = [s for s in pods if s.state in {"exited", "dead"} or s.restarts >= runtime.CRASH_RESTARTS]
        if crashed:
            names = ", ".join(f"{s.name} ({s.state}, exit {s.exit_code}, {s.restarts} restarts)"
                              for s in crashed)
            raise PermanentError(f"pods crashed: {names}")
        waiting: dict[str, str]
        try:
            nodes = slurm.nodes(timeout=QUERY_TIMEOUT_S)
            waiting = dict(slurmstate.not_idle(cluster.workers, nodes))
        except SlurmpodError as exc:
            waiting = {"*": str(exc)}
        for s in pods:
            if not s.ready:
                waiting[s.name] = f"not ready ({s.state}, {s.health}: {s.probe or 'no check yet'})"
        if not waiting:
            return
        summary = ", ".join(f"{k}: {v}" for k, v in sorted(waiting.items()))
        if summary != last:
            print(f"waiting: {summary}", file=out, flush=True)
            last = summary
        if time.monotonic() > deadline:
            raise TransientError(f"cluster not ready after {timeout_s:.0f}s: {summary}")
        time.sleep(POLL_S)


def replace_stale(client: Any, name: str, out: TextIO) -> None:
    """Refuse to start over a cluster that has pods; remove what is left of one that has none.

    A reboot, or a `docker rm` of the pods, leaves the cluster's network and volumes behind with no pod
    to use them: that is stale state, and `up` replaces it.
    """
    existing = runtime.find(client, name)
    if existing.empty:
        return
    if existing.containers:
        raise PermanentError(f"cluster {name!r} already exists ({len(existing.containers)} pods); "
                             f"`slurmpod cluster down --name {name}` first")
    print(f"cluster {name!r} has no pods left: replacing its stale network and volumes", file=out, flush=True)
    for item in [*runtime.remove_all(client, name), *netenforce.remove(name), *publish.remove(name)]:
        print(f"removed {item}", file=out)


def up(name: str, flavor: str, workers: int, timeout_s: float, out: TextIO = sys.stdout, *,
       auth: str = wk.AUTH_MUNGE, manifests_dir: Path | None = None,
       enforce_network_policy: bool = False,
       secret_files: Mapping[str, Mapping[str, bytes]] | None = None) -> Cluster:
    """Create network, volumes, files and pods; wait until every worker is IDLE.

    ``auth`` (munge | slurm) picks the ConfigMap's auth type and which key Secret gets a generated key.
    ``manifests_dir``: a kustomization other than deploy/kubernetes (deploy/kubernetes/accounting).
    ``enforce_network_policy``: load the manifests' NetworkPolicies as iptables rules before any pod starts
    (netenforce.py); the host is checked first.
    ``secret_files``: the site's own Secrets, name -> key -> bytes (`--secret-file`, secret_files.py).
    """
    started = time.monotonic()
    podspec.validate_params(name, workers)
    client = runtime.connect()
    replace_stale(client, name, out)
    if enforce_network_policy:
        netenforce.check_host()
        netenforce.remove(name)  # an earlier cluster's rules, whose bridge is gone
    login_image = f"{wk.IMAGE_REPOSITORY_PREFIX}login:{flavor}"
    if runtime.missing_images(client, [login_image]):
        raise PermanentError(f"images missing: {login_image}; build them with "
                             f"`slurmpod images build --flavor {flavor}`")
    # The Secrets a user creates once per cluster: the auth key (generated below) and the login host key.
    bundle = cluster_auth.configure(manifests.load(manifests_dir or manifests.default_dir()), auth,
                                    ssh_host_key=runtime.ssh_host_key(client, login_image),
                                    from_files=secret_files)
    bundle = no_api.configure(bundle)
    cpu, memory = _node_resources()
    subnet = network.choose_subnet(name, runtime.taken_subnets(client))
    params = podspec.ClusterParams(
        name=name, subnet=subnet, cluster_uid=uuid.uuid4(), created=datetime.now(UTC),
        node_cpu=cpu, node_memory=memory, flavor=flavor, workers=workers,
        enforce_network_policy=enforce_network_policy)
    bundle = applied.resolve_secrets(bundle, os.urandom)  # generated once, kept for recreated pods
    plans = podspec.plan_cluster(bundle, params, os.urandom)
    publish.remove(name)  # an earlier cluster's rules, whose bridge is gone
    params = replace(params, published=services.choose(
        services.wanted(bundle, plans, name), publish.taken(), services.free_loopback_port, services.listened))
    missing = runtime.missing_images(client, [p.image for p in plans])
    if missing:
        raise PermanentError(f"images missing: {', '.join(missing)}; build them with "
                             f"`slurmpod images build --flavor {flavor}`")
    root = state.state_dir(name)
    state.remove(root)
    cluster = Cluster.from_plans(name, root, plans)
    try:
        state.write(root, [f for p in plans for f in p.files])
        applied.save(root, applied.Applied(params, bundle))
        runtime.create_network(client, params)
        runtime.create_volumes(client, name, plans)
        print(f"network {params.network} {params.subnet} (internal bridge, gateway {params.gateway})",
              file=out)
        publish.apply_cluster(client, params)
        for p in params.published:
            print(p.describe(), file=out)
        if enforce_network_policy:
            rules = netenforce.enforce(client, params, bundle, [netpolicy.Member.of(p) for p in plans])
            print(f"NetworkPolicies enforced: iptables chain {rules.chains[0]} ({len(rules.chains)} chains) "
                  f"from {netenforce.DOCKER_USER}", file=out)
        for i, plan in enumerate(plans):
            runtime.create_pod(client, plan, params, root)
            client.api.start(plan.name)
            print(f"pod {plan.name} {plan.ip} {plan.image}", file=out, flush=True)
            following = plans[i + 1] if i + 1 < len(plans) else None
            if plan.wait_ready and plan.readiness and following and following.statefulset == plan.statefulset:
                runtime.wait_healthy(client, plan.name, timeout_s)
        wait_idle(client, cluster, timeout_s - (time.monotonic() - started), out)
    except (SlurmpodError, runtime.DockerError) as exc:
        print(f"\ncluster {name!r} did not come up; pods:", file=sys.stderr)
        diagnostics(client, name, root, sys.stderr)
        print(f"\nleft running for inspection; remove with `slurmpod cluster down --name {name}`",
              file=sys.stderr)
        if isinstance(exc, SlurmpodError):
            raise
        raise PermanentError(f"Docker refused: {exc}") from exc
    return Cluster.from_plans(name, root, plans, time.monotonic() - started)


def down(name: str, out: TextIO = sys.stdout) -> list[str]:
    """Remove every Docker object labelled for ``name`` and its state dir; idempotent."""
    state.check_name(name)  # before any Docker call or path: nothing outside the state root is removed
    client = runtime.connect()
    removed = [*runtime.remove_all(client, name), *netenforce.remove(name), *publish.remove(name)]
    if state.remove(state.state_dir(name)):
        removed.append(f"state {state.state_dir(name)}")
    for item in removed:
        print(f"removed {item}", file=out)
    if not removed:
        print(f"cluster {name!r}: nothing to remove", file=out)
    return removed


def status(name: str, out: TextIO = sys.stdout) -> int:
    """Pods (name, state, IP) and sinfo; 1 when the cluster has no pods."""
    state.check_name(name)
    client = runtime.connect()
    root = state.state_dir(name)
    pods = runtime.statuses(client, name, root)
    if not pods:
        print(f"cluster {name!r}: no pods", file=out)
        return 1
    print(f"{'POD':<32} {'STATE':<11} {'READY':<10} {'RESTARTS':>8}  IP", file=out)
    for st in pods:
        print(f"{st.name:<32} {st.state:<11} {st.health or '-':<10} {st.restarts:>8}  {st.ip}", file=out)
    for st in pods:
        if st.state != "running" or st.restarts:
            print(f"\n{st.name}: {st.state}, last exit code {st.exit_code}", file=out)
            print(f"  termination message: {st.message or '(empty)'}", file=out)
        if st.probe and not st.ready:
            print(f"\n{st.name}: not ready: {st.probe}", file=out)
    for p in published(name):
        print(f"\n{p.describe()}", file=out)
    running = [s.name for s in pods if s.state == "running" and s.role in {"controller", "login"}]
    if running:
        result = slurm_query(client, running, ["sinfo"])
        print("\n" + (result.stdout or result.stderr).rstrip(), file=out)
    return 0


def print_sinfo(cluster: Cluster, out: TextIO = sys.stdout) -> None:
    client = runtime.connect()
    result = slurm_query(client, [cluster.controller, cluster.login], ["sinfo"])
    print((result.stdout or result.stderr).rstrip(), file=out)


def main(args: argparse.Namespace) -> int:
    command = args.cluster_command
    state.check_name(args.name)
    if command == "up":
        where = Path(args.manifests) if args.manifests else None
        cluster = up(args.name, args.flavor, args.workers, args.timeout, auth=args.auth, manifests_dir=where,
                     enforce_network_policy=args.enforce_network_policy,
                     secret_files=user_secret_files.parse(args.secret_file))
        print(f"cluster {cluster.name!r} up in {cluster.seconds:.1f}s: {len(cluster.workers)} workers IDLE "
              f"(auth/{args.auth})")
        print_sinfo(cluster)
        print(f"shell: docker exec -it {cluster.login} su - {wk.DEMO_USER}")
        return 0
    if command == "down":
        down(args.name)
        return 0
    if command == "status":
        return status(args.name)
    raise PermanentError(f"unknown cluster command {command!r}")
