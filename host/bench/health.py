"""Health checks on fake GPUs, no Docker: a full periodic run (HealthCheckProgram) and a healthy prolog
on 8 fake GPUs, each timed as Slurm pays for it — a whole `slurmpod` process, start to exit.

The fakes are the C stand-ins from tests/fakes (libnvidia-ml.so.1, libcudart.so, libnccl.so.2), built
here with gcc into a temporary directory and put on LD_LIBRARY_PATH; the checks run their real paths.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from slurmpod import well_known as wk
from slurmpod.errors import PermanentError
from slurmpod_host.bench.report import Figure, Report, median
from slurmpod_host.cluster import lifecycle, runtime

PERIODIC_FLOOR_S = 1.0  # floor: a full periodic check on 8 fake GPUs under 1 s
FAKES = {"libnvidia-ml.so.1": "nvml/fake_nvml.c", "libcudart.so": "cuda/fake_cudart.c",
         "libnccl.so.2": "nccl/fake_nccl.c"}
EIGHT_HEALTHY_GPUS = "gpus=8\nnvlinks=18\nfabric.state=3\n"
RUN_TIMEOUT_S = 120
# The fake NCCL's bandwidth is a nanosleep inside the check's Python loop: on a loaded host it measures
# the loop, not a link, and can dip under H100's 460 GB/s floor. The bench times the run, not the link.
FAKE_BUSBW_FLOOR_GBPS = 100


def build_fakes(repo: Path, out: Path) -> Path:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise PermanentError("gcc is needed to build the fake GPU libraries")
    for name, src in FAKES.items():
        subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(out / name), str(repo / "tests" / "fakes" / src)],
                       check=True, timeout=RUN_TIMEOUT_S)
    return out


def _slurmpod() -> str:
    found = shutil.which("slurmpod") or str(Path(sys.executable).with_name("slurmpod"))
    if not Path(found).exists():
        raise PermanentError("the slurmpod command is not installed in this environment")
    return found


def _timed_runs(context: str, trials: int, repo: Path) -> tuple[list[float], list[float]]:
    """(wall seconds per process, the run's own duration_s) for ``trials`` runs of ``context``."""
    with tempfile.TemporaryDirectory(prefix="slurmpod-bench-health-") as tmp_s:
        tmp = Path(tmp_s)
        libs = build_fakes(repo, tmp)
        (tmp / "state").write_text(EIGHT_HEALTHY_GPUS, encoding="utf-8")
        (tmp / "health.yaml").write_text(f"kernel_log: {tmp / 'kmsg'}\n"
                                         f"thresholds: {{allreduce_busbw_min_gbps: {FAKE_BUSBW_FLOOR_GBPS}}}\n",
                                         encoding="utf-8")
        (tmp / "kmsg").write_text("", encoding="utf-8")
        env = {**os.environ, "LD_LIBRARY_PATH": str(libs), "FAKE_NVML_STATE": str(tmp / "state"),
               "SLURMPOD_EXPECTED_GPUS": "8"}
        argv = [_slurmpod(), "check", "run", "--context", context, "--json", "--config", str(tmp / "health.yaml"),
                "--state-dir", str(tmp / "sd"), "--metrics-dir", str(tmp / "metrics")]
        walls, runs = [], []
        for _ in range(trials):
            start = time.perf_counter()
            proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=RUN_TIMEOUT_S, check=False)
            walls.append(time.perf_counter() - start)
            if proc.returncode != 0:
                raise PermanentError(f"{context} run on healthy fake GPUs failed: {proc.stdout[-2000:]}"
                                     f"{proc.stderr[-2000:]}")
            runs.append(float(json.loads(proc.stdout)["duration_s"]))
        return walls, runs


def periodic_on_fake_gpus(report: Report, repo: Path, trials: int = 7) -> float:
    """Median wall time of a full periodic run (every periodic check, CUDA and NCCL included) on 8 fake GPUs."""
    walls, runs = _timed_runs("periodic", trials, repo)
    value = median(walls)
    report.add(Figure(f"full periodic health check, 8 fake GPUs (median of {trials}, whole process)", "s", value,
                      floor=f"< {PERIODIC_FLOOR_S:g} s", ok=value < PERIODIC_FLOOR_S, samples=tuple(walls)))
    report.notes.append(f"periodic health run, checks only (median of {trials}): {median(runs):.3f} s")
    return value


def prolog_on_fake_gpus(report: Report, repo: Path, trials: int = 7) -> float:
    """Median wall time of a healthy prolog on 8 fake GPUs."""
    walls, _ = _timed_runs("prolog", trials, repo)
    value = median(walls)
    report.add(Figure(f"healthy prolog, 8 fake GPUs (median of {trials}, whole process)", "s", value,
                      samples=tuple(walls)))
    return value


# --- The hook client: one prolog through the health agent, against the Python hook it falls back to ---

CLIENT_TRIALS = 50
AGENT_UP_S = 30.0


def _client(repo: Path, out: Path) -> Path:
    """images/files/slurmpod_hook.c built as the worker image builds it, falling back to this venv's
    Python hooks."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise PermanentError("gcc is needed to build the hook client")
    built = out / "slurmpod-prolog"
    files = repo / "images" / "files"
    subprocess.run([cc, "-O2", f'-DFALLBACK_DIR="{Path(_slurmpod()).parent}"', "-o", str(built),
                    str(files / "slurmpod_hook.c"), str(files / "slurmpod_agent_ask.c")],
                   check=True, timeout=RUN_TIMEOUT_S)
    return built


def _walls(argv: list[str], env: dict[str, str], trials: int) -> list[float]:
    walls = []
    for _ in range(trials):
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=RUN_TIMEOUT_S, check=False)
        walls.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise PermanentError(f"{argv[0]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return walls


def hook_client_on_fake_gpus(report: Report, repo: Path, trials: int = CLIENT_TRIALS) -> float:
    """Median wall time of a healthy prolog on 8 fake GPUs as slurmd runs it on a worker: the C client
    asking a running health agent, against the same client with the agent off (it runs the Python
    hook), and against /bin/true, the floor of any process start. Paired per round."""
    with tempfile.TemporaryDirectory(prefix="slurmpod-bench-client-") as tmp_s:
        tmp = Path(tmp_s)
        libs = build_fakes(repo, tmp)
        client = _client(repo, tmp)
        (tmp / "state").write_text(EIGHT_HEALTHY_GPUS, encoding="utf-8")
        (tmp / "kmsg").write_text("", encoding="utf-8")
        (tmp / "health.json").write_text(json.dumps({"kernel_log": str(tmp / "kmsg"), "expected_gpus": 8}),
                                         encoding="utf-8")
        sock = tmp / "agent.sock"
        pod = {**{k: v for k, v in os.environ.items() if not k.startswith("SLURM")},
               "LD_LIBRARY_PATH": str(libs), "FAKE_NVML_STATE": str(tmp / "state"),
               wk.ENV_HEALTH_CONFIG: str(tmp / "health.json"), wk.ENV_HEALTH_STATE_DIR: str(tmp / "sd"),
               wk.ENV_HEALTH_METRICS_DIR: str(tmp / "metrics"), "SLURMPOD_AUTH": "slurm"}
        job = {"SLURM_JOB_ID": "7", "SLURMD_NODENAME": "bench-0", "SLURM_JOB_GPUS": "0,1,2,3,4,5,6,7"}
        agent = subprocess.Popen([_slurmpod(), "daemon", "health-agent", "--socket", str(sock), "--interval", "3600"],
                                 env=pod, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            end = time.monotonic() + AGENT_UP_S
            while not sock.exists():
                if agent.poll() is not None or time.monotonic() > end:
                    raise PermanentError("the health agent did not start")
                time.sleep(0.05)
            on = {**pod, **job, wk.ENV_HEALTH_AGENT_SOCKET: str(sock)}
            off = {**pod, **job, wk.ENV_HEALTH_AGENT_SOCKET: ""}
            _walls([str(client)], on, 3)  # warm: page cache, the agent's first run
            ours, python, floor = [], [], []
            for _ in range(trials):
                ours += _walls([str(client)], on, 1)
                python += _walls([str(client)], off, 1)
                floor += _walls(["/bin/true"], on, 1)
        finally:
            agent.terminate()
            agent.wait(timeout=30)
    report.add(Figure(f"healthy prolog, 8 fake GPUs, C client asking the health agent (median of {trials})", "s",
                      median(ours), median(python), "agent off: the Python hook", samples=tuple(ours),
                      baseline_samples=tuple(python)))
    report.notes.append(f"/bin/true, the floor of a process start, same rounds: {median(floor) * 1000:.2f} ms")
    return median(ours)


# --- In the cluster: what slurmpod's prolog adds to a job's start (floor: at most 150 ms median) ---

PROLOG_OVERHEAD_FLOOR_S = 0.150
OVERHEAD_JOBS = 50
READY_TIMEOUT_S = 120
# The shipped ConfigMap's hook lines (values `cluster.hooks` of deploy/helm/slurmpod); null turns a hook off.
PROLOG_LINE = (f"prolog: {wk.PROLOG_BIN}", "prolog: null")
EPILOG_LINE = (f"epilog: {wk.EPILOG_BIN}", "epilog: null")
# Hooks that do nothing: what slurmd's running of a Prolog and an Epilog costs by itself, the floor any hook has.
TRUE_HOOKS = ((f"prolog: {wk.PROLOG_BIN}", "prolog: /bin/true"), (f"epilog: {wk.EPILOG_BIN}", "epilog: /bin/true"))
# slurmpod's hooks as programs (slurmpod_hook.c) under Slurm's script plugin, not slurmd's in-process PrEp plugin.
SCRIPT_PREP = "\nextraLines:\n  - PrEpPlugins=script\n"


def _with_script_prep(spec: str) -> str:
    if "extraLines" in spec:
        raise PermanentError("the cluster spec has extraLines of its own: the bench adds PrEpPlugins=script there")
    return spec.rstrip("\n") + SCRIPT_PREP


def _start_latencies(client: Any, login: str, worker: str, jobs: int) -> list[float]:
    """Seconds from `srun` on the login pod to the job's first command on ``worker``, one per job.

    Both clocks are the same kernel clock (pods are containers on one host).
    """
    script = (f"for i in $(seq {jobs}); do t0=$(date +%s%N); t1=$(srun -w {worker} -N1 -n1 date +%s%N) || exit 1; "
              "echo $(( (t1 - t0) / 1000 )); done")
    home = f"/home/{wk.DEMO_USER}"
    done = runtime.exec_in(client, login, ["bash", "-c", script], timeout_s=30 + jobs * 10, user=wk.DEMO_USER,
                           workdir=home, env={"HOME": home, "USER": wk.DEMO_USER})
    if done.code != 0:
        raise PermanentError(f"srun on {worker} failed: {done.stdout[-1000:]}{done.stderr[-1000:]}")
    return [int(x) / 1e6 for x in done.stdout.split()]


def _wait(client: Any, pod: str, script: str, what: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if runtime.exec_in(client, pod, ["bash", "-c", script], timeout_s=20).code == 0:
            return
        time.sleep(0.5)
    raise PermanentError(f"{what}: not after {READY_TIMEOUT_S} s")


def _set_hooks(client: Any, cluster: str, controller: str, worker: str, spec: str) -> None:
    """A new cluster.yaml, the controller restarted on it, the workers told, ``worker`` IDLE again."""
    old = lifecycle.set_config_map(cluster, "cluster", {})
    lifecycle.set_config_map(cluster, "cluster", {**old, "cluster.yaml": spec})
    lifecycle.replace_pod(client, cluster, controller)
    _wait(client, controller, "slurmpod probe ready", f"{controller} ready")
    _wait(client, controller, "scontrol reconfigure", "scontrol reconfigure")
    _wait(client, controller, f"sinfo -h -n {worker} -t idle -o %n | grep -qx {worker}", f"{worker} IDLE")


def _without(spec: str, *lines: tuple[str, str]) -> str:
    for line, off in lines:
        if line not in spec:
            raise PermanentError(f"the cluster spec has no `{line}` to turn off")
        spec = spec.replace(line, off)
    return spec


# The health agent: hooks on cost at most this much over no hooks (median job start latency), a job array
# with hooks on takes at most ARRAY_FLOOR times as long as without.
AGENT_FLOOR_S = 0.030
LATENCY_ROUNDS = 2  # blocks per hook setting: one in each direction (see prolog_overhead)
ARRAY_TASKS = 1000
ARRAY_FLOOR = 1.2
ARRAY_TIMEOUT_S = 1800
SUPERVISORCTL = f"{wk.SUPERVISORCTL} -c {wk.RUN_DIR}/{wk.SUPERVISORD_CONF}"


def _agent(client: Any, workers: list[str], action: str) -> None:
    """supervisorctl stop|start health-agent on ``workers``; a started one is waited for (its socket)."""
    for pod in workers:
        done = runtime.exec_in(client, pod, ["sh", "-c", f"{SUPERVISORCTL} {action} health-agent"], timeout_s=60)
        if done.code != 0:
            raise PermanentError(f"{action} health-agent on {pod}: {done.stdout}{done.stderr}")
        if action == "start":
            _wait(client, pod, f"test -S {wk.HEALTH_AGENT_SOCKET}", f"{pod} health agent listening")


def _array_s(client: Any, login: str, tasks: int) -> float:
    """Seconds from submitting a ``tasks``-task array of `true` to its last task's end (sbatch --wait)."""
    script = (f"t0=$(date +%s%N); sbatch --wait --array=0-{tasks - 1} -o /dev/null --wrap true >/dev/null "
              "|| exit 1; echo $(( ($(date +%s%N) - t0) / 1000 ))")
    home = f"/home/{wk.DEMO_USER}"
    done = runtime.exec_in(client, login, ["bash", "-c", script], timeout_s=ARRAY_TIMEOUT_S, user=wk.DEMO_USER,
                           workdir=home, env={"HOME": home, "USER": wk.DEMO_USER})
    if done.code != 0:
        raise PermanentError(f"the {tasks}-task array failed: {done.stdout[-1000:]}{done.stderr[-1000:]}")
    return int(done.stdout.split()[-1]) / 1e6


def _memory_mib(client: Any, pod: str) -> tuple[float, float]:
    """(the pod's memory use, the health agent's resident set), MiB: the container's cgroup memory use
    (v2 memory.current, else v1 memory.usage_in_bytes) and the agent's VmRSS (0 when it is not running).
    Ref: https://docs.kernel.org/admin-guide/cgroup-v2.html#memory-interface-files
    Ref: https://docs.kernel.org/admin-guide/cgroup-v1/memory.html"""
    script = ("cat /sys/fs/cgroup/memory.current 2>/dev/null || cat /sys/fs/cgroup/memory/memory.usage_in_bytes; "
              f"pid=$({SUPERVISORCTL} pid health-agent); "
              "awk '/^VmRSS:/ {print $2 * 1024; found=1} END {if (!found) print 0}' /proc/$pid/status 2>/dev/null "
              "|| echo 0")
    done = runtime.exec_in(client, pod, ["sh", "-c", script], timeout_s=30)
    values = [float(x) for x in done.stdout.split()]
    if len(values) != 2:
        raise PermanentError(f"memory of {pod} not readable: {done.stdout}{done.stderr}")
    return values[0] / 2**20, values[1] / 2**20


def prolog_overhead(report: Report, client: Any, cluster: str, *, controller: str, login: str, worker: str,
                    jobs: int = OVERHEAD_JOBS, workers: list[str] | None = None, label: str = "",
                    array_tasks: int = ARRAY_TASKS) -> float:
    """Median job start latency with slurmpod's prolog minus the median without it (the epilog on in both),
    same cluster; and, for reference, with neither hook.

    Back-to-back jobs on one node also wait for the previous job's epilog (the node is COMPLETING until it
    ends), so turning both hooks off would charge the epilog to the prolog. The blocks run in this one call
    on the same worker; the hooks are switched off through the cluster spec (the way a user would), then
    switched back on. The five hook settings run in two rounds of ``jobs / 2`` sruns each, the second in
    the reverse order (hooks on: slurmd's PrEp plugin; the hook programs under Slurm's script plugin;
    epilog only; none; /bin/true; then back), so a drift over the run (the cluster settling after its
    start, caches warming) weighs on every setting alike. slurmpod's PrEp plugin runs only where both hooks
    are slurmpod's, so the prolog's own cost is measured with the programs: both hooks against the epilog
    alone.
    """
    spec = lifecycle.set_config_map(cluster, "cluster", {})
    lifecycle.set_config_map(cluster, "cluster", spec)  # read only: the data is put back unchanged
    with_hooks = spec["cluster.yaml"]
    settings = {"ours": with_hooks, "programs": _with_script_prep(with_hooks),
                "epilog_only": _without(with_hooks, PROLOG_LINE),
                "bare": _without(with_hooks, PROLOG_LINE, EPILOG_LINE), "true_hooks": _without(with_hooks, *TRUE_HOOKS)}
    every = workers or [worker]
    idle = f"sinfo -h -n {worker} -t idle -o %n | grep -qx {worker}"
    _wait(client, controller, idle, f"{worker} IDLE")
    per_block = max(1, jobs // LATENCY_ROUNDS)
    runs: dict[str, list[float]] = {name: [] for name in settings}
    rounds: list[str] = []

    def block(name: str) -> None:
        _start_latencies(client, login, worker, 3)  # warm: first srun pays for user lookup, caches
        got = _start_latencies(client, login, worker, per_block)
        runs[name] += got
        rounds.append(f"{name} {median(got) * 1000:.1f}")

    block("ours")
    with_agent_mib, agent_rss_mib = _memory_mib(client, worker)
    array_on = _array_s(client, login, array_tasks)
    _agent(client, every, "stop")  # the hooks run the checks themselves, in Python
    try:
        without_agent_mib, _ = _memory_mib(client, worker)
        _start_latencies(client, login, worker, 3)
        python_hooks = _start_latencies(client, login, worker, jobs)
    finally:
        _agent(client, every, "start")
    order = list(settings)
    current = "ours"
    array_off = 0.0
    try:
        for name in order[1:] + order[::-1]:  # A B C D, then D C B A
            if name != current:
                _set_hooks(client, cluster, controller, worker, settings[name])
                current = name
            if name == "bare" and not array_off:  # once, on the first switch to no hooks
                array_off = _array_s(client, login, array_tasks)
            block(name)
    finally:
        if current != "ours":
            _set_hooks(client, cluster, controller, worker, with_hooks)
    report.notes.append(f"{label}job start latency per block, median ms, in the order run: " + "; ".join(rounds))
    ours, programs, epilog_only = runs["ours"], runs["programs"], runs["epilog_only"]
    bare, true_hooks = runs["bare"], runs["true_hooks"]
    jobs = len(ours)
    added = median(programs) - median(epilog_only)
    agent_added = median(ours) - median(bare)
    report.add(Figure(f"{label}job start latency with the prolog and epilog, health agent on, slurmd's PrEp plugin "
                      f"(median of {jobs} sruns)", "s", median(ours), median(bare), "same cluster, hooks off",
                      floor=f"<= +{AGENT_FLOOR_S * 1000:g} ms", ok=agent_added <= AGENT_FLOOR_S,
                      samples=tuple(ours), baseline_samples=tuple(bare)))
    report.add(Figure(f"{label}job start latency with the prolog and epilog as programs (PrEpPlugins=script), "
                      f"health agent on (median of {jobs} sruns)", "s", median(programs), median(bare),
                      "same cluster, hooks off", samples=tuple(programs), baseline_samples=tuple(bare)))
    report.add(Figure(f"{label}job start latency with the prolog and epilog, health agent off: the Python hooks "
                      f"(median of {jobs} sruns)", "s", median(python_hooks), median(bare), "same cluster, hooks off",
                      samples=tuple(python_hooks), baseline_samples=tuple(bare)))
    report.add(Figure(f"{label}job start latency with /bin/true as prolog and epilog: slurmd's own cost of "
                      f"running hooks (median of {jobs} sruns)", "s", median(true_hooks), median(bare),
                      "same cluster, hooks off", samples=tuple(true_hooks), baseline_samples=tuple(bare)))
    over_true = median(ours) - median(true_hooks)
    report.add(Figure(f"{label}job start latency, health agent on, against /bin/true hooks (median of {jobs} sruns)",
                      "s", median(ours), median(true_hooks), "same cluster, /bin/true hooks",
                      floor=f"<= +{AGENT_FLOOR_S * 1000:g} ms", ok=over_true <= AGENT_FLOOR_S,
                      samples=tuple(ours), baseline_samples=tuple(true_hooks)))
    report.add(Figure(f"{label}job start latency with the epilog only, a program (PrEpPlugins=script), agent on "
                      f"(median of {jobs} sruns)", "s",
                      median(epilog_only), median(bare), "same cluster, hooks off", samples=tuple(epilog_only),
                      baseline_samples=tuple(bare)))
    report.add(Figure(f"{label}healthy-node prolog overhead, agent on, programs (median with - median without the "
                      f"prolog, {jobs} jobs each)", "s", added, floor=f"<= {PROLOG_OVERHEAD_FLOOR_S * 1000:g} ms",
                      ok=added <= PROLOG_OVERHEAD_FLOOR_S))
    report.add(Figure(f"{label}{array_tasks}-task array of `true` on {len(every)} workers, hooks on (agent)", "s",
                      array_on, array_off, "same cluster, hooks off", floor=f"<= {ARRAY_FLOOR:g}x baseline",
                      ok=array_on <= ARRAY_FLOOR * array_off))
    report.add(Figure(f"{label}idle worker pod memory (cgroup memory.current), health agent on", "MiB",
                      with_agent_mib, without_agent_mib, "same pod, agent stopped"))
    report.add(Figure(f"{label}health agent resident memory (VmRSS), idle worker", "MiB", agent_rss_mib))
    return added
