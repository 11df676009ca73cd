"""Dockerfile layering rules, read from the Dockerfiles themselves (no Docker needed).

The rules: users before packages; apt with --no-install-recommends and lists cleaned in the same
RUN; secrets (munge key, ssh host keys) deleted in the RUN that creates them; slurmpod installed
in the last layers of every role image and never in base; the build tool passes exactly the
ARGs each Dockerfile declares and its context holds every COPY source.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from slurmpod import well_known
from slurmpod_host.images import build, flavors

FILESYSTEM = {"RUN", "COPY", "ADD"}


@dataclass(frozen=True)
class Instr:
    op: str
    args: str


def parse(text: str) -> list[Instr]:
    """Dockerfile -> instructions: comment lines dropped (also inside continuations),
    backslash-newline continuations joined. Ref: https://docs.docker.com/reference/dockerfile/#format"""
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    out = []
    for line in joined.splitlines():
        if line.strip():
            op, _, args = line.strip().partition(" ")
            out.append(Instr(op.upper(), " ".join(args.split())))
    return out


def dockerfile(name: str) -> list[Instr]:
    return parse((build.DOCKERFILES / f"{name}.Dockerfile").read_text())


def index(instrs: list[Instr], op: str, needle: str) -> int:
    hits = [i for i, ins in enumerate(instrs) if ins.op == op and needle in ins.args]
    assert len(hits) == 1, f"expected one {op} containing {needle!r}, found {len(hits)}"
    return hits[0]


def test_parser_joins_continuations_and_drops_comments() -> None:
    got = parse("FROM x\n# c\nRUN a \\\n# inside\n    b\nENTRYPOINT [\"y\"]\n")
    assert got == [Instr("FROM", "x"), Instr("RUN", "a b"), Instr("ENTRYPOINT", '["y"]')]


def test_base_creates_users_before_any_package_and_has_no_slurmpod() -> None:
    base = dockerfile("base")
    users = index(base, "RUN", "useradd")
    apt = index(base, "RUN", "apt-get install")
    assert users < apt
    assert not [i for i in base if "slurmpod-wheel" in i.args], "base must not contain slurmpod itself"
    assert "/usr/local/bin/supervisord" in base[index(base, "RUN", "venv")].args


@pytest.mark.parametrize("name", flavors.ALL_IMAGES)
def test_apt_runs_are_lean_and_secret_free(name: str) -> None:
    for ins in dockerfile(name):
        if ins.op == "RUN" and "apt-get install" in ins.args:
            assert "--no-install-recommends" in ins.args
            assert "apt-get update" in ins.args, "update and install in one layer (no stale lists)"
            assert "rm -rf /var/lib/apt/lists/*" in ins.args
            # munge's postinst creates a key; every apt RUN may (re)configure munge.
            assert "rm -f" in ins.args and "/etc/munge/munge.key" in ins.args


@pytest.mark.parametrize("role", ["worker", "login"])
@pytest.mark.parametrize("flavor", sorted(flavors.FLAVORS))
def test_ssh_host_keys_removed_in_the_run_installing_openssh(role: str, flavor: str) -> None:
    assert "openssh-server" in flavors.get(flavor).role_packages(role)
    apt = dockerfile(role)[index(dockerfile(role), "RUN", "--no-install-recommends $APT_PACKAGES")]
    assert "/etc/ssh/ssh_host_*" in apt.args
    copy = index(dockerfile(role), "COPY", "sshd_config.d/slurmpod.conf")
    assert copy > dockerfile(role).index(apt)


# Layers that need slurmpod installed come after it: the controller compiles its job_submit plugin with it.
AFTER_SLURMPOD = {"controller": 1}


@pytest.mark.parametrize("role", flavors.ROLES)
def test_slurmpod_is_the_last_layer_of_every_role(role: str) -> None:
    instrs = dockerfile(role)
    layers = [i for i in instrs if i.op in FILESYSTEM]
    layers = layers[:len(layers) - AFTER_SLURMPOD.get(role, 0)]
    assert layers[-2].op == "COPY" and "slurmpod-wheel/" in layers[-2].args
    assert layers[-1].op == "RUN" and "/tmp/slurmpod-wheel/slurmpod-*.whl" in layers[-1].args
    assert "--no-index" in layers[-1].args and "/usr/local/bin/slurmpod" in layers[-1].args
    apt = index(instrs, "RUN", "--no-install-recommends $APT_PACKAGES")
    assert apt < instrs.index(layers[-2])
    assert instrs[0] == Instr("ARG", "BASE_IMAGE") and instrs[1] == Instr("FROM", "${BASE_IMAGE}")
    entry = [i for i in instrs if i.op == "ENTRYPOINT"]
    assert [json.loads(e.args) for e in entry] == [["slurmpod", "entrypoint", role]]


@pytest.mark.parametrize("name", flavors.ALL_IMAGES)
@pytest.mark.parametrize("flavor", sorted(flavors.FLAVORS))
def test_build_args_match_declared_args(name: str, flavor: str) -> None:
    declared = {i.args.split("=")[0]: "=" in i.args for i in dockerfile(name) if i.op == "ARG"}
    settings = build.BuildSettings(flavor=flavors.get(flavor), images=(), repo=Path("."), build_dir=Path("b"),
                                   log_file=Path("l"))
    passed = build.build_args(settings, name, "slurmpod/rootfs:x")
    assert set(passed) <= set(declared), "an undeclared build-arg makes Docker warn"
    assert {a for a, has_default in declared.items() if not has_default} <= set(passed)


def test_base_build_args_carry_the_fixed_ids_and_flavor_options() -> None:
    forky = build.BuildSettings(flavor=flavors.get("26.05"), images=(), repo=Path("."), build_dir=Path("b"),
                                log_file=Path("l"))
    args = build.build_args(forky, "base", "slurmpod/rootfs:forky")
    assert args["SLURM_UID"] == str(well_known.SLURM_UID) == "64030"
    assert args["MUNGE_UID"] == str(well_known.MUNGE_UID) == "64031"
    assert (args["DEMO_USER"], args["DEMO_UID"]) == ("researcher", "2000")
    assert args["APT_CHECK_VALID_UNTIL"] == "false"
    assert args["SUITE"] == "forky"
    assert args["PYTHON_REQUIREMENTS"].split() == list(flavors.PYTHON_REQUIREMENTS)
    role = build.build_args(forky, "worker", "unused")
    packages = "slurmd openssh-server libpam-slurm-adopt slurm-wlm-nvml-plugin slurm-wlm-jwt-plugin"
    assert role == {"BASE_IMAGE": "slurmpod/base:26.05", "APT_PACKAGES": packages, "CONTRIB_SUITE": "sid",
                    "HOOK_BUILD_PACKAGES": "gcc libc6-dev libslurm-dev"}


def test_controller_compiles_the_plugin_with_the_venv_python_and_drops_the_tools() -> None:
    instrs = dockerfile("controller")
    last = [i for i in instrs if i.op in FILESYSTEM][-1]
    assert "/usr/bin/python3 -c" in last.args and "build_plugin.main()" in last.args  # Debian's cffi
    assert 'sys.path.append' in last.args and '--site-dir "$site"' in last.args
    # install, compile, then remove the compilers in the same layer: none of them is left in the image
    assert last.args.index("apt-get install") < last.args.index("build_plugin") \
        < last.args.index("apt-get purge -y --auto-remove $BUILD_PACKAGES")
    # the plugin dlopen()s libpython3.X at init(); its interpreter imports Debian's _cffi_backend
    assert 'apt-mark manual "$libpython" python3-cffi-backend' in last.args
    forky = build.BuildSettings(flavor=flavors.get("26.05"), images=(), repo=Path("."), build_dir=Path("b"),
                                log_file=Path("l"))
    assert build.build_args(forky, "controller", "unused")["BUILD_PACKAGES"].split() \
        == list(flavors.PLUGIN_BUILD_PACKAGES)


def test_valid_until_option_is_written_to_apt_conf_d() -> None:
    run = dockerfile("base")[index(dockerfile("base"), "RUN", "Check-Valid-Until")]
    assert 'if [ "$APT_CHECK_VALID_UNTIL" = false ]' in run.args
    assert "/etc/apt/apt.conf.d/" in run.args


def _sssd_suite_snippet(run: Instr, root: Path) -> str:
    """The shell of base's package RUN that adds SSSD's suite, with /etc/apt/ moved under ``root``."""
    start = run.args.index('if [ "$SSSD_SUITE" != "$SUITE" ]')
    return run.args[start:run.args.index(" fi;", start) + 3].replace("/etc/apt/", f"{root}/etc/apt/")


@pytest.mark.parametrize(("flavor", "written"), [("24.11", False), ("26.05", True)], ids=["trixie-own", "forky-sid"])
def test_sssd_comes_from_its_suite_with_that_suites_other_packages_pinned_out(flavor: str, written: bool,
                                                                              tmp_path: Path) -> None:
    """forky has no sssd: its install alone sees sid's main section, where apt may take the binaries of Debian's
    sssd source package (priority 100: forky's own once it has them) and nothing else (-1: never)."""
    base = dockerfile("base")
    run = base[index(base, "RUN", "--no-install-recommends $APT_PACKAGES")]
    settings = build.BuildSettings(flavor=flavors.get(flavor), images=(), repo=Path("."), build_dir=Path("b"),
                                   log_file=Path("l"))
    args = build.build_args(settings, "base", "unused")
    assert (args["SSSD_SUITE"], args["SSSD_SOURCE"]) == ({"24.11": "trixie", "26.05": "sid"}[flavor], "sssd")
    apt = tmp_path / "etc" / "apt"
    for d in ("sources.list.d", "preferences.d"):
        (apt / d).mkdir(parents=True)
    (apt / "sources.list").write_text(f"deb http://mirror.example/debian {args['SUITE']} main\n")
    env = {"PATH": "/usr/bin:/bin", **{k: args[k] for k in ("SUITE", "SSSD_SUITE", "SSSD_SOURCE")}}
    done = subprocess.run(["sh", "-eu", "-c", _sssd_suite_snippet(run, tmp_path)], env=env, capture_output=True,
                          text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    sources, prefs = apt / "sources.list.d" / "slurmpod-sssd.list", apt / "preferences.d" / "slurmpod-sssd"
    assert sources.exists() is prefs.exists() is written
    if written:
        assert sources.read_text() == "deb http://mirror.example/debian sid main\n"
        assert prefs.read_text().split("\n\n") == [
            "Package: src:sssd\nPin: release n=sid,c=main\nPin-Priority: 100",
            "Package: *\nPin: release n=sid,c=main\nPin-Priority: -1\n"]
    # gone again in the same layer: later layers' apt sees the flavor's suite only
    assert run.args.index("apt-get install") < run.args.index(
        "/etc/apt/sources.list.d/slurmpod-sssd.list /etc/apt/preferences.d/slurmpod-sssd;")


def test_venv_path_is_the_well_known_one() -> None:
    for name in flavors.ALL_IMAGES:
        text = (build.DOCKERFILES / f"{name}.Dockerfile").read_text()
        assert well_known.VENV_DIR + "/bin/python" in text


@pytest.mark.parametrize("name", flavors.ALL_IMAGES)
def test_context_holds_every_copy_source_and_little_else(name: str, tmp_path: Path) -> None:
    wheels = tmp_path / "wh"
    wheels.mkdir()
    (wheels / "pip-1-py3-none-any.whl").write_bytes(b"x")
    (wheels / "requirements.txt").write_text("not copied")
    wheel = tmp_path / "slurmpod-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"x")
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    build.make_context(name, ctx, wheels, wheel)
    for ins in dockerfile(name):
        if ins.op == "COPY":
            source = ins.args.split()[0]
            assert (ctx / source).exists(), f"{name}: COPY source {source} missing from the context"
    files = sorted(str(p.relative_to(ctx)) for p in ctx.rglob("*") if p.is_file())
    wheel_only = ["Dockerfile", "slurmpod-wheel/slurmpod-0.1.0-py3-none-any.whl"]
    prep = ["prep_slurmpod.c", "slurmd_job_env.h", "slurmpod_agent_ask.c", "slurmpod_agent_ask.h"]
    expected = {"base": ["Dockerfile", "wheelhouse/pip-1-py3-none-any.whl"],
                "controller": sorted([*wheel_only, *prep]), "accounting": wheel_only, "restapi": wheel_only}
    login = ["Dockerfile", "install-mpi.sh", "mpi_hello.c", "openmpi-mca-params.conf", "pam-slurmpod-mkhomedir",
             "psm2_absent.c", "psm2_absent.map", "slurmpod-wheel/slurmpod-0.1.0-py3-none-any.whl",
             "sshd_slurmpod.conf"]
    expected["worker"] = sorted([*login, "install-hooks.sh", "slurmpod_hook.c", "slurmpod_spank.c",
                                 "slurmpod_task_env.c", "slurmpod_task_env.h", "slurmpod_cpus.c", "slurmpod_cpus.h",
                                 *prep])
    assert files == expected.get(name, login)


def test_sshd_drop_in_settings() -> None:
    text = (build.FILES / "sshd_slurmpod.conf").read_text()
    settings = dict(ln.split(None, 1) for ln in text.splitlines() if ln and not ln.startswith("#"))
    assert settings == {"PasswordAuthentication": "no", "KbdInteractiveAuthentication": "no",
                        "PermitRootLogin": "no", "UsePAM": "yes", "AllowTcpForwarding": "no",
                        "AllowStreamLocalForwarding": "no", "AllowAgentForwarding": "no", "X11Forwarding": "no",
                        "PermitTunnel": "no", "GatewayPorts": "no"}


@pytest.mark.parametrize("role", ["worker", "login"])
def test_openmpi_only_where_slurm_has_mpi_pmix(role: str) -> None:
    """trixie's Slurm 24.11 has mpi/pmix; Debian's 26.05 is built without it, so no OpenMPI there."""
    def args(flavor: str) -> dict[str, str]:
        settings = build.BuildSettings(flavor=flavors.get(flavor), images=(), repo=Path("."), build_dir=Path("b"),
                                       log_file=Path("l"))
        return build.build_args(settings, role, "unused")

    trixie, forky = args("24.11"), args("26.05")
    assert trixie["MPI_PACKAGES"].split() == list(flavors.MPI_PACKAGES)
    assert trixie["MPI_STUBS"].split() == list(flavors.MPI_STUBS)
    # both compile slurmpod-mpi-hello and the libpsm2 stand-in
    assert trixie["MPI_BUILD_PACKAGES"].split() == list(flavors.MPI_BUILD_PACKAGES)
    assert trixie["HWLOC_UNUSED_PLUGINS"].split() == ["opencl", "gl", "levelzero"]
    assert not [k for k in forky if k.startswith(("MPI_", "HWLOC_"))]
    for f in ("install-mpi.sh", "mpi_hello.c", "openmpi-mca-params.conf", "psm2_absent.c", "psm2_absent.map"):
        assert f in build.CONTEXT_FILES[role]


@pytest.mark.parametrize("role", ["worker", "login"])
def test_worker_and_login_run_the_same_mpi_layer(role: str) -> None:
    run = dockerfile(role)[index(dockerfile(role), "RUN", "install-mpi.sh")]
    assert run.args == "sh /tmp/slurmpod-mpi/install-mpi.sh"


def test_the_mpi_layer_compiles_then_drops_the_compilers_in_one_run() -> None:
    text = (build.FILES / "install-mpi.sh").read_text(encoding="utf-8")
    assert text.index("slurmpod-no-rocm.deb $MPI_PACKAGES") < text.index("mpicc") \
        < text.index("comm -13 /tmp/slurmpod-mpi/before /tmp/slurmpod-mpi/after | xargs apt-get purge -y")
    assert "/etc/openmpi/openmpi-mca-params.conf" in text
    assert 'if [ -z "$MPI_PACKAGES" ]; then rm -rf /tmp/slurmpod-mpi; exit 0; fi' in text


def test_pam_slurm_adopt_refuses_what_it_cannot_contain() -> None:
    """Without PrologFlags=Contain there is no extern step; the module's defaults would then let the
    session in (action_adopt_failure=allow, action_generic_failure=ignore). Ref: https://slurm.schedmd.com/pam_slurm_adopt.html"""
    (run,) = [i for i in dockerfile("worker") if i.op == "RUN" and "pam_slurm_adopt.so" in i.args]
    line = run.args.split("'")[3]
    assert line.split()[:3] == ["account", "required", "pam_slurm_adopt.so"]
    assert set(line.split()[3:]) == {"action_no_jobs=deny", "action_adopt_failure=deny",
                                     "action_generic_failure=deny"}
    assert run.args.endswith(">> /etc/pam.d/sshd")
