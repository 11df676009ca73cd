"""job_submit_slurmpod.so built by build_plugin and loaded by a stand-in slurmctld (C, dlopen).

The real build path — cffi embedding, the C shim, libpython promoted to RTLD_GLOBAL in init(), strings
through the host's slurm_xstrdup/slurm_xfree — against a test header with job_desc_msg_t's field names
(tests/fakes/slurm/include). The cluster tests run the same plugin in a real slurmctld.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import paths
import pytest
from policykit import default_policy_text

from slurmpod import well_known as wk
from slurmpod.slurm_plugins import build_plugin, stats

FAKES = paths.TESTS / "fakes" / "slurm"
# Slurm 24.11's slurm_errno.h values (the fake header has the same). Ref: slurm/slurm_errno.h
ESLURM_ACCESS_DENIED, ESLURM_PATHNAME_TOO_LONG, ESLURM_INVALID_TIME_LIMIT, ESLURM_INVALID_GRES = 2002, 2012, 2051, 2072
ESLURM_INVALID_PARTITION_NAME = 2000


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.fail("a C compiler is needed to build the plugin (bootstrap-host.sh installs gcc)")
    out = tmp_path_factory.mktemp("plugin")
    plugin = build_plugin.build(out, [str(FAKES / "include")], [sysconfig.get_paths()["purelib"]])
    host = out / "slurmctld_host"
    subprocess.run([cc, "-O1", "-rdynamic", "-I", str(FAKES / "include"), "-o", str(host),
                    str(FAKES / "slurmctld_host.c"), "-ldl", "-lpthread"], check=True, timeout=120)
    return plugin, host


def _run(built: tuple[Path, Path], policy: Path, *jobs: str, stats_file: Path | None = None,
         reload: bool = False, wait_ms: int = 0, **host_env: str) -> subprocess.CompletedProcess[str]:
    plugin, host = built
    env = {**os.environ, wk.ENV_POLICY: str(policy), wk.ENV_PLUGIN_STATS: str(stats_file or policy.parent / "s"),
           **{f"HOST_{k.upper()}": v for k, v in host_env.items()}}
    if reload:
        env["HOST_RELOAD"] = "1"
    if wait_ms:
        env["HOST_WAIT_MS"] = str(wait_ms)
    return subprocess.run([str(host), str(plugin), *jobs], capture_output=True, text=True, timeout=120, check=False,
                          env=env)


def _lines(out: subprocess.CompletedProcess[str]) -> dict[str, dict[str, str]]:
    """job=SPEC rc=... key=value ... err=MESSAGE (err last: it may hold spaces)."""
    found = {}
    for line in out.stdout.splitlines():
        if line.startswith("job="):
            head, _, err = line.partition(" err=")
            fields = dict(kv.split("=", 1) for kv in head.split(" "))
            fields["err"] = err
            found[fields["job"]] = fields
    return found


def test_accept_modify_reject_through_the_plugin(built: tuple[Path, Path], tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(default_policy_text(), encoding="utf-8")
    out = _run(built, policy, "main", "preempt:8:2", "cpu:1")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"plugin_type={wk.PLUGIN_TYPE} plugin_version={(24 << 16) + (11 << 8) + 5} init=0" in out.stdout
    jobs = _lines(out)
    assert jobs["main"]["rc"] == "0" and jobs["main"]["err"] == "-" and jobs["main"]["requeue"] == str(0xFFFE)
    pre = jobs["preempt:8:2"]
    assert (pre["rc"], pre["time_limit"], pre["requeue"], pre["warn_signal"]) == ("0", "1440", "1", "10")
    assert "requeue enabled" in pre["err"]
    assert jobs["cpu:1"]["rc"] == str(ESLURM_INVALID_GRES)  # sbatch: "Invalid generic resource (gres) specification"
    assert jobs["cpu:1"]["err"] == "partition cpu has no GPUs; submit GPU jobs to a GPU partition"
    assert "verdict=reject rules=cpu-only-partition" in out.stderr  # the decision log line, through slurm_log_var
    assert "fini=0" in out.stdout


def test_strings_are_written_back_with_slurms_allocator(built: tuple[Path, Path], tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("topology: {plugin: block, groupSize: 4, wholeNodeGpus: 8}\n", encoding="utf-8")
    job = _lines(_run(built, policy, "gpu:2:3"))["gpu:2:3"]
    assert (job["rc"], job["tres_per_node"], job["segment_size"]) == ("0", "gres/gpu:8", "3")


def test_a_policy_that_raises_rejects_and_the_host_survives(built: tuple[Path, Path], tmp_path: Path) -> None:
    (tmp_path / "rules.py").write_text("def rule(job, decision):\n    raise RuntimeError('boom')\n",
                                       encoding="utf-8")
    policy = tmp_path / "policy.yaml"
    policy.write_text("rules: [{file: rules.py}]\n", encoding="utf-8")
    out = _run(built, policy, "main", "main")
    assert out.returncode == 0 and "init=0" in out.stdout and "fini=0" in out.stdout
    job = _lines(out)["main"]
    assert job["rc"] == "-1"
    assert job["err"] == "rejected by cluster policy: rule rules.py:rule failed: RuntimeError: boom"


def test_an_invalid_policy_does_not_stop_init(built: tuple[Path, Path], tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("tiers: nope\n", encoding="utf-8")
    out = _run(built, policy, "main")
    assert "init=0" in out.stdout
    assert "unusable, jobs will be rejected until it is fixed" in out.stderr
    assert _lines(out)["main"]["err"].startswith("rejected by cluster policy: invalid policy: tiers='nope'")


def test_concurrent_calls_agree_and_are_timed(built: tuple[Path, Path], tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(default_policy_text(), encoding="utf-8")
    stats_file = tmp_path / "stats.json"
    out = _run(built, policy, "--threads", "8", "--repeat", "40", "preempt:8:2", stats_file=stats_file)
    assert "threads=8 repeat=40 mismatches=0" in out.stdout, out.stdout + out.stderr
    s = stats.read(stats_file)
    # The default policy is decided in C once the caller's name is in the C cache: only the host's first
    # call (before the threads start) goes to Python, which looks the name up within its deadline.
    assert (s.calls, s.fast, s.failures) == (8 * 40 + 2, 8 * 40 + 1, 0), s
    # every decision logged once, by the shim's writer thread or at fini(): none lost, none doubled
    assert out.stderr.count(" verdict=") == 8 * 40 + 2, out.stderr
    assert 0 < s.p50_us <= s.p99_us and json.loads(stats_file.read_text())["bucket_us"] == 1


# The shim's writer logs a decision at most SP_LOG_FLUSH_MS (50 ms) after the call; the host waits 40x that.
LOG_WRITER_WAIT_MS = 2000


def test_decisions_are_logged_by_the_writer_thread_before_fini(built: tuple[Path, Path], tmp_path: Path) -> None:
    """The RPC thread only queues its line (it holds slurmctld's job lock); the shim's thread logs it."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(default_policy_text(), encoding="utf-8")
    out = _run(built, policy, "cpu:1", "main", wait_ms=LOG_WRITER_WAIT_MS)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stderr.splitlines()
    decisions = [i for i, line in enumerate(lines) if " verdict=" in line]
    assert len(decisions) == 2, out.stderr
    # main() submitted both jobs; another thread (the shim's writer) logged them
    assert all(lines[i].startswith("log3@thread: job_submit/slurmpod: ") for i in decisions), out.stderr
    assert max(decisions) < lines.index("host: fini"), out.stderr  # written while the host slept, not at fini()


def test_a_policy_swapped_in_takes_effect_on_the_next_call(built: tuple[Path, Path], tmp_path: Path) -> None:
    """The C fast path's table is recompiled when the policy file changes, and a policy it cannot compile
    (a site rule) sends every call to Python."""
    policy, capped, ruled = tmp_path / "policy.yaml", tmp_path / "capped.yaml", tmp_path / "ruled.yaml"
    policy.write_text(default_policy_text(), encoding="utf-8")
    capped.write_text("tiers: [{name: t, partitions: [main], maxTimeMinutes: 7}]\n", encoding="utf-8")
    (tmp_path / "rules.py").write_text("def rule(job, decision):\n    raise RuntimeError('boom')\n",
                                       encoding="utf-8")
    ruled.write_text("rules: [{file: rules.py}]\n", encoding="utf-8")
    stats_file = tmp_path / "stats.json"
    out = _run(built, policy, "main", f"--swap={capped}", "main:0:1", f"--swap={ruled}", "main:0:2",
               stats_file=stats_file)
    assert out.stdout.count("swap=0") == 2, out.stdout + out.stderr
    jobs = _lines(out)
    assert (jobs["main"]["rc"], jobs["main"]["time_limit"]) == ("0", str(0xFFFFFFFE))
    assert (jobs["main:0:1"]["rc"], jobs["main:0:1"]["time_limit"]) == ("0", "7")
    assert jobs["main:0:2"]["err"] == "rejected by cluster policy: rule rules.py:rule failed: RuntimeError: boom"
    assert "every job is decided in Python: site rules run in Python for every job" in out.stderr
    assert stats.read(stats_file).fast == 1  # the first call (the name not yet cached) and the ruled one: Python


def test_unloaded_and_loaded_again_in_the_same_process(built: tuple[Path, Path], tmp_path: Path) -> None:
    """An in-process reconfigure (fini, dlclose, dlopen, init) keeps answering: Python is started once
    and the second init() only re-reads the policy. (The shim also pins itself with RTLD_NODELETE; with
    glibc here the plugin stayed mapped even without the pin, so this does not prove the pin is needed.)"""
    policy = tmp_path / "policy.yaml"
    policy.write_text(default_policy_text(), encoding="utf-8")
    out = _run(built, policy, "cpu:1", reload=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "reload init=0" in out.stdout
    assert f"reloaded job=cpu:1 rc={ESLURM_INVALID_GRES}" in out.stdout and "has no GPUs" in out.stdout


def _rss_kb(out: subprocess.CompletedProcess[str]) -> int:
    return int(next(line for line in out.stdout.splitlines() if line.startswith("rss_kb=")).split("=")[1])


def test_huge_comments_on_the_python_path_keep_rss_bounded(built: tuple[Path, Path], tmp_path: Path) -> None:
    """500 distinct submissions with multi-megabyte comments (a non-ASCII byte sends them to Python) once
    grew the stand-in from 17 MB to 1.9 GB: now a field past Slurm's 1 KiB is refused in C, and what
    Python remembers is keyed by a digest."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(default_policy_text(), encoding="utf-8")
    small = _run(built, policy, "main", unique="1")
    huge = _run(built, policy, "--threads", "4", "--repeat", "125", "main", unique="1", comment_bytes=str(4 << 20))
    assert huge.returncode == 0, huge.stdout + huge.stderr
    job = _lines(huge)["main"]
    assert job["rc"] == str(ESLURM_PATHNAME_TOO_LONG)
    assert job["err"] == "rejected by cluster policy: comment is longer than 1024 bytes"
    assert _rss_kb(huge) - _rss_kb(small) < 64 * 1024, (_rss_kb(small), _rss_kb(huge))


def test_comments_within_slurms_limit_on_the_python_path_keep_rss_bounded(built: tuple[Path, Path],
                                                                          tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(default_policy_text(), encoding="utf-8")
    few = _run(built, policy, "--threads", "1", "--repeat", "10", "main", unique="1", comment_bytes="1024")
    many = _run(built, policy, "--threads", "4", "--repeat", "500", "main", unique="1", comment_bytes="1024")
    assert _lines(many)["main"]["rc"] == "0", many.stdout + many.stderr
    assert _rss_kb(many) - _rss_kb(few) < 16 * 1024, (_rss_kb(few), _rss_kb(many))


def test_a_partition_with_a_newline_writes_no_line_of_its_own(built: tuple[Path, Path], tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(default_policy_text(), encoding="utf-8")
    out = _run(built, policy, "main\nforged job=1 user=root verdict=accept", wait_ms=100)
    logged = [line for line in out.stderr.splitlines() if "job_submit/slurmpod: " in line and " job=" in line]
    assert len(logged) == 1, out.stderr
    assert "verdict=reject rules=control-character field=partition" in logged[0]
    assert "forged" not in out.stderr


def test_gpus_per_task_on_a_cpu_only_partition_is_refused(built: tuple[Path, Path], tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(default_policy_text(), encoding="utf-8")
    job = _lines(_run(built, policy, "cpu", tres_per_task="gres/gpu:1"))["cpu"]
    assert job["rc"] == str(ESLURM_INVALID_GRES)
    assert job["err"] == "partition cpu has no GPUs; submit GPU jobs to a GPU partition"


ENFORCE = "AccountingStorageEnforce=associations,limits,qos\n"


@pytest.mark.parametrize(("enforce", "loads"), [("", False), (ENFORCE, True)], ids=["not-enforced", "enforced"])
def test_account_rules_load_only_where_slurm_conf_enforces_accounts(built: tuple[Path, Path], tmp_path: Path,
                                                                    enforce: str, loads: bool) -> None:
    """`sbatch -p high --account=inference` was accepted for anyone on a cluster without accounting."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("tiers: [{name: high, partitions: [high], access: {accounts: [inference]}}]\n", encoding="utf-8")
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=c\n" + enforce, encoding="utf-8")
    plugin, host = built
    env = {**os.environ, wk.ENV_POLICY: str(policy), wk.ENV_PLUGIN_STATS: str(tmp_path / "s"), "SLURM_CONF": str(conf),
           "HOST_ACCOUNT": "inference", "HOST_UID": "4242"}
    out = subprocess.run([str(host), str(plugin), "high"], capture_output=True, text=True, timeout=120, check=False,
                         env=env)
    job = _lines(out)["high"]
    if loads:
        assert job["rc"] == "0", out.stdout + out.stderr
    else:
        assert job["rc"] == "-1" and "tiers[0].access.accounts" in job["err"], out.stdout + out.stderr


def test_a_partition_holding_a_control_character_is_refused_before_slurm_logs_it(built: tuple[Path, Path],
                                                                                tmp_path: Path) -> None:
    """slurmctld logs an invalid partition by name, unescaped, after job_submit: the shim refuses a name
    holding a control character first, names the field, and logs neither the name nor the character."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(default_policy_text(), encoding="utf-8")
    out = _run(built, policy, "main\tforged")
    assert out.returncode == 0, out.stdout + out.stderr
    job = _lines(out)["main\tforged"]
    assert job["rc"] == str(ESLURM_INVALID_PARTITION_NAME)
    assert job["err"] == "rejected by cluster policy: partition holds a control character"
    assert "forged" not in out.stderr  # the decision's log line names the field, not its value


MODIFY_POLICY = """
tiers:
  - {name: preemptible, partitions: [preempt], requeue: true, maxTimeMinutes: 600,
     graceSignal: {signal: USR1, seconds: 90, target: batch}}
  - {name: normal, partitions: [main], maxTimeMinutes: 10080}
  - {name: high, partitions: [high], maxTimeMinutes: 240, access: {users: [root]}}
defaultTier: normal
"""


def test_a_modification_is_judged_on_the_job_record_merged_with_the_change(built: tuple[Path, Path],
                                                                            tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(MODIFY_POLICY, encoding="utf-8")
    week = "partition=main,time_limit=10080,requeue=0,job_id=7,user_id=2000"
    out = _run(built, policy, "modify:partition=high,job_id=7", "modify:partition=preempt,job_id=7",
               "modify:partition=preempt,time_limit=60,job_id=7", "modify:time_limit=60,job_id=7",
               "modify:partition=high,time_limit=200,job_id=7", existing=week)
    assert out.returncode == 0, out.stdout + out.stderr
    jobs = _lines(out)
    # scontrol update job=7 partition=high on a 7-day job: the record's time limit is past high's cap
    high = jobs["modify:partition=high,job_id=7"]
    assert (high["rc"], high["err"]) == (str(ESLURM_INVALID_TIME_LIMIT),
                                         "time limit 10080 min exceeds the high tier's cap of 240 min"), high
    # into preempt: the record has no grace signal, which update_job cannot add
    assert jobs["modify:partition=preempt,job_id=7"]["err"].startswith("time limit 10080 min exceeds")
    pre = jobs["modify:partition=preempt,time_limit=60,job_id=7"]
    assert "cannot be given its grace signal" in pre["err"] and pre["rc"] != "0", pre
    assert jobs["modify:time_limit=60,job_id=7"]["rc"] == "0"
    ok = jobs["modify:partition=high,time_limit=200,job_id=7"]
    assert (ok["rc"], ok["time_limit"], ok["requeue"]) == ("0", "200", str(0xFFFE)), ok
    # every record copied was freed with Slurm's own function; errno is 0 after success, else as it was
    assert (ok["copies"], ok["frees"]) == ("5", "5"), ok
    assert {(j["rc"] == "0", j["errno"]) for j in jobs.values()} == {(True, "0"), (False, str(errno.EAGAIN))}, jobs
    assert "modify job=7 user=root partition=high verdict=reject rules=tier-time-cap" in out.stderr


def test_a_modification_into_the_preemptible_tier_gets_its_requeue(built: tuple[Path, Path], tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(MODIFY_POLICY, encoding="utf-8")
    graced = "partition=main,time_limit=60,requeue=0,warn_signal=10,job_id=8,user_id=2000"
    job = _lines(_run(built, policy, "modify:partition=preempt,job_id=8", existing=graced))[
        "modify:partition=preempt,job_id=8"]
    assert (job["rc"], job["requeue"]) == ("0", "1"), job
    assert "requeue enabled" in job["err"]


def test_a_modification_the_policy_cannot_read_the_job_for_is_refused(built: tuple[Path, Path],
                                                                      tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(MODIFY_POLICY, encoding="utf-8")
    out = _run(built, policy, "modify:partition=high,job_id=9", "modify:job_id=9")  # no HOST_EXISTING: NULL
    jobs = _lines(out)
    refused = jobs["modify:partition=high,job_id=9"]
    assert refused["rc"] == str(ESLURM_ACCESS_DENIED) and "could not be read" in refused["err"], refused
    # a hold or release names no field the policy reads: passed through without a lookup
    assert (jobs["modify:job_id=9"]["rc"], jobs["modify:job_id=9"]["copies"]) == ("0", "0")


def test_the_c_side_never_asks_nss_itself(built: tuple[Path, Path], tmp_path: Path) -> None:
    """getpwuid_r has no deadline and slurmctld holds its job write lock in job_submit: the shim takes the
    caller's name only from Python's answer (looked up within bridge.IDENTITY_DEADLINE_S), then caches it."""
    plugin, _ = built
    imports = subprocess.run(["nm", "-D", "--undefined-only", str(plugin)], capture_output=True, text=True,
                             check=True, timeout=60).stdout
    assert not [s for s in ("getpwuid", "getpwnam", "getgrouplist", "getgrgid") if s in imports], imports
    policy = tmp_path / "policy.yaml"
    policy.write_text(default_policy_text(), encoding="utf-8")
    stats_file = tmp_path / "stats.json"
    out = _run(built, policy, "main", "main:0:1", "main:0:2", stats_file=stats_file)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (stats.read(stats_file).calls, stats.read(stats_file).fast) == (3, 2)  # cold once, then C
