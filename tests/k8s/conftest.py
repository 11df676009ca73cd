"""One local Kubernetes 1.20.2 and one release of the chart for the whole k8s session.

`slurmpod k8s up` (the control plane is built first when this machine has none), then the chart
installed as a user installs it (slurmpod_host.kube.release) with the images of SLURMPOD_TEST_FLAVOR
(default 24.11). No Docker engine is a test FAILURE, never a skip. test_teardown.py runs last: it takes
the cluster down and checks that nothing is left behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Generator, Iterator
from typing import Any

import pytest
from kubekit import NAMESPACE, POD_COUNT, READY_TIMEOUT_S, RELEASE, Kube, note, session_values

from slurmpod.errors import PermanentError
from slurmpod_host.cluster import demo
from slurmpod_host.images.build import find_repo
from slurmpod_host.kube import lifecycle, release
from slurmpod_host.kube.layout import Layout

ORDER = ("test_pods_ready.py", "test_jobs.py", "test_downward_api.py", "test_probes.py", "test_topology_api.py",
         "test_policy_configmap.py", "test_autoscale.py", "test_bad_values.py", "test_delete_pod.py",
         "test_k8s_sync.py", "test_k8s_remediation.py", "test_upgrade.py", "test_teardown.py")
UP_TIMEOUT_S = 900  # a cold control-plane build is 6-8 min on 2 cores; a cached one is about 20 s


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here is marked k8s; modules run in ORDER (the disruptive ones last, teardown at the end)."""
    for item in items:
        item.add_marker(pytest.mark.k8s)
    rank = {name: i for i, name in enumerate(ORDER)}
    items.sort(key=lambda item: rank.get(item.path.name, len(ORDER) - 1))


def run_slurmpod(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    # -P: the installed packages, never the checkout's ./slurmpod folder (which would shadow them)
    return subprocess.run([sys.executable, "-P", "-m", "slurmpod.cli", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.fixture(scope="session")
def layout() -> Layout:
    return Layout.from_env()


@pytest.fixture(scope="session")
def kube(docker_client: Any, layout: Layout) -> Iterator[Kube]:
    flavor = os.environ.get("SLURMPOD_TEST_FLAVOR", "24.11")
    demo.ensure_images(flavor, sys.stderr)
    run_slurmpod("k8s", "down", timeout=300)  # a cluster left by an aborted session: start from a fresh one
    up = run_slurmpod("k8s", "up", timeout=UP_TIMEOUT_S)
    sys.stderr.write(up.stdout)
    if up.returncode != 0:
        pytest.fail(f"slurmpod k8s up failed (exit {up.returncode}):\n{up.stdout}\n{up.stderr}", pytrace=False)
    chart = release.Chart(find_repo(), RELEASE, NAMESPACE)
    k = Kube(layout, chart, flavor)
    installed = release.install(layout, chart, session_values(flavor))
    if installed.returncode != 0:
        pytest.fail(f"helm install failed:\n{installed.stdout}\n{installed.stderr}", pytrace=False)
    try:
        seconds = release.wait_ready(layout, NAMESPACE, POD_COUNT, READY_TIMEOUT_S)
    except PermanentError as exc:
        pytest.fail(str(exc), pytrace=False)
    note(f"helm install -> {POD_COUNT} pods Ready in {seconds:.1f}s")
    try:
        yield k
    finally:  # test_teardown.py has taken it down already unless the session stopped early
        run_slurmpod("k8s", "down", timeout=300)


_DAEMON_LOG_LINES = 15


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """A failed test's report ends with the control plane as it was then: which daemons run, and the last
    lines of each one's log, so a failure on a machine where no one can look still says which part
    stopped working."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed or call.when == "teardown":
        return
    layout = Layout.from_env()
    lines = [f"{name}: {'running, pid ' + str(pid) if pid else 'NOT RUNNING'}"
             for name, pid in lifecycle.running(layout).items()]
    for name in ("kube-controller-manager", "kube-apiserver", "kubelet", "kube-scheduler"):
        path = layout.logs / f"{name}.log"
        tail = path.read_text(errors="replace").splitlines()[-_DAEMON_LOG_LINES:] if path.exists() else ["(no log)"]
        lines += [f"--- {name}.log, last {_DAEMON_LOG_LINES} lines", *(line[:400] for line in tail)]
    report.sections.append(("control plane at the failure", "\n".join(lines)))
