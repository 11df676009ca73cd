"""Every GPU, CUDA/NCCL and node check against the C fakes, through the real pynvml and cffi paths.

One subprocess runs the whole table of in-process cases (tests/unit/health_table.py); the cases that
need a process of their own (NVML hanging, no library at all) each get one. Nothing is patched: the
fakes sit at the C ABI, and the state file says what is broken.

An XID raised before a check starts reaches it through the kernel log only: the fake NVML, like the
driver, gives an event set just the XIDs raised after it was registered (tests/fakes/gpu_libs.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import paths
import pytest
from fakes.gpu_libs import build, raise_xid, write_state

from slurmpod.prolog_epilog.checks.gpu import xid

HERE = paths.KITS
HEALTHY = "gpus=8\nnvlinks=4\nfabric.state=3\n"
XID79_GPU2 = "NVRM: Xid (PCI:0000:12:00): 79, pid=0, GPU has fallen off the bus."


def _kmsg(seq: int, message: str, usec: int | None = None) -> str:
    """A /dev/kmsg record logged ``usec`` after boot; by default now (the kernel's clock, /proc/uptime)."""
    if usec is None:
        usec = int(float(Path("/proc/uptime").read_text(encoding="ascii").split()[0]) * 1_000_000)
    return f"6,{seq},{usec},-;{message}\n"


# id: (context, state-file lines added to HEALTHY, env, check, status, text in the reason)
CASES: dict[str, tuple[str, str, dict[str, str], str, str, str]] = {
    "healthy-periodic": ("periodic", "", {}, "gpu-count", "ok", "8 GPUs"),
    "xid-48": ("periodic", "", {}, "xid", "fail", "XID 48"),
    "xid-79": ("periodic", "", {}, "xid", "fail", "XID 79 (GPU has fallen off the bus) on GPU 3"),
    "xid-94-warns": ("periodic", "", {}, "xid", "warn", "XID 94"),
    "xid-119": ("prolog", "", {}, "xid", "fail", "XID 119 (GSP RPC timeout)"),
    "xid-in-epilog-names-the-job": ("epilog", "", {"SLURM_JOB_ID": "77", "SLURM_JOB_GPUS": "2,3"},
                                    "xid", "fail", "during job 77 on its GPU(s) 3"),
    "xid-in-epilog-without-gpu-list": ("epilog", "", {"SLURM_JOB_ID": "78"}, "xid", "fail",
                                       "XID 48 (double-bit ECC error (DBE)) on GPU 6; during job 78"),
    "xid-on-another-gpu-is-not-the-jobs": ("epilog", "", {"SLURM_JOB_ID": "79", "SLURM_JOB_GPUS": "0"},
                                           "xid", "fail", "on GPU 6"),
    "xid-from-kernel-log": ("periodic", "", {}, "xid", "fail", "XID 79 (GPU has fallen off the bus) on GPU 2"),
    "ecc-uncorrectable": ("prolog", "gpu.2.ecc.volatile.uncorrected=1", {}, "ecc", "fail", "GPU 2 1 DBE"),
    "ecc-correctable-over-limit": ("periodic", "gpu.4.ecc.volatile.corrected=20000", {}, "ecc", "warn",
                                   "GPU 4 20000 SBE"),
    "remap-pending": ("prolog", "gpu.1.remap.pending=1", {}, "remap", "fail", "row remap pending: GPU 1"),
    "remap-failure": ("periodic", "gpu.6.remap.failure=1", {}, "remap", "fail", "row remapping failed: GPU 6"),
    "remap-not-supported-never-fails": ("periodic", "unsupported=nvmlDeviceGetRemappedRows", {}, "remap",
                                        "skipped", "not supported"),
    "retired-pages-at-limit": ("periodic", "gpu.0.retired.dbe=60", {}, "retired-pages", "fail", "60 pages"),
    "nvlink-down": ("periodic", "gpu.5.nvlink.2.down=1", {}, "nvlink", "fail", "GPU 5 link 2 down"),
    "gpu-missing": ("prolog", "gpus=7", {"SLURMPOD_EXPECTED_GPUS": "8"}, "gpu-count", "fail", "7 of 8 GPUs visible"),
    "memory-held-by-stray-process": ("prolog", "gpu.0.procs=4242:2147483648\ngpu.0.mem_used=2147483648", {},
                                     "gpu-memory", "fail", "GPU 0 2048 MiB by pid 4242"),
    "memory-held-on-another-jobs-gpu-is-not-ours": (
        "prolog", "gpu.0.procs=4242:2147483648", {"SLURM_JOB_ID": "5", "SLURM_JOB_GPUS": "1"}, "gpu-memory", "ok", ""),
    "clocks-hw-slowdown-warns": ("periodic", "gpu.1.clocks_event=8", {}, "clocks", "warn", "GPU 1 hw_slowdown"),
    "temperature-over-limit": ("periodic", "gpu.0.temp=97", {}, "temperature", "fail", "GPU 0 97 C"),
    "persistence-off-warns": ("periodic", "gpu.3.persistence=0", {}, "persistence", "warn", "off on GPU 3"),
    "fabric-in-progress": ("prolog", "fabric.state=2", {}, "fabric", "fail", "in progress"),
    "cuda-memory-corrupt": ("periodic", "cuda.corrupt=2", {}, "cuda-memory", "fail",
                            "GPU 2: memset pattern read back wrong"),
    "cuda-driver-older-than-the-runtime-on-a-gpu-host": ("periodic", "cuda.error=35", {}, "cuda-memory", "fail",
                                                         "CUDA driver version is insufficient"),
    "nccl-below-floor": ("periodic", "nccl.busbw=200", {}, "nccl-allreduce", "fail", "floor 460"),
    "nccl-healthy": ("periodic", "", {}, "nccl-allreduce", "ok", "busbw over 8 GPUs"),
    "job-skips-a-skippable-check": ("periodic", "gpu.5.nvlink.2.down=1", {"SLURM_JOB_ID": "9",
                                    "SLURM_JOB_COMMENT": "run 3 slurmpod:skip=nvlink"}, "nvlink", "skipped",
                                    "skipped for job 9"),
    "job-cannot-skip-remap": ("prolog", "gpu.1.remap.pending=1", {"SLURM_JOB_ID": "9",
                              "SLURM_JOB_EXTRA": "slurmpod:skip=remap"}, "remap", "fail", "row remap pending"),
}
# id: (gpu, xid) raised before the check starts: in the kernel log, and as NVML events no set was registered for
XIDS: dict[str, tuple[tuple[int, int], ...]] = {
    "xid-48": ((0, 48),), "xid-79": ((3, 79),), "xid-94-warns": ((1, 94),), "xid-119": ((5, 119),),
    "xid-in-epilog-names-the-job": ((3, 79),), "xid-in-epilog-without-gpu-list": ((6, 48),),
    "xid-on-another-gpu-is-not-the-jobs": ((6, 48),),
}


def _result(report: dict[str, Any], check: str) -> dict[str, Any]:
    found = [r for r in report["results"] if r["check"] == check]
    assert found, f"{check} did not run: {[r['check'] for r in report['results']]}"
    return found[0]


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.getbasetemp() / "fake-gpu-libs")


def _env(libs: Path | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "FAKE_NVML", "CUDA_"))}
    env.pop("LD_LIBRARY_PATH", None)
    if libs is not None:
        env["LD_LIBRARY_PATH"] = str(libs)
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def table(libs: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("health-table")
    cases = []
    for case_id, (context, lines, env, *_rest) in CASES.items():
        d = root / case_id
        d.mkdir()
        kmsg = d / "kmsg"
        kmsg.write_text(_kmsg(100, XID79_GPU2) if case_id == "xid-from-kernel-log" else "", encoding="utf-8")
        # a 2 GiB all-reduce: the fake's modelled time dwarfs Python's own overhead on a loaded machine
        (d / "health.yaml").write_text(f"kernel_log: {kmsg}\nthresholds: {{allreduce_bytes: {2**31}}}\n",
                                       encoding="utf-8")
        state = write_state(d / "state", HEALTHY + lines)
        for gpu, code in XIDS.get(case_id, ()):
            raise_xid(state, kmsg, gpu, code)
        cases.append({"id": case_id, "context": context, "state": str(state), "env": env,
                      "config": str(d / "health.yaml"), "state_dir": str(d / "sd")})
    (root / "table.json").write_text(json.dumps(cases), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-P", str(HERE / "health_table.py"), str(root / "table.json")],
                          capture_output=True, text=True, env=_env(libs), timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


@pytest.mark.parametrize("case_id", list(CASES), ids=list(CASES))
def test_fault_gives_status_and_reason(table: dict[str, Any], case_id: str) -> None:
    *_, check, status, text = CASES[case_id]
    result = _result(table[case_id], check)
    assert result["status"] == status, result
    assert text in result["reason"], result


def test_healthy_node_passes_every_periodic_check(table: dict[str, Any]) -> None:
    report = table["healthy-periodic"]
    assert report["status"] == "ok"
    assert {r["status"] for r in report["results"]} <= {"ok", "skipped"}, report


@pytest.mark.parametrize(("case_id", "remediation", "gpus"), [
    ("xid-79", "replace_node", [3]),
    ("xid-48", "restart_pod", [0]),
    ("remap-failure", "replace_node", [6]),
    ("remap-pending", "restart_pod", [1]),
    ("gpu-missing", "replace_node", []),
], ids=["xid79-replace", "xid48-restart", "remap-failure-replace", "remap-pending-restart", "missing-replace"])
def test_failures_carry_remediation_and_gpus(table: dict[str, Any], case_id: str, remediation: str,
                                             gpus: list[int]) -> None:
    result = _result(table[case_id], CASES[case_id][3])
    assert result["remediation"] == remediation
    assert [g["index"] for g in result["gpus"]] == gpus
    if gpus:
        assert result["gpus"][0]["uuid"] == f"GPU-00000000-0000-0000-0000-{gpus[0]:012d}"


def test_a_failure_makes_the_run_fail_and_a_warning_does_not(table: dict[str, Any]) -> None:
    assert table["remap-pending"]["status"] == "fail"
    assert table["xid-94-warns"]["status"] == "warn"


def _cli(libs: Path | None, tmp: Path, context: str, state: str, xids: tuple[tuple[int, int], ...] = (),
         **env: str) -> subprocess.CompletedProcess[str]:
    """``slurmpod check run`` on ``state``, with ``xids`` (gpu, xid) raised before it starts."""
    cfg = tmp / "health.yaml"
    cfg.write_text(f"kernel_log: {tmp / 'kmsg'}\ndeadline: {{prolog: 4}}\n", encoding="utf-8")
    state_file = write_state(tmp / "state", state)
    for gpu, code in xids:
        raise_xid(state_file, tmp / "kmsg", gpu, code)
    slurmpod = Path(sys.executable).with_name("slurmpod")
    return subprocess.run([str(slurmpod), "check", "run", "--context", context, "--json", "--config", str(cfg),
                           "--state-dir", str(tmp / "sd"), "--metrics-dir", str(tmp / "metrics")],
                          capture_output=True, text=True, timeout=60, check=False,
                          env=_env(libs, FAKE_NVML_STATE=str(state_file), **env))


def test_nvml_hanging_fails_gpu_count_within_the_deadline(libs: Path, tmp_path: Path) -> None:
    # The subprocess timeout is the guard: a run that waited on the hung nvmlInit would never return.
    proc = _cli(libs, tmp_path, "prolog", "gpus=8\nhang=nvmlInit")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    count = _result(report, "gpu-count")
    assert count["status"] == "fail"
    assert count["reason"].startswith("NVML hung: nvmlInit did not return")
    assert {r["status"] for r in report["results"] if r["check"] not in {"gpu-count", "disk", "mounts"}} == {"skipped"}


def test_a_call_hanging_mid_run_fails_that_check_and_the_run_goes_on(libs: Path, tmp_path: Path) -> None:
    proc = _cli(libs, tmp_path, "periodic", "gpus=2\nhang=nvmlDeviceGetCurrentClocksEventReasons",
                SLURMPOD_AUTH="slurm")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    clocks = _result(report, "clocks")
    assert clocks["status"] == "fail"
    assert "hung" in clocks["reason"] or "timed out after" in clocks["reason"]
    assert _result(report, "disk")["status"] == "ok"  # checks after the hang still ran


@pytest.mark.parametrize(("expected", "status", "code"), [("8", "fail", 1), ("", "skipped", 0)],
                         ids=["gpus-expected-fails", "no-gpus-expected-skips"])
def test_libnvidia_ml_missing(tmp_path: Path, expected: str, status: str, code: int) -> None:
    proc = _cli(None, tmp_path, "prolog", "", SLURMPOD_EXPECTED_GPUS=expected)
    assert proc.returncode == code, proc.stderr
    count = _result(json.loads(proc.stdout), "gpu-count")
    assert count["status"] == status
    assert "no NVML library" in count["reason"]


@pytest.fixture(scope="module")
def cuda_only(libs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CPU node's libraries: the CUDA runtime and NCCL (a framework's wheels bring them), no driver."""
    out = tmp_path_factory.mktemp("cuda-only")
    for name in ("libcudart.so", "libnccl.so.2"):
        shutil.copy(libs / name, out / name)
    return out


@pytest.mark.parametrize(("error", "expected", "outcome"), [
    ("35", "", ("skipped", 0)), ("100", "", ("skipped", 0)), ("35", "8", ("fail", 1)),
], ids=["no-driver-skips", "no-device-skips", "no-driver-with-gpus-expected-fails"])
def test_a_cuda_runtime_without_a_driver(cuda_only: Path, tmp_path: Path, error: str, expected: str,
                                         outcome: tuple[str, int]) -> None:
    status, code = outcome
    proc = _cli(cuda_only, tmp_path, "periodic", f"cuda.error={error}", SLURMPOD_AUTH="slurm",
                SLURMPOD_EXPECTED_GPUS=expected)
    assert proc.returncode == code, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    memory = _result(report, "cuda-memory")
    assert memory["status"] == status, memory
    assert f"(CUDA error {error})" in memory["reason"]
    assert _result(report, "nccl-allreduce")["status"] == status
    if expected:
        assert "with 8 expected GPUs" in memory["reason"]
        assert memory["remediation"] == "restart_pod"
    else:
        assert {r["status"] for r in report["results"]} <= {"ok", "skipped"}, report


def test_check_run_json_shape_and_metrics(libs: Path, tmp_path: Path) -> None:
    proc = _cli(libs, tmp_path, "prolog", "gpus=8", ((1, 48),), SLURM_JOB_ID="12")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert set(report) == {"context", "node", "job_id", "status", "action", "duration_s", "results"}
    assert (report["context"], report["job_id"], report["status"], report["action"]) == ("prolog", 12, "fail", "none")
    assert set(report["results"][0]) == {"check", "status", "reason", "remediation", "duration_s", "gpus", "values"}
    assert [r["check"] for r in report["results"]][:2] == ["gpu-count", "xid"]
    prom = (tmp_path / "metrics" / "slurmpod_health_prolog.prom").read_text(encoding="utf-8")
    assert 'slurmpod_health_check_status{check="xid",context="prolog"} 2' in prom
    assert 'slurmpod_health_check_status{check="gpu-count",context="prolog"} 0' in prom
    assert 'slurmpod_health_xid_total{gpu="1",xid="48"} 1' in prom
    assert 'slurmpod_health_run_duration_seconds{context="prolog"}' in prom


def _again(libs: Path, tmp_path: Path) -> dict[str, Any]:
    """The periodic run once more on the same state file and state dir."""
    cfg = tmp_path / "health.yaml"
    slurmpod = Path(sys.executable).with_name("slurmpod")
    again = subprocess.run([str(slurmpod), "check", "run", "--context", "periodic", "--json", "--config", str(cfg),
                            "--state-dir", str(tmp_path / "sd"), "--metrics-dir", str(tmp_path / "metrics")],
                           capture_output=True, text=True, timeout=60, check=False,
                           env=_env(libs, FAKE_NVML_STATE=str(tmp_path / "state"), SLURMPOD_AUTH="slurm"))
    return _result(json.loads(again.stdout), "xid")


def test_a_fatal_xid_stays_failed_until_the_state_dir_is_new(libs: Path, tmp_path: Path) -> None:
    first = json.loads(_cli(libs, tmp_path, "periodic", "gpus=2", ((1, 48),), SLURMPOD_AUTH="slurm").stdout)
    assert _result(first, "xid")["status"] == "fail"
    for _ in range(3):  # the kernel log holds nothing new; clean runs do not lift a fatal XID
        later = _again(libs, tmp_path)
        assert (later["status"], later["remediation"]) == ("fail", "restart_pod"), later
        assert "XID 48" in later["reason"] and "latched" in later["reason"], later
    shutil.rmtree(tmp_path / "sd")  # a new container: the pod was restarted, the GPU reset
    # A new state dir reads the kernel log from its first record, so the XID's record goes with the old
    # container here: a log still holding it would latch the new container too.
    (tmp_path / "kmsg").write_text("", encoding="utf-8")
    assert _again(libs, tmp_path)["status"] == "ok"


def test_a_new_container_reads_only_what_the_kernel_logged_since_it_started(libs: Path, tmp_path: Path) -> None:
    """The previous pod's XID, still in the host's kernel log, is not latched again by the new pod (its
    restart reset the GPU); one logged after the pod started is."""
    kmsg = tmp_path / "kmsg"
    kmsg.write_text(_kmsg(100, XID79_GPU2, usec=1), encoding="utf-8")  # long before this container's PID 1
    first = json.loads(_cli(libs, tmp_path, "periodic", "gpus=4", SLURMPOD_AUTH="slurm").stdout)
    assert _result(first, "xid")["status"] == "ok", first
    with kmsg.open("a", encoding="utf-8") as log:
        log.write(_kmsg(101, XID79_GPU2))
    later = _again(libs, tmp_path)
    assert (later["status"], later["remediation"]) == ("fail", "replace_node"), later
    assert "on GPU 2" in later["reason"], later


def test_container_start_is_field_22_of_pid_1s_stat(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    # comm may hold spaces and parentheses; the fields are counted after its last ")"
    stat.write_text("1 (sh (x) y) S 0 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 250 1 1\n", encoding="ascii")
    assert xid.container_start_usec(stat) == 250 * 1_000_000 // os.sysconf("SC_CLK_TCK")
    assert xid.container_start_usec(tmp_path / "missing") == 0
    found, last = xid.parse_kmsg([_kmsg(7, XID79_GPU2, usec=10), _kmsg(8, XID79_GPU2, usec=30)], -1, since_usec=20)
    assert (found, last) == ([("0000:12:00", 79)], 8)


def test_an_xid_is_reported_once(libs: Path, tmp_path: Path) -> None:
    # 94: a warning (contained ECC error); warnings are not latched
    first = json.loads(_cli(libs, tmp_path, "periodic", "gpus=2", ((1, 94),), SLURMPOD_AUTH="slurm").stdout)
    # the same kernel log again: the run keeps its place in it, so a second run finds nothing new
    assert _result(first, "xid")["status"] == "warn"
    assert _again(libs, tmp_path)["status"] == "ok"


# What Slurm's gpu/nvml plugin calls for AutoDetect=nvml (src/plugins/gpu/nvml/gpu_nvml.c), under the
# names nvml.h maps them to: the worker image's fake must resolve every one.
SLURM_GPU_NVML_CALLS = (
    "nvmlInit_v2", "nvmlShutdown", "nvmlErrorString", "nvmlSystemGetDriverVersion", "nvmlSystemGetNVMLVersion",
    "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetName", "nvmlDeviceGetUUID",
    "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetMinorNumber", "nvmlDeviceGetCpuAffinity", "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetMigMode", "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex", "nvmlDeviceGetGpuInstanceId", "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetAttributes_v2", "nvmlDeviceGetSupportedMemoryClocks", "nvmlDeviceGetSupportedGraphicsClocks",
    "nvmlDeviceGetApplicationsClock", "nvmlDeviceSetApplicationsClocks", "nvmlDeviceResetApplicationsClocks",
    "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetProcessUtilization",
)


def test_fake_nvml_exports_what_slurm_gpu_nvml_calls(libs: Path) -> None:
    import ctypes

    lib = ctypes.CDLL(str(libs / "libnvidia-ml.so.1"))
    missing = [name for name in SLURM_GPU_NVML_CALLS if not hasattr(lib, name)]
    assert missing == []


@pytest.mark.parametrize(("state", "code", "stderr"), [
    ("gpus=8", 0, ""),
    ("gpus=8\ngpu.1.remap.pending=1", 1, "slurmpod prolog: fail: remap: row remap pending: GPU 1 needs a reset"),
], ids=["healthy", "remap-pending"])
def test_prolog_program_as_slurmd_starts_it(libs: Path, tmp_path: Path, state: str, code: int, stderr: str) -> None:
    # slurmd's environment for a Prolog: SLURM_* and no PATH; the program takes no arguments.
    cfg = tmp_path / "health.yaml"
    cfg.write_text(f"kernel_log: {tmp_path / 'kmsg'}\nexpected_gpus: 8\n", encoding="utf-8")
    env = {"SLURM_JOB_ID": "41", "SLURM_JOB_GPUS": "0,1", "SLURMD_NODENAME": "gpu-0", "LD_LIBRARY_PATH": str(libs),
           "FAKE_NVML_STATE": str(write_state(tmp_path / "state", state)), "SLURMPOD_HEALTH_CONFIG": str(cfg),
           "SLURMPOD_HEALTH_STATE_DIR": str(tmp_path / "sd"), "SLURMPOD_HEALTH_METRICS_DIR": str(tmp_path / "m")}
    proc = subprocess.run([str(Path(sys.executable).with_name("slurmpod-prolog"))], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert proc.returncode == code, proc.stderr
    assert stderr in proc.stderr
    assert (tmp_path / "m" / "slurmpod_health_prolog.prom").exists()


def test_an_xid_on_a_gpu_the_job_did_not_have_is_not_blamed_on_it(table: dict[str, Any]) -> None:
    result = _result(table["xid-on-another-gpu-is-not-the-jobs"], "xid")
    assert "during job" not in result["reason"]
    assert [g["index"] for g in result["gpus"]] == [6]


@pytest.mark.parametrize(("program", "fmt", "code", "where"), [
    ("slurmpod-prolog", "yaml", 2, "SLURMPOD_LOG_FORMAT"),
    ("slurmpod-healthcheck", "loud", 2, "SLURMPOD_LOG_FORMAT"),
], ids=["prolog", "healthcheck"])
def test_hook_programs_validate_their_env_twin_like_the_flag(tmp_path: Path, program: str, fmt: str, code: int,
                                                            where: str) -> None:
    """The hooks skip the command tree (it costs every job); a bad log format still exits 2 naming it."""
    env = {"SLURMPOD_LOG_FORMAT": fmt, "SLURMPOD_HEALTH_CONFIG": str(tmp_path / "none.yaml"),
           "SLURMPOD_HEALTH_STATE_DIR": str(tmp_path / "sd"), "SLURMPOD_HEALTH_METRICS_DIR": ""}
    proc = subprocess.run([str(Path(sys.executable).with_name(program))], capture_output=True, text=True, env=env,
                          timeout=60, check=False)
    assert proc.returncode == code and where in proc.stderr, proc.stderr
    assert not (tmp_path / "sd").exists()  # nothing ran
