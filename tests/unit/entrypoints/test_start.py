"""Pod start: ``plan`` reads and validates every input and renders in memory; `--dry-run` prints it.

``apply`` (writes /etc, chowns, execs supervisord) is exercised in the image and cluster tests; here the
plan is checked, and the real command only ever runs with --dry-run on valid input.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import podkit
import pytest
from podkit import Machine

from slurmpod import well_known as wk
from slurmpod.entrypoints import start
from slurmpod.errors import BadInput

SLURMPOD = Path(sys.executable).with_name("slurmpod")


def _plan(pod: podkit.Pod, role: str, **env: str | None) -> start.StartPlan:
    e = pod.env(role, **env)
    return podkit.plan(role, e)


def test_settings_from_env_defaults() -> None:
    s = start.Settings.from_env({})
    assert s == start.Settings(
        podinfo_dir=Path(wk.PODINFO_DIR),
        cluster_spec=Path(wk.CLUSTER_SPEC_FILE),
        munge_key=Path(wk.MUNGE_KEY_SECRET),
        slurm_key=Path(wk.SLURM_KEY_SECRET),
        run_dir=Path(wk.RUN_DIR),
        hw_root=Path("/"),
        ssh_host_key=Path(wk.SSH_HOST_KEY_SECRET_DIR) / wk.SSH_HOST_KEY_FILE,
    )


def test_worker_plan(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path, "worker", Machine(cores_per_socket=2, mem_mib=8192))
    p = _plan(pod, "worker", SLURMPOD_CPU_LIMIT="1000", SLURMPOD_MEMORY_LIMIT="4096")
    assert p.role == "worker" and p.pod.name == podkit.POD
    assert p.node is not None
    assert (p.node.cpus, p.node.core_spec_count, p.node.real_memory_mib, p.node.mem_spec_limit_mib) == (
        2,
        1,
        8192,
        4096,
    )
    assert [prog.name for prog in p.programs] == ["munged", "health-agent", "slurmd", "sshd", "reconcile-node"]
    assert [(k.key.source, k.dest, k.user) for k in p.keys] == [(str(pod.key), wk.MUNGE_KEY, "munge")]
    dirs = {d.path for d in p.dirs}
    assert {str(pod.run_dir / "bin"), "/run/munge", wk.SLURMD_SPOOL} <= dirs
    slurmd = next(prog for prog in p.programs if prog.name == "slurmd")
    argv = shlex.split(slurmd.script.rstrip("\n").splitlines()[-1])
    assert argv[-1] == p.node.conf_string()
    assert argv[argv.index("--conf-server") + 1] == f"{podkit.CONTROLLER}:{wk.SLURMCTLD_PORT}"
    # reconcile-node stays off the CPU until slurmd has had time to register, and is restarted on failure
    reconcile = next(prog for prog in p.programs if prog.name == "reconcile-node")
    assert reconcile.script.splitlines()[-2] == f"sleep {start.RECONCILE_DELAY_S}"
    assert reconcile.restart == "unexpected"


@pytest.mark.parametrize(("auth", "home_mounted"), [("munge", True), ("slurm", False)],
                         ids=["munge-home", "slurm-no-home"])
def test_worker_writes_the_health_config_the_hooks_read(tmp_path: Path, auth: str, home_mounted: bool) -> None:
    """slurmd gives the hooks none of the pod's env: the pod writes expected GPUs, auth, RealMemory, mounts."""
    import yaml

    pod = _slurm_auth_pod(tmp_path, "worker") if auth == "slurm" else podkit.make_pod(
        tmp_path, "worker", Machine(cores_per_socket=2, mem_mib=8192))
    mounts = "overlay / overlay rw 0 0\n" + ("srv:/home /home nfs rw 0 0\n" if home_mounted else "")
    (pod.hw / "proc/self/mounts").write_text(mounts, encoding="utf-8")
    p = _plan(pod, "worker", SLURMPOD_AUTH=auth)
    assert p.node is not None
    written = {f.path: f.content for f in p.files}
    doc = yaml.safe_load(written[wk.HEALTH_CONFIG])
    assert doc == {"expected_gpus": 0, "auth": auth, "real_memory_mib": p.node.real_memory_mib,
                   "required_mounts": ["/home"] if home_mounted else []}
    from slurmpod.prolog_epilog import config, registry

    cfg = config.parse(doc, {c.name for c in registry.all_checks()})  # the hooks accept what the pod wrote
    assert (cfg.expected_gpus, cfg.auth, cfg.real_memory_mib) == (0, auth, p.node.real_memory_mib)


def test_worker_writes_the_task_environment_and_a_sticky_scratch_base(tmp_path: Path) -> None:
    """The SPANK plugin reads what the pod start wrote: its interface (default route), placement, node."""
    from slurmpod.prolog_epilog import task_env

    pod = podkit.make_pod(tmp_path, "worker", Machine(cores_per_socket=2, mem_mib=8192))
    (pod.hw / "proc/net").mkdir(parents=True, exist_ok=True)
    (pod.hw / "proc/net/route").write_text("Iface\tDestination\tGateway\nnet1\t00000000\t0100A8C0\n")
    p = _plan(pod, "worker", NODE_NAME="k8s-node-7", SLURMPOD_NCCL_TOPO_FILE="/etc/nccl/topo.xml")
    written = {f.path: f.content for f in p.files}
    got = task_env.parse(written[wk.TASK_ENV_FILE])
    assert got.exports == (("NCCL_SOCKET_IFNAME", "net1"), ("NCCL_TOPO_FILE", "/etc/nccl/topo.xml"),
                           (wk.TASK_ENV_K8S_NODE, "k8s-node-7"))
    assert start.OutDir(wk.DEFAULT_SCRATCH_BASE, 0, 0, 0o1777) in p.dirs
    # what the SPANK plugin sets, where it makes the job's scratch dir, and the stack that names it
    assert written[wk.TASK_PROLOG_EXPORTS] == ("export NCCL_SOCKET_IFNAME=net1\n"
                                               "export NCCL_TOPO_FILE=/etc/nccl/topo.xml\n"
                                               f"export {wk.TASK_ENV_K8S_NODE}=k8s-node-7\n")
    assert written[wk.TASK_PROLOG_SCRATCH] == f"{wk.DEFAULT_SCRATCH_BASE} true\n"
    stack = [ln for ln in written[wk.PLUGSTACK_CONF].splitlines() if ln and not ln.startswith("#")]
    assert stack == [f"required {wk.SPANK_PLUGIN}"]


@pytest.mark.parametrize("role", ["login", "controller"])
def test_only_workers_have_a_spank_stack(tmp_path: Path, role: str) -> None:
    """slurm.conf's PlugStackConfig is a path each pod reads locally: srun and sbatch on the login pod
    load no plugin (a missing stack is no error to Slurm), so they need none of the worker's files."""
    pod = podkit.make_pod(tmp_path, role, Machine(cores_per_socket=2, mem_mib=8192))
    p = _plan(pod, role)
    assert wk.PLUGSTACK_CONF not in {f.path for f in p.files}


@pytest.mark.parametrize("devices", [(), ("uverbs0", "uverbs1")], ids=["no-rdma", "rdma"])
def test_worker_turns_ucx_memory_hooks_off_only_without_rdma_devices(tmp_path: Path, devices: tuple[str, ...]) -> None:
    """UCX reads /etc/ucx/ucx.conf in every rank: a pod with no verbs device gets no memory hooks (40 ms
    of each rank's start); one with RDMA keeps UCX's defaults, which its registration cache needs."""
    pod = podkit.make_pod(tmp_path, "worker", Machine(cores_per_socket=2, mem_mib=8192))
    (pod.hw / "dev/infiniband").mkdir(parents=True)
    for name in (*devices, "rdma_cm", "umad0"):
        (pod.hw / "dev/infiniband" / name).touch()
    written = {f.path: f.content for f in _plan(pod, "worker").files}
    settings = [ln for ln in written[wk.UCX_CONF].splitlines() if ln and not ln.startswith("#")]
    assert settings == ([] if devices else ["UCX_MEM_MMAP_HOOK_MODE=none"])
    assert ("RDMA devices: uverbs0, uverbs1" in written[wk.UCX_CONF]) == bool(devices)


def test_a_worker_runs_the_health_agent_before_slurmd_unless_it_is_off(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path, "worker", Machine(cores_per_socket=2, mem_mib=8192))
    on = {prog.name: prog for prog in _plan(pod, "worker").programs}
    agent = on["health-agent"]
    assert agent.priority < on["slurmd"].priority and agent.restart == "true"
    assert agent.script.splitlines()[-1] == "exec /usr/local/bin/slurmpod daemon health-agent --metrics-port 9402"
    moved = {prog.name: prog for prog in _plan(pod, "worker", SLURMPOD_HEALTH_AGENT_METRICS_PORT="0").programs}
    assert moved["health-agent"].script.splitlines()[-1].endswith(" --metrics-port 0")
    off = _plan(pod, "worker", SLURMPOD_HEALTH_AGENT="false")
    assert "health-agent" not in [prog.name for prog in off.programs]
    with pytest.raises(BadInput) as err:
        _plan(pod, "worker", SLURMPOD_HEALTH_AGENT="yes")
    assert [(pr.field, pr.value) for pr in err.value.problems] == [(wk.ENV_HEALTH_AGENT, "yes")]


def test_a_worker_claims_its_placeholder_before_slurmd_only_when_told(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path, "worker", Machine(cores_per_socket=2, mem_mib=8192))

    def slurmd(**env: str) -> str:
        return next(p.script for p in _plan(pod, "worker", **env).programs if p.name == "slurmd")

    assert "claim-placeholder" not in slurmd()
    assert "claim-placeholder" not in slurmd(SLURMPOD_CLAIM_PLACEHOLDER="false")
    assert "daemon claim-placeholder" in slurmd(SLURMPOD_CLAIM_PLACEHOLDER="true")
    for bad in ("yes", "True", "true\n"):
        with pytest.raises(BadInput) as err:
            _plan(pod, "worker", SLURMPOD_CLAIM_PLACEHOLDER=bad)
        assert [(pr.field, pr.value) for pr in err.value.problems] == [(wk.ENV_CLAIM_PLACEHOLDER, bad)]


@pytest.mark.parametrize("port", ["65536", "-1", "9402 --socket /tmp/x", "9402\n", "", "\u0669"])
def test_a_bad_health_agent_metrics_port_fails_worker_start_naming_it(tmp_path: Path, port: str) -> None:
    pod = podkit.make_pod(tmp_path, "worker", Machine(cores_per_socket=2, mem_mib=8192))
    with pytest.raises(BadInput) as err:
        _plan(pod, "worker", SLURMPOD_HEALTH_AGENT_METRICS_PORT=port)
    assert [(pr.field, pr.value) for pr in err.value.problems] == [(wk.ENV_HEALTH_AGENT_METRICS_PORT, port)]


def test_worker_with_a_bad_task_environment_setting_exits_2(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path, "worker", Machine(cores_per_socket=2, mem_mib=8192))
    with pytest.raises(BadInput) as err:
        _plan(pod, "worker", SLURMPOD_SCRATCH_BASE="relative/dir")
    assert [pr.field for pr in err.value.problems] == [wk.ENV_SCRATCH_BASE]


def test_supervisord_conf_points_at_the_run_dir(tmp_path: Path) -> None:
    """apply() writes the run scripts under SLURMPOD_RUN_DIR/bin; supervisord must look there."""
    pod = podkit.make_pod(tmp_path)
    p = _plan(pod, "worker")
    for prog in p.programs:
        assert f"command={pod.run_dir}/bin/{prog.name}\n" in p.supervisord_conf
    assert f"{wk.RUN_DIR}/" not in p.supervisord_conf


def test_stop_wait_from_grace(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path)
    assert "stopwaitsecs=40\n" in _plan(pod, "worker", SLURMPOD_GRACE_SECONDS="120").supervisord_conf
    assert "stopwaitsecs=2\n" in _plan(pod, "worker", SLURMPOD_GRACE_SECONDS="3").supervisord_conf
    assert "stopwaitsecs=10\n" in _plan(pod, "worker", SLURMPOD_GRACE_SECONDS=None).supervisord_conf


def test_plans_are_fresh(tmp_path: Path) -> None:
    """Same inputs, same plan; changed limits, changed node (nothing cached between plans)."""
    pod = podkit.make_pod(tmp_path, "worker", Machine(cores_per_socket=4, mem_mib=8192))
    a = _plan(pod, "worker", SLURMPOD_CPU_LIMIT="1000")
    b = _plan(pod, "worker", SLURMPOD_CPU_LIMIT="3000", SLURMPOD_MEMORY_LIMIT="2048")
    c = _plan(pod, "worker", SLURMPOD_CPU_LIMIT="1000")
    assert a.node is not None and b.node is not None
    assert (a.node.core_spec_count, a.node.mem_spec_limit_mib) == (3, 0)
    assert (b.node.core_spec_count, b.node.mem_spec_limit_mib) == (1, 6144)
    assert a == c


def test_controller_plan(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path, "controller", spec=podkit.SPEC_PREEMPT)
    p = _plan(pod, "controller", SLURMPOD_CONTROLLER=None)
    files = {f.path: f.content for f in p.files}
    assert {wk.SLURM_CONF, f"{wk.SLURM_ETC}/cgroup.conf"} <= set(files)
    assert "ClusterName=gpu-farm\n" in files[wk.SLURM_CONF]
    assert f"SlurmctldHost={podkit.CONTROLLER}\n" in files[wk.SLURM_CONF]
    assert [prog.name for prog in p.programs] == ["munged", "slurmctld", "node-reaper", "topology-sync", "exporter"]
    assert "--node-timeout 600" in p.programs[2].script
    # topologyPlugin tree on 24.11: topology.conf before slurmctld starts; no worker has registered yet
    assert files[wk.TOPOLOGY_CONF].startswith("# Written by slurmpod topology")
    assert "TopologyPlugin=topology/tree\n" in files[wk.SLURM_CONF]
    assert p.node is None
    assert wk.STATE_SAVE_LOCATION in {d.path for d in p.dirs}
    # configless slurmd reads the controller's gres.conf, never the worker's: GPUs come from NVML there
    gres = [line for line in files[f"{wk.SLURM_ETC}/gres.conf"].splitlines() if not line.startswith("#")]
    assert gres == ["AutoDetect=nvml"]


@pytest.mark.parametrize(("spec", "runs"), [("", True), ("metrics: {enabled: true, pollSeconds: 30}\n", True),
                                             ("metrics: {enabled: false}\n", False)],
                         ids=["default-on", "on", "off"])
def test_controller_runs_the_exporter_when_metrics_are_on(tmp_path: Path, spec: str, runs: bool) -> None:
    p = _plan(podkit.make_pod(tmp_path, "controller", spec=spec), "controller")
    exporter = [prog for prog in p.programs if prog.name == "exporter"]
    assert bool(exporter) is runs
    if runs:
        assert "exec /usr/local/bin/slurmpod daemon exporter --port 9401\n" in exporter[0].script
        assert exporter[0].restart == "true"


@pytest.mark.parametrize(("port", "ok"), [("9500", True), ("0", False), ("65536", False), ("9401x", False)],
                         ids=["other-port", "zero", "too-big", "not-a-number"])
def test_the_exporter_port_comes_from_the_pods_env(tmp_path: Path, port: str, ok: bool) -> None:
    pod = podkit.make_pod(tmp_path, "controller")
    if not ok:
        with pytest.raises(BadInput) as err:
            _plan(pod, "controller", SLURMPOD_EXPORTER_PORT=port)
        assert (err.value.problems[0].field, err.value.problems[0].value) == (wk.ENV_EXPORTER_PORT, port)
        return
    (exporter,) = [p for p in _plan(pod, "controller", SLURMPOD_EXPORTER_PORT=port).programs if p.name == "exporter"]
    assert f"daemon exporter --port {port}\n" in exporter.script


def test_controller_without_cgroups_has_no_cgroup_conf(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path, "controller")
    paths = [f.path for f in _plan(pod, "controller").files]
    assert wk.SLURM_CONF in paths
    assert f"{wk.SLURM_ETC}/cgroup.conf" not in paths


@pytest.mark.parametrize("env_auth", ["slurm", None], ids=["env-agrees", "no-env"])
def test_controller_auth_slurm_from_spec(tmp_path: Path, env_auth: str | None) -> None:
    pod = podkit.make_pod(tmp_path, "controller", spec="auth: slurm\n")
    podkit.write_key(pod.slurm_key)
    pod.key.unlink()  # not needed with auth/slurm
    p = _plan(pod, "controller", SLURMPOD_AUTH=env_auth)
    assert [(k.dest, k.user) for k in p.keys] == [(wk.SLURM_KEY, "slurm")]
    assert [prog.name for prog in p.programs] == ["slurmctld", "node-reaper", "exporter"]
    assert "munge" not in p.programs[0].script


def test_controller_refuses_auth_env_that_contradicts_the_spec(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path, "controller", spec="auth: slurm\n")
    podkit.write_key(pod.slurm_key)
    with pytest.raises(BadInput) as err:
        _plan(pod, "controller", SLURMPOD_AUTH="munge")
    (problem,) = err.value.problems
    assert (problem.field, problem.value) == (wk.ENV_AUTH, "munge")
    assert "cluster spec's auth: slurm" in problem.reason


@pytest.mark.parametrize("role", wk.ROLES)
def test_unknown_auth_refused(tmp_path: Path, role: str) -> None:
    pod = podkit.make_pod(tmp_path, role)
    with pytest.raises(BadInput, match="SLURMPOD_AUTH='kerberos'"):
        _plan(pod, role, SLURMPOD_AUTH="kerberos")


def test_login_plan_auth_slurm(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path, "login")
    podkit.write_key(pod.slurm_key)
    pod.key.unlink()  # not needed with auth/slurm
    p = _plan(pod, "login", SLURMPOD_AUTH="slurm")
    assert [prog.name for prog in p.programs] == ["sackd", "sshd"]
    assert [k.dest for k in p.keys] == [wk.SLURM_KEY]
    assert "/run/munge" not in {d.path for d in p.dirs}
    sackd = p.programs[0]
    assert sackd.user == "slurm"
    assert shlex.split(sackd.script.rstrip("\n").splitlines()[-1])[1:] == [
        "/usr/sbin/sackd", "-D", "--conf-server", f"{podkit.CONTROLLER}:{wk.SLURMCTLD_PORT}"]
    assert "munge" not in sackd.script


@pytest.mark.parametrize("auth", wk.AUTH_TYPES)
def test_login_runtime_dir_belongs_to_slurm(tmp_path: Path, auth: str) -> None:
    pod = podkit.make_pod(tmp_path, "login")
    podkit.write_key(pod.slurm_key)
    dirs = {d.path: d for d in _plan(pod, "login", SLURMPOD_AUTH=auth).dirs}
    assert dirs[wk.SLURM_RUN_DIR] == start.OutDir(wk.SLURM_RUN_DIR, wk.SLURM_UID, wk.SLURM_UID, 0o755)


@pytest.mark.parametrize(("auth", "made"), [("slurm", True), ("munge", False)])
def test_controller_sack_dir_only_with_auth_slurm(tmp_path: Path, auth: str, made: bool) -> None:
    pod = podkit.make_pod(tmp_path, "controller", spec=f"auth: {auth}\n")
    podkit.write_key(pod.slurm_key)
    dirs = {d.path: d for d in _plan(pod, "controller").dirs}
    assert (wk.SLURMCTLD_RUN_DIR in dirs) is made
    if made:
        assert dirs[wk.SLURMCTLD_RUN_DIR] == start.OutDir(wk.SLURMCTLD_RUN_DIR, wk.SLURM_UID, wk.SLURM_UID, 0o755)


@pytest.mark.parametrize(("policy", "made"), [("slurmpod", True), ("lua", False), ("none", False)])
def test_controller_plugin_stats_dir_belongs_to_slurm(tmp_path: Path, policy: str, made: bool) -> None:
    pod = podkit.make_pod(tmp_path, "controller", spec=f"policy: {policy}\n")
    dirs = {d.path: d for d in _plan(pod, "controller").dirs}
    assert (wk.PLUGIN_STATS_DIR in dirs) is made
    if made:  # slurmctld runs as SlurmUser: the plugin inside it writes its stats there
        assert dirs[wk.PLUGIN_STATS_DIR] == start.OutDir(wk.PLUGIN_STATS_DIR, wk.SLURM_UID, wk.SLURM_UID, 0o755)
        assert wk.PLUGIN_STATS_FILE.startswith(wk.PLUGIN_STATS_DIR + "/")


def _slurm_auth_pod(tmp_path: Path, role: str) -> podkit.Pod:
    pod = podkit.make_pod(tmp_path, role, spec=podkit.SPEC_BASIC.replace("auth: munge", "auth: slurm"))
    podkit.write_key(pod.slurm_key)
    pod.key.unlink()  # the munge Secret has no data with auth/slurm
    return pod


def test_worker_plan_auth_slurm(tmp_path: Path) -> None:
    pod = _slurm_auth_pod(tmp_path, "worker")
    p = _plan(pod, "worker", SLURMPOD_AUTH="slurm")
    # no munged, no sackd
    assert [prog.name for prog in p.programs] == ["health-agent", "slurmd", "sshd", "reconcile-node"]
    assert [(k.key.source, k.dest, k.user) for k in p.keys] == [(str(pod.slurm_key), wk.SLURM_KEY, "slurm")]
    assert not {d.path for d in p.dirs} & {"/run/munge", "/var/lib/munge", "/var/log/munge"}
    slurmd = next(prog for prog in p.programs if prog.name == "slurmd")
    assert "munge" not in slurmd.script
    argv = shlex.split(slurmd.script.rstrip("\n").splitlines()[-1])
    assert argv[1:5] == ["/usr/sbin/slurmd", "-D", "-Z", "--conf-server"]
    assert p.node is not None and argv[-1] == p.node.conf_string()


@pytest.mark.parametrize("role", wk.ROLES)
def test_auth_slurm_needs_only_the_slurm_key(tmp_path: Path, role: str) -> None:
    pod = _slurm_auth_pod(tmp_path, role)
    p = _plan(pod, role, SLURMPOD_AUTH="slurm")
    assert "munged" not in [prog.name for prog in p.programs]
    assert [(k.dest, k.user) for k in p.keys] == [(wk.SLURM_KEY, "slurm")]
    assert f"key: {pod.slurm_key} -> {wk.SLURM_KEY} (slurm, 0400)" in start.describe(p)


@pytest.mark.parametrize("role", wk.ROLES)
def test_auth_slurm_validates_the_key_like_the_munge_key(tmp_path: Path, role: str) -> None:
    pod = _slurm_auth_pod(tmp_path, role)
    pod.slurm_key.chmod(0o444)
    with pytest.raises(BadInput) as err:
        _plan(pod, role, SLURMPOD_AUTH="slurm")
    assert [(p.field, p.value) for p in err.value.problems] == [("slurm key secret mode", "0444")]
    pod.slurm_key.unlink()
    with pytest.raises(BadInput, match="missing"):
        _plan(pod, role, SLURMPOD_AUTH="slurm")
    podkit.write_key(pod.slurm_key, size=16)
    with pytest.raises(BadInput, match="at least 32"):
        _plan(pod, role, SLURMPOD_AUTH="slurm")


def test_munge_auth_does_not_need_the_slurm_key(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path)
    assert not pod.slurm_key.exists()
    assert [k.dest for k in _plan(pod, "worker", SLURMPOD_AUTH="munge").keys] == [wk.MUNGE_KEY]


def test_first_failing_stage_is_reported(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path)
    pod.key.chmod(0o644)
    with pytest.raises(BadInput, match="POD_NAME"):  # PodInfo is validated before the secrets
        _plan(pod, "worker", POD_NAME="Bad")


@pytest.mark.parametrize("role", wk.ROLES)
def test_dry_run_cli(tmp_path: Path, role: str) -> None:
    pod = podkit.make_pod(tmp_path, role)
    proc = subprocess.run(
        [str(SLURMPOD), "entrypoint", role, "--dry-run"],
        env=pod.env(role),
        text=True,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"role: {role}\npod: ")
    assert f"key: {pod.key} -> {wk.MUNGE_KEY} (munge, 0400)" in proc.stdout
    if role == "worker":
        assert "\nnode: CPUs=2 " in proc.stdout
    assert list(pod.run_dir.iterdir()) == []
    assert pod.tlog.read_text() == ""


def test_dry_run_via_env_twin(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path)
    env = pod.env(SLURMPOD_DRY_RUN="1")
    proc = subprocess.run(
        [str(SLURMPOD), "entrypoint", "worker"], env=env, text=True, capture_output=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "program: slurmd" in proc.stdout


@pytest.mark.parametrize(("version", "plugin", "path", "absent"), [
    ("24.11", "tree", wk.TOPOLOGY_CONF, wk.TOPOLOGY_YAML),
    ("26.05", "block", wk.TOPOLOGY_YAML, wk.TOPOLOGY_CONF),
    ("26.05", "tree", wk.TOPOLOGY_YAML, wk.TOPOLOGY_CONF),
], ids=["24.11-tree-conf", "26.05-block-yaml", "26.05-tree-yaml"])
def test_controller_renders_topology_before_slurmctld(tmp_path: Path, version: str, plugin: str, path: str,
                                                      absent: str) -> None:
    spec = podkit.SPEC_BASIC.replace("topologyPlugin: none", f"topologyPlugin: {plugin}")
    pod = podkit.make_pod(tmp_path, "controller", spec=spec)
    p = _plan(pod, "controller", SLURMPOD_CONTROLLER=None, SLURMPOD_SLURM_VERSION=version)
    files = {f.path: f.content for f in p.files}
    assert path in files and absent not in files
    assert "topology-sync" in [prog.name for prog in p.programs]


def test_block_on_24_11_fails_pod_start_naming_the_field(tmp_path: Path) -> None:
    spec = podkit.SPEC_BASIC.replace("topologyPlugin: none", "topologyPlugin: block")
    pod = podkit.make_pod(tmp_path, "controller", spec=spec)
    with pytest.raises(BadInput) as err:
        _plan(pod, "controller", SLURMPOD_CONTROLLER=None, SLURMPOD_SLURM_VERSION="24.11")
    assert err.value.problems[0].field == "topologyPlugin"


def test_no_topology_plugin_no_file_no_sync(tmp_path: Path) -> None:
    p = _plan(podkit.make_pod(tmp_path, "controller"), "controller", SLURMPOD_CONTROLLER=None)
    assert not {wk.TOPOLOGY_CONF, wk.TOPOLOGY_YAML} & {f.path for f in p.files}
    assert "topology-sync" not in [prog.name for prog in p.programs]


def test_api_source_without_api_access_fails_start_naming_it(tmp_path: Path) -> None:
    spec = podkit.SPEC_BASIC.replace("topologyPlugin: none", "topologyPlugin: tree\ntopology: {source: api}")
    pod = podkit.make_pod(tmp_path, "controller", spec=spec)
    with pytest.raises(BadInput) as err:
        _plan(pod, "controller", SLURMPOD_CONTROLLER=None, KUBERNETES_SERVICE_HOST=None)
    assert wk.ENV_KUBERNETES_SERVICE_HOST in err.value.problems[0].field
