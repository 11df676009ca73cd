"""Pod start when something goes wrong, through the real code: homes that cannot be made, a filesystem
that refuses a write, a key planted against us, the E2BIG caps, and SIGTERM while start blocks.

Every run of the real command here fails before its first write outside the test's directory: the run
directory (under tmp) is the first thing ``apply`` makes.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import podkit
import pytest

from slurmpod import hardware, podinfo
from slurmpod import well_known as wk
from slurmpod.entrypoints import nodespec, secrets, start, writer
from slurmpod.slurm_version import SlurmVersion

SLURMPOD = Path(sys.executable).with_name("slurmpod")


# --- home directories on the shared /home volume ---


def test_missing_home_is_made_owned_and_private(tmp_path: Path) -> None:
    home = tmp_path / "home" / "researcher"
    home.parent.mkdir()
    writer.make_home(start.OutDir(str(home), 4321, 4322, 0o750, home=True))
    st = home.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (4321, 4322, 0o750)


def test_existing_home_keeps_owner_and_mode(tmp_path: Path) -> None:
    home = tmp_path / "researcher"
    home.mkdir()
    os.chown(home, 1234, 1235)
    home.chmod(0o711)
    (home / ".bashrc").write_text("# theirs\n")
    writer.make_home(start.OutDir(str(home), 4321, 4322, 0o750, home=True))
    st = home.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1234, 1235, 0o711)
    assert (home / ".bashrc").read_text() == "# theirs\n"


@pytest.mark.parametrize(
    ("parent", "err"),
    [("a-file", errno.ENOTDIR), ("missing/dir", errno.ENOENT)],
    ids=["parent-is-a-file", "parent-missing"],
)
def test_home_that_cannot_be_made_is_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture, parent: str,
                                               err: int) -> None:
    # Root ignores mode bits, so a read-only parent is stood in for by parents no one can mkdir under.
    (tmp_path / "a-file").write_text("")
    home = tmp_path / parent / "researcher"
    with pytest.raises(OSError) as probe:  # what the kernel says to a plain mkdir here
        home.mkdir()
    assert probe.value.errno == err
    with caplog.at_level(logging.WARNING, logger="slurmpod.entrypoints.writer"):
        writer.make_home(start.OutDir(str(home), 4321, 4322, 0o750, home=True))
    assert not home.exists()
    (record,) = [r for r in caplog.records if r.name == "slurmpod.entrypoints.writer"]
    assert record.levelno == logging.WARNING and "home directory not made" in record.getMessage()
    assert record.ctx["path"] == str(home)  # type: ignore[attr-defined]


def test_apply_goes_on_past_a_home_it_cannot_make(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path / "pod", "worker")
    env = pod.env("worker")
    settings = start.Settings.from_env(env)
    p = podkit.plan("worker", env, settings)
    (tmp_path / "a-file").write_text("")
    bad_home = start.OutDir(str(tmp_path / "a-file" / "researcher"), 4321, 4322, 0o750, home=True)
    good_home = start.OutDir(str(tmp_path / "home" / "alice"), 4323, 4324, 0o750, home=True)
    (tmp_path / "home").mkdir()
    # Only what lands under tmp: the run dir, two homes, no keys or /etc files.
    p = dataclasses.replace(p, dirs=(start.OutDir(str(pod.run_dir / "bin"), 0, 0, 0o755), bad_home, good_home),
                            keys=(), files=())
    conf = writer.apply(p, settings.run_dir)
    assert conf == pod.run_dir / wk.SUPERVISORD_CONF and conf.read_text() == p.supervisord_conf
    assert (tmp_path / "home" / "alice").stat().st_uid == 4323
    assert sorted(x.name for x in (pod.run_dir / "bin").iterdir()) == sorted(prog.name for prog in p.programs)


# --- an OSError while writing: exit 1, one line, the termination log, no traceback ---


@pytest.mark.parametrize("role", ["worker", "login", "controller"])
def test_unwritable_run_dir_exits_1_with_one_line(tmp_path: Path, role: str) -> None:
    pod = podkit.make_pod(tmp_path, role)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a regular file where a directory must go\n")
    run_dir = blocker / "run"
    env = pod.env(role, **{wk.ENV_RUN_DIR: str(run_dir)})
    proc = subprocess.run([str(SLURMPOD), "entrypoint", role], env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("slurmpod: ")]
    assert lines == [f"slurmpod: Not a directory {run_dir / 'bin'}"], proc.stderr  # strerror and the path
    assert pod.tlog.read_text() == lines[0]
    assert "starting supervisord" not in proc.stderr
    assert blocker.read_text() == "a regular file where a directory must go\n"


# --- keys ---


def test_install_never_writes_through_a_planted_symlink(tmp_path: Path) -> None:
    key = secrets.read_key(podkit.write_key(tmp_path / "src.key"), "k")
    etc = tmp_path / "etc" / "munge"
    etc.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("root:x:0:0::/root:/bin/bash\n")
    victim.chmod(0o644)
    (etc / ".munge.key.tmp").symlink_to(victim)
    secrets.install(key, etc / "munge.key", os.getuid(), os.getgid())
    assert victim.read_text() == "root:x:0:0::/root:/bin/bash\n"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644
    dest = etc / "munge.key"
    assert not dest.is_symlink() and dest.read_bytes() == key.data
    assert stat.S_IMODE(dest.stat().st_mode) == 0o400
    assert sorted(p.name for p in etc.iterdir()) == ["munge.key"]


def test_install_replaces_a_symlink_at_the_destination_not_its_target(tmp_path: Path) -> None:
    key = secrets.read_key(podkit.write_key(tmp_path / "src.key"), "k")
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    dest = tmp_path / "munge.key"
    dest.symlink_to(victim)
    secrets.install(key, dest, os.getuid(), os.getgid())
    assert victim.read_text() == "keep me\n"
    assert not dest.is_symlink() and dest.read_bytes() == key.data


def test_install_with_a_dangling_planted_symlink_creates_nothing_at_its_target(tmp_path: Path) -> None:
    key = secrets.read_key(podkit.write_key(tmp_path / "src.key"), "k")
    target = tmp_path / "would-be-created"
    (tmp_path / ".munge.key.tmp").symlink_to(target)
    secrets.install(key, tmp_path / "munge.key", os.getuid(), os.getgid())
    assert not target.exists()
    assert (tmp_path / "munge.key").read_bytes() == key.data


# --- the E2BIG caps (the over-cap cases are in corpus/malformed.yaml: features-65, ...) ---


def test_the_longest_legal_features_fit_under_the_conf_cap(tmp_path: Path) -> None:
    """64 features of 64 characters each (every cap at its limit) still make a --conf string under
    MAX_CONF_CHARS: the feature caps alone keep the slurmd argument bounded."""
    root = tmp_path / "pod"
    features = ",".join(f"f{i:02d}" + "x" * 61 for i in range(nodespec.MAX_FEATURES - 1))
    podkit.write_podinfo(root / "podinfo", podkit.worker_labels("w" * 64), {wk.ANNOTATION_FEATURES: features})
    hw_root = podkit.write_machine(root / "hw", podkit.Machine())
    pod = podinfo.load({wk.ENV_POD_NAME: podkit.POD, wk.ENV_CONTROLLER: podkit.CONTROLLER}, root / "podinfo")
    spec = nodespec.build(pod, hardware.probe(hw_root), SlurmVersion(24, 11))
    assert len(spec.features) == nodespec.MAX_FEATURES
    assert all(len(f) == 64 for f in spec.features)
    assert len(spec.conf_string()) < nodespec.MAX_CONF_CHARS


# --- SIGTERM while start blocks ---


def test_sigterm_during_start_exits_143_and_writes_nothing(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path, "worker")
    labels = pod.podinfo / wk.PODINFO_LABELS
    labels.unlink()
    os.mkfifo(labels)  # start blocks reading it: nobody writes
    proc = subprocess.Popen([str(SLURMPOD), "entrypoint", "worker"], env=pod.env("worker"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    writer = -1
    try:
        # Opening the FIFO for writing succeeds only once start has it open for reading: start is then
        # past its signal set-up and blocked in the read (no data ever comes while we hold it open).
        end = time.monotonic() + 30
        while writer < 0 and time.monotonic() < end and proc.poll() is None:
            try:
                writer = os.open(labels, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                assert exc.errno == errno.ENXIO
                time.sleep(0.05)
        assert writer >= 0, f"start never opened the labels FIFO (exit {proc.poll()})"
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if writer >= 0:
            os.close(writer)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert list(pod.run_dir.iterdir()) == []
    assert pod.tlog.read_text() == ""
    assert "Traceback" not in stderr
