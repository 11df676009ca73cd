"""Helpers for the health tests: a short HealthCheckInterval, the worker's health config, fake-GPU pods.

Worst cases (every wait below is bounded by one of these, and the tests print what they measured):
slurmd runs HealthCheckProgram every INTERVAL_S; slurmpod lifts its own drain after CLEAN_RUNS clean
runs; a prolog ends within its 20 s deadline (PrologEpilogTimeout 60 s behind it).
"""

from __future__ import annotations

import io
import json
import re
import shlex
import tarfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from clusterkit import Session, job, node, scontrol, spec_edited, wait_for
from fakes import gpu_libs

from slurmpod import well_known as wk
from slurmpod.nodestate import NodeState
from slurmpod_host.cluster import lifecycle
from slurmpod_host.cluster.jobs import JobRecord

INTERVAL_S = 10  # HealthCheckInterval for these tests (the default is 300)
CLEAN_RUNS = 2  # clean periodic runs before slurmpod lifts its own drain
UNDRAIN_WORST_S = INTERVAL_S * (CLEAN_RUNS + 1) + 15
DRAIN_WORST_S = INTERVAL_S + 25.0  # the next periodic run, or a prolog (20 s deadline) + its drain RPC
JOB_WORST_S = 120.0
# slurmctld gives a requeued batch job a begin time about two minutes ahead (entrypoints/prestop.py lifts
# it for its own requeues; a failed prolog's requeue keeps it), then one scheduling pass.
REQUEUED_JOB_WORST_S = 120.0 + 60.0
FINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"})
METRICS = {c: f"{wk.HEALTH_METRICS_DIR}/slurmpod_health_{c}.prom" for c in ("prolog", "epilog", "periodic")}
# Fake-GPU pods: the C fakes and one state file per pod (named by host name) on the shared /home.
FAKE_DIR = "/home/.slurmpod-fakegpu"
FAKE_LIBS = f"{FAKE_DIR}/lib"
FAKE_STATE_DIR = f"{FAKE_DIR}/state"
SYSTEM_LIBS = "/usr/lib/x86_64-linux-gnu"


@contextmanager
def short_interval(session: Session, cred_expire_s: int | None = None) -> Iterator[None]:
    """The session's cluster with HealthCheckInterval=INTERVAL_S (slurmpod's hooks otherwise default).

    ``cred_expire_s``: also AuthInfo=cred_expire, which is how long slurmctld holds a requeued batch job
    before it may start again (120 s by default). Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_cred_expire
    """
    def edit(spec: str) -> str:
        spec = spec.rstrip("\n")
        assert "healthCheckInterval: 300" in spec, spec  # the shipped ConfigMap's value
        spec = spec.replace("healthCheckInterval: 300", f"healthCheckInterval: {INTERVAL_S}")
        if cred_expire_s is not None:
            assert "extraLines" not in spec, spec
            spec += f"\nextraLines:\n  - AuthInfo=cred_expire={cred_expire_s}"
        return spec + "\n"

    with spec_edited(session, edit):  # restores the workers too: a fresh health.json and health state
        yield


def health_config(s: Session, pod: str) -> dict[str, object]:
    result = s.root_in(pod, "cat", wk.HEALTH_CONFIG)
    assert result.code == 0, result.stderr
    doc: dict[str, object] = json.loads("\n".join(x for x in result.stdout.splitlines() if not x.startswith("#")))
    return doc


def write_file(s: Session, pod: str, path: str, text: str) -> None:
    """Replace ``path`` in ``pod`` at once (a reader sees the old file or the new one)."""
    new = f"{path}.new"
    script = f"printf '%s' {shlex.quote(text)} > {new} && mv {new} {path}"
    result = s.root_in(pod, "sh", "-c", script)
    assert result.code == 0, result.stderr


def write_health_config(s: Session, pod: str, doc: Mapping[str, object]) -> None:
    write_file(s, pod, wk.HEALTH_CONFIG, json.dumps(dict(doc), sort_keys=True) + "\n")


def drained_with(s: Session, name: str, prefix: str) -> NodeState | None:
    n = node(s, name)
    return n if n is not None and n.drained and n.reason.startswith(prefix) else None


def install_fakes(s: Session, built: Path) -> None:
    """Copy the compiled fakes onto the shared /home (through the login pod) for fake-GPU workers."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for lib in sorted(built.iterdir()):
            tar.add(lib, arcname=f"lib/{lib.name}")
        info = tarfile.TarInfo("state")
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
    assert s.root_in(s.cluster.login, "mkdir", "-p", FAKE_DIR).code == 0
    assert s.client.containers.get(s.cluster.login).put_archive(FAKE_DIR, data.getvalue())


@contextmanager
def fakes_installed(s: Session, build_dir: Path) -> Iterator[None]:
    """The fakes compiled in ``build_dir`` and installed on the shared /home; removed afterwards."""
    install_fakes(s, gpu_libs.build(build_dir, FAKE_STATE_DIR))
    try:
        yield
    finally:
        s.root_in(s.cluster.login, "rm", "-rf", FAKE_DIR)


# /dev/nvidiaN (File= from gpu/nvml's minor numbers, 4 + index in the fake) must be character devices
# to slurmd; pods here may not mknod, so they point at /dev/null. Nothing opens them.
DEVICE_LINKS = "for i in $(seq 0 15); do ln -sfn /dev/null /dev/nvidia$i; done"


def fake_gpu_patch(nodes: str = DEVICE_LINKS) -> lifecycle.PodPatch:
    """The worker pod with the fakes installed as the driver's libraries before the entrypoint runs, and
    ``nodes`` (shell) making its /dev/nvidia* files.

    The production image stays free of them: they come from the test's /home, at pod start.
    """
    script = f"cp {FAKE_LIBS}/* {SYSTEM_LIBS}/ && ldconfig && {nodes} && exec slurmpod entrypoint worker"
    return lifecycle.PodPatch(command=("sh", "-c"), args=(script,))


def gpu_count(gres: str) -> int | None:
    """N from the node's Gres as Slurm shows it: ``gpu:8``, or typed by gpu/nvml ``gpu:a100:8(S:0)``."""
    m = re.fullmatch(r"gpu(?::[^:,()]+)?:(\d+)(?:\(.*\))?", gres)
    return int(m.group(1)) if m else None


def wait_job_done(s: Session, job_id: int, bound: float = JOB_WORST_S) -> tuple[JobRecord, float]:
    """The job's final state and the seconds waited (at most ``bound``)."""
    seen: list[JobRecord] = []

    def done() -> JobRecord | None:
        st = job(s, job_id)
        seen[:] = [st]
        return st if st.state in FINAL else None
    try:
        return wait_for(f"job {job_id} done", done, bound)
    except AssertionError as exc:  # say where the job stood
        raise AssertionError(f"{exc}; last seen {seen[0] if seen else None}") from None


def drain_as_admin(s: Session, name: str, reason: str) -> None:
    scontrol(s, "update", f"nodename={name}", "state=drain", f"reason={reason}")


def resume(s: Session, name: str) -> None:
    """Lift a drain (Slurm refuses RESUME on a node that is not drained: only then is it sent)."""
    n = node(s, name)
    if n is not None and n.drained:
        scontrol(s, "update", f"nodename={name}", "state=resume")


def replace_worker(s: Session, pod: str, patch: lifecycle.PodPatch) -> None:
    lifecycle.replace_pod(s.client, s.cluster.name, pod, patch)


def just_after_a_periodic_run(s: Session, pod: str) -> float:
    """Wait for the next periodic run on ``pod`` to write its metrics (it writes them last), so that a
    fault injected now is met first by a prolog, not by a periodic run: the next one is INTERVAL_S away."""
    path = METRICS["periodic"]

    def stamp() -> str:  # %y carries nanoseconds
        return s.root_in(pod, "stat", "-c", "%y", path).stdout.strip()

    before = stamp()
    _, waited = wait_for(f"a periodic run on {pod}", lambda: True if stamp() != before else None,
                         INTERVAL_S + 15)
    return waited


def wait_job_state(s: Session, job_id: int, want: str) -> tuple[JobRecord, float]:
    """The job once its state is ``want``, and the seconds waited (at most JOB_WORST_S)."""
    def reached() -> JobRecord | None:
        st = job(s, job_id)
        return st if st.state == want else None
    return wait_for(f"job {job_id} {want}", reached, JOB_WORST_S)
