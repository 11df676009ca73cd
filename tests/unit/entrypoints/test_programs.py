"""Run scripts for supervisord: valid bash, the munge wait only with auth/munge, argv quoted, daemon exec'd."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from slurmpod.entrypoints import daemons, programs
from slurmpod.entrypoints.render import Program

ALL = {
    "munged": programs.munged(),
    "slurmctld-munge": programs.slurmctld("munge"),
    "slurmctld-slurm": programs.slurmctld("slurm"),
    "slurmd": programs.slurmd("munge", "ctl", "CPUs=2 RealMemory=100"),
    "sackd": programs.sackd("slurm", "ctl:7817"),
    "sshd": programs.sshd(),
    "task": programs.slurmpod_task("reconcile-node", ["daemon", "reconcile-node"], restart="unexpected"),
}


@pytest.mark.parametrize("name", sorted(ALL))
def test_script_is_valid_bash_that_execs(name: str) -> None:
    prog = ALL[name]
    assert prog.script.startswith("#!/bin/bash\n")
    assert prog.script.endswith("\n")
    subprocess.run(["bash", "-n"], input=prog.script, text=True, check=True, timeout=10)
    last = prog.script.rstrip("\n").splitlines()[-1]
    assert last.startswith("exec /usr/")  # supervisord's signals reach the daemon itself
    if name == "task":  # slurmpod's own lines name their logger; no sed pipe to lose the last line
        assert "sed" not in prog.script
    else:
        assert f"[{prog.name}] " in prog.script  # log lines carry the program name


@pytest.mark.parametrize(
    ("prog", "waits"),
    [
        (ALL["slurmctld-munge"], True),
        (ALL["slurmctld-slurm"], False),
        (ALL["slurmd"], True),
        (ALL["sackd"], False),
        (ALL["munged"], False),
    ],
    ids=["slurmctld-munge", "slurmctld-slurm", "slurmd-munge", "sackd-slurm", "munged"],
)
def test_munge_wait_only_for_munge(prog: Program, waits: bool) -> None:
    assert ("/run/munge/munge.socket.2" in prog.script) is waits


def _argv(prog: Program) -> list[str]:
    return shlex.split(prog.script.rstrip("\n").splitlines()[-1])[1:]


def test_slurmd_argv() -> None:
    conf = "CPUs=2 Features=a,b Weight=5"
    assert _argv(programs.slurmd("munge", "ctl", conf)) == [
        "/usr/sbin/slurmd",
        "-D",
        "-Z",
        "--conf-server",
        "ctl:6817",
        "--conf",
        conf,
    ]
    assert _argv(programs.slurmd("munge", "ctl:7000", conf))[4] == "ctl:7000"


def test_slurmd_claims_its_placeholder_first_bounded_and_starts_whatever_the_claim_says() -> None:
    lines = programs.slurmd("munge", "ctl:7000", "CPUs=2", claim=True).script.splitlines()
    (claim,) = [i for i, line in enumerate(lines) if "claim-placeholder" in line]
    assert claim < len(lines) - 1 and lines[-1].startswith("exec /usr/sbin/slurmd")
    words = shlex.split(lines[claim])
    assert words[0] == "SLURM_CONF_SERVER=ctl:7000"  # scontrol fetches slurm.conf from slurmctld
    assert words[1:3] == ["timeout", str(programs.CLAIM_DEADLINE_SECONDS)] and words[-2:] == ["||", "true"]
    assert programs.CLAIM_DEADLINE_SECONDS >= daemons.CLAIM_DEADLINE + daemons.CLAIM_STEP_TIMEOUT
    # the claim comes after munged's socket: scontrol authenticates with it
    assert any("munge.socket" in line for line in lines[:claim])


def test_slurmd_claims_nothing_unless_asked() -> None:
    """A nodeset with no placeholders: slurmd starts without waiting for a claim."""
    script = programs.slurmd("munge", "ctl:7000", "CPUs=2").script
    assert "claim-placeholder" not in script and "SLURM_CONF_SERVER" not in script
    claimed = programs.slurmd("munge", "ctl:7000", "CPUs=2", claim=True).script.splitlines()
    assert [line for line in claimed if "claim-placeholder" not in line] == script.splitlines()


def test_sackd_argv() -> None:
    assert _argv(programs.sackd("munge", "ctl")) == ["/usr/sbin/sackd", "-D", "--conf-server", "ctl:6817"]


def test_quoting_keeps_shell_metacharacters_inert() -> None:
    nasty = "a'b; rm -rf / $(x) `y`"
    prog = programs.slurmd("munge", "ctl", nasty)
    assert _argv(prog)[-1] == nasty
    assert len(prog.script.splitlines()) == len(ALL["slurmd"].script.splitlines())


def test_program_settings() -> None:
    assert (ALL["munged"].user, ALL["munged"].priority) == ("munge", 10)
    assert ALL["slurmd"].priority == ALL["slurmctld-munge"].priority == 20  # after munged
    assert ALL["sshd"].priority == 30
    assert (ALL["sackd"].user, ALL["sackd"].priority) == ("slurm", 20)  # SlurmUser, as sackd.service runs it
    assert ALL["slurmd"].user is None  # root: slurmd launches jobs as their users
    assert (ALL["task"].restart, ALL["task"].startsecs, ALL["task"].priority) == ("unexpected", 0, 40)
    assert _argv(ALL["task"]) == ["/usr/local/bin/slurmpod", "daemon", "reconcile-node"]


@pytest.mark.parametrize(("pod_env", "expected"), [({}, "hash"), ({"PMIX_MCA_gds": "shmem2"}, "shmem2"),
                                                    ({"PMIX_MCA_gds": ""}, "hash")])
def test_slurmd_gives_the_pmix_servers_gds_hash_unless_the_pod_names_a_store(pod_env: dict[str, str],
                                                                              expected: str) -> None:
    """What slurmd's steps inherit: the run script's own line, run by bash with the pod's environment."""
    lines = [line for line in ALL["slurmd"].script.splitlines() if "PMIX_MCA_gds" in line]
    assert len(lines) == 1, ALL["slurmd"].script
    assert lines[0] == 'export PMIX_MCA_gds="${PMIX_MCA_gds:-hash}"'
    done = subprocess.run(["bash", "-c", f'{lines[0]}; printf %s "$PMIX_MCA_gds"'], env={"PATH": "/usr/bin:/bin",
                          **pod_env}, capture_output=True, text=True, check=True, timeout=10)
    assert done.stdout == expected
    assert lines[0] not in ALL["slurmctld-munge"].script  # only slurmd starts PMIx servers
