"""Pure parts of the Docker side: container attrs -> PodStatus, plans -> Docker mounts (no engine)."""

from __future__ import annotations

import dataclasses
import ipaddress
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from slurmpod import well_known as wk
from slurmpod_host.cluster import cli, manifests, podspec, runtime
from slurmpod_host.cluster import well_known as host_wk
from slurmpod_host.cluster.plan import Mount, MountKind

PARAMS = podspec.ClusterParams(name="demo", subnet=ipaddress.IPv4Network("10.213.9.0/24"),
                               cluster_uid=uuid.UUID(int=1), created=datetime(2025, 1, 1, tzinfo=UTC),
                               node_cpu=Fraction(2), node_memory=Fraction(2**34), workers=3)
PLANS = {p.name: p for p in podspec.plan_cluster(manifests.load(manifests.default_dir()), PARAMS, bytes)}


@dataclass
class FakeContainer:
    """The one attribute runtime.pod_status reads from a docker-py Container."""

    attrs: dict[str, Any]


def _attrs(status: str, health: dict[str, Any] | None = None, restarts: int = 0,
           code: int = 0) -> dict[str, Any]:
    state: dict[str, Any] = {"Status": status, "ExitCode": code, "StartedAt": "2025-01-01T00:00:00Z"}
    if health is not None:
        state["Health"] = health
    return {
        "Name": "/demo-worker-0",
        "State": state,
        "RestartCount": restarts,
        "Config": {"Labels": {host_wk.DOCKER_LABEL_ROLE: "worker"}},
        "NetworkSettings": {"Networks": {"demo-net": {"IPAddress": "10.213.9.3"}}},
    }


@pytest.mark.parametrize(
    ("attrs", "ready"),
    [
        (_attrs("running", {"Status": "healthy", "Log": [{"Output": "ready: ok\n"}]}), True),
        (_attrs("running", {"Status": "unhealthy", "Log": [{"Output": "ready: not ok\n"}]}), False),
        (_attrs("running", {"Status": "starting", "Log": []}), False),
        (_attrs("running"), True),  # no readinessProbe: running is ready
        (_attrs("exited", code=137), False),
        (_attrs("restarting", restarts=4, code=2), False),
    ],
    ids=["healthy", "unhealthy", "starting", "no-probe", "killed", "crash-loop"],
)
def test_pod_status(attrs: dict[str, Any], ready: bool, tmp_path: Path) -> None:
    st = runtime.pod_status(FakeContainer(attrs), tmp_path)
    assert (st.name, st.role, st.ip) == ("demo-worker-0", "worker", "10.213.9.3")
    assert st.ready is ready
    assert st.restarts == attrs["RestartCount"]


def test_pod_status_reads_termination_message(tmp_path: Path) -> None:
    log = tmp_path / podspec.termination_log_path("demo-worker-0")
    log.parent.mkdir(parents=True)
    log.write_text("slurmpod: bad input: POD_IP='x': not an IP address\n")
    st = runtime.pod_status(FakeContainer(_attrs("exited", code=2)), tmp_path)
    assert st.message == "slurmpod: bad input: POD_IP='x': not an IP address"
    assert st.exit_code == 2


def test_docker_mounts(tmp_path: Path) -> None:
    plan = PLANS["demo-controller-0"]
    extra = Mount(MountKind.TMPFS, "", "/dev/shm", False, 2**30)
    mounts = {m["Target"]: m for m in runtime._mounts(plan, tmp_path)}
    assert mounts[wk.PODINFO_DIR]["Type"] == "bind"
    assert mounts[wk.PODINFO_DIR]["Source"] == str(tmp_path / "pods/demo-controller-0/volumes/podinfo")
    assert mounts[wk.PODINFO_DIR]["ReadOnly"] is True
    state = mounts[wk.STATE_SAVE_LOCATION]
    assert (state["Type"], state["Source"]) == ("volume", "statesave-demo-controller-0")
    assert state["VolumeOptions"]["NoCopy"] is True  # a fresh PersistentVolume is empty
    assert mounts[wk.TERMINATION_LOG]["Type"] == "bind"
    (tmpfs,) = runtime._mounts(dataclasses.replace(plan, mounts=(extra,)), tmp_path)
    assert tmpfs["Type"] == "tmpfs"
    assert tmpfs["TmpfsOptions"] == {"SizeBytes": 2**30}  # the size kubelet would give the emptyDir


def test_cluster_from_plans(tmp_path: Path) -> None:
    cluster = cli.Cluster.from_plans("demo", tmp_path, list(PLANS.values()))
    assert cluster.controller == "demo-controller-0"
    assert cluster.login == "demo-login-0"
    assert cluster.workers == ("demo-worker-0", "demo-worker-1", "demo-worker-2")
    assert (cluster.db, cluster.accounting, cluster.restapi) == (None, None, None)  # off in the default render


def test_cluster_from_plans_with_accounting_and_restapi(tmp_path: Path) -> None:
    from slurmpod_host.cluster import auth

    bundle = auth.configure(manifests.load(manifests.default_dir() / "accounting"), "munge")
    names = {d.name for d in bundle.of_kind("Secret")}
    assert {wk.SECRET_MUNGE, wk.SECRET_DB_PASSWORD, wk.SECRET_JWT_KEY} <= names
    plans = podspec.plan_cluster(bundle, PARAMS, bytes)
    assert [p.role for p in plans][:3] == ["db", "accounting", "controller"]  # the order pods start in
    cluster = cli.Cluster.from_plans("demo", tmp_path, plans)
    assert (cluster.db, cluster.accounting, cluster.restapi) == ("demo-db-0", "demo-accounting-0", "demo-restapi-0")


@pytest.mark.parametrize(("code", "timed_out"), [(0, False), (1, False), (124, True), (137, True)])
def test_exec_result_timed_out(code: int, timed_out: bool) -> None:
    assert runtime.ExecResult(code, "", "").timed_out is timed_out
