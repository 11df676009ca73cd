"""The health config: validation names every bad key; thresholds per GPU model; the job's env."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import paths
import pytest

from slurmpod.errors import BadInput
from slurmpod.prolog_epilog import config, job, metrics, registry
from slurmpod.prolog_epilog.result import Context, fail, ok

KNOWN = registry.names()


@pytest.mark.parametrize(("doc", "field"), [
    ({"bogus": 1}, "bogus"),
    ({"deadline": {"prolog": -1}}, "deadline.prolog"),
    ({"deadline": {"lunch": 5}}, "deadline.lunch"),
    ({"checks": {"nope": {}}}, "checks.nope"),
    ({"checks": {"xid": {"timeout": "soon"}}}, "checks.xid.timeout"),
    ({"checks": {"xid": {"contexts": ["prolog", "tea"]}}}, "checks.xid.contexts[1]"),
    ({"checks": {"xid": {"enabeld": True}}}, "checks.xid.enabeld"),
    ({"thresholds": {"temperature_max_c": "hot"}}, "thresholds.temperature_max_c"),
    ({"thresholds": {"temprature_max_c": 80}}, "thresholds.temprature_max_c"),
    ({"models": [{"match": "", "thresholds": {}}]}, "models[0].match"),
    ({"models": [{"match": "H100", "thresholds": {"allreduce_busbw_min_gbps": -5}}]},
     "models[0].thresholds.allreduce_busbw_min_gbps"),
    ({"clean_runs_to_undrain": 0}, "clean_runs_to_undrain"),
    ({"required_mounts": ["home"]}, "required_mounts[0]"),
    ({"auth": "kerberos"}, "auth"),
], ids=["unknown-top", "negative-deadline", "unknown-context", "unknown-check", "timeout-not-number",
        "context-in-list", "typo-in-check", "threshold-type", "threshold-typo", "empty-match", "negative-floor",
        "zero-clean-runs", "relative-mount", "unknown-auth"])
def test_errors_name_the_key(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(BadInput) as err:
        config.parse(doc, KNOWN)
    assert field in [p.field for p in err.value.problems], err.value


def test_all_problems_reported_at_once() -> None:
    with pytest.raises(BadInput) as err:
        config.parse({"bogus": 1, "thresholds": {"retired_pages_max": -1}, "expected_gpus": "8"}, KNOWN)
    assert {p.field for p in err.value.problems} == {"bogus", "thresholds.retired_pages_max", "expected_gpus"}


@pytest.mark.parametrize(("name", "floor"), [
    ("NVIDIA H100 80GB HBM3", 460.0), ("NVIDIA H200", 430.0), ("NVIDIA A100-SXM4-80GB", 0.0),
], ids=["h100", "h200", "unknown-model"])
def test_builtin_allreduce_floors(name: str, floor: float) -> None:
    assert config.Config().thresholds_for(name).allreduce_busbw_min_gbps == floor


def test_a_model_rule_lays_over_the_file_thresholds() -> None:
    cfg = config.parse({"thresholds": {"temperature_max_c": 85},
                        "models": [{"match": "H200", "thresholds": {"temperature_max_c": 80,
                                                                    "allreduce_busbw_min_gbps": 400}}]}, KNOWN)
    assert cfg.thresholds_for("NVIDIA H200").temperature_max_c == 80
    assert cfg.thresholds_for("NVIDIA H200").allreduce_busbw_min_gbps == 400.0
    assert cfg.thresholds_for("NVIDIA H100 80GB HBM3").temperature_max_c == 85
    assert cfg.thresholds_for("NVIDIA H100 80GB HBM3").allreduce_busbw_min_gbps == 460.0


def test_no_file_means_defaults(tmp_path: Path) -> None:
    cfg = config.load(tmp_path / "absent.yaml", KNOWN)
    assert cfg.deadlines[Context.PROLOG] == config.DEFAULT_DEADLINES[Context.PROLOG]
    assert cfg.thresholds_for("").retired_pages_max == config.RETIRED_PAGES_MAX


def test_a_file_that_is_not_yaml_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "h.yaml"
    path.write_text("checks: [unclosed", encoding="utf-8")
    with pytest.raises(BadInput):
        config.load(path, KNOWN)


@pytest.mark.parametrize(("env", "gpus", "skip"), [
    ({"SLURM_JOB_ID": "5", "SLURM_JOB_GPUS": "0,2-3"}, (0, 2, 3), frozenset()),
    ({"SLURM_JOB_ID": "5", "CUDA_VISIBLE_DEVICES": "1"}, (1,), frozenset()),
    ({"SLURM_JOB_COMMENT": "exp 4 slurmpod:skip=nvlink,xid"}, (), frozenset({"nvlink", "xid"})),
    ({"SLURM_JOB_EXTRA": "slurmpod:skip=clocks"}, (), frozenset({"clocks"})),
    ({"SLURM_JOB_COMMENT": "notslurmpod:skip=xid"}, (), frozenset()),
], ids=["job-gpus", "cuda-visible", "comment", "extra", "tag-must-stand-alone"])
def test_job_from_env(env: dict[str, str], gpus: tuple[int, ...], skip: frozenset[str]) -> None:
    info = job.from_env(env)
    assert (info.gpus, info.skip) == (gpus, skip)


def test_metrics_text_escapes_and_counts() -> None:
    text = metrics.render(Context.EPILOG, (ok("ecc"), fail("xid", "XID 79")), 0.25, 1700000000.0, {"3:79": 2})
    assert 'slurmpod_health_check_status{check="xid",context="epilog"} 2\n' in text
    assert 'slurmpod_health_xid_total{gpu="3",xid="79"} 2\n' in text
    assert "# TYPE slurmpod_health_xid_total counter\n" in text
    assert text.endswith("\n")


def test_metrics_written_atomically_whole(tmp_path: Path) -> None:
    path = metrics.write(tmp_path, Context.PERIODIC, "a 1\n")
    assert path.read_text(encoding="utf-8") == "a 1\n"
    assert [p.name for p in tmp_path.iterdir()] == ["slurmpod_health_periodic.prom"]


def test_xid_catalog_is_generated_from_its_csv() -> None:
    import subprocess
    import sys

    root = paths.REPO
    proc = subprocess.run([sys.executable, str(root / "scripts" / "gen_xid_catalog.py"), "--check"], timeout=60,
                          check=False)
    assert proc.returncode == 0, "prolog_epilog/xid_catalog.py is stale: run scripts/gen_xid_catalog.py"


@pytest.mark.parametrize(("code", "severity"), [(48, "fatal"), (79, "fatal"), (119, "fatal"), (94, "warn"),
                                                (13, "warn"), (9999, "warn")],
                         ids=["48", "79", "119", "94", "13", "unknown"])
def test_xid_classes(code: int, severity: str) -> None:
    from slurmpod.prolog_epilog import xid_catalog

    assert xid_catalog.classify(code).severity.value == severity


@pytest.mark.parametrize("text", ['{"expected_gpus": 8, "auth": "munge"}\n', "expected_gpus: 8\nauth: munge\n",
                                  "{expected_gpus: 8, auth: munge}\n"], ids=["json", "yaml-block", "yaml-flow"])
def test_json_and_yaml_configs_mean_the_same(tmp_path: Path, text: str) -> None:
    path = tmp_path / "health.yaml"
    path.write_text(text, encoding="utf-8")
    cfg = config.load(path, set())
    assert (cfg.expected_gpus, cfg.auth) == (8, "munge")


def test_the_pods_json_config_is_read_without_importing_yaml(tmp_path: Path) -> None:
    """The worker writes JSON; a prolog that imported yaml to read it would pay tens of ms per job."""
    path = tmp_path / "health.yaml"
    path.write_text('{"expected_gpus": 8}\n', encoding="utf-8")
    code = ("import sys; from pathlib import Path; from slurmpod.prolog_epilog import config; "
            f"c = config.load(Path({str(path)!r}), set()); print(c.expected_gpus, 'yaml' in sys.modules)")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["8", "False"], out.stderr


def test_a_full_config_reads_back() -> None:
    cfg = config.parse({"deadline": {"prolog": 10}, "expected_gpus": 8, "clean_runs_to_undrain": 2,
                        "checks": {"xid": {"enabled": False, "skippable": True, "timeout": 3,
                                           "contexts": ["periodic"]}},
                        "thresholds": {"clock_events_fail": True, "temperature_max_c": 80},
                        "models": [{"match": "H200", "thresholds": {"allreduce_busbw_min_gbps": 400}}],
                        "scratch_dir": "/scratch", "required_mounts": ["/home"], "kernel_log": "/k",
                        "auth": "slurm", "real_memory_mib": 1000}, KNOWN)
    assert cfg.deadlines[Context.PROLOG] == 10.0 and cfg.expected_gpus == 8 and cfg.clean_runs_to_undrain == 2
    assert cfg.settings("xid") == config.CheckSettings(False, 3.0, True, frozenset({Context.PERIODIC}))
    assert cfg.thresholds == {"clock_events_fail": True, "temperature_max_c": 80}
    assert cfg.models == (config.ModelRule("H200", {"allreduce_busbw_min_gbps": 400.0}),)
    assert (cfg.scratch_dir, cfg.required_mounts, cfg.kernel_log, cfg.auth, cfg.real_memory_mib) == (
        "/scratch", ("/home",), "/k", "slurm", 1000)


@pytest.mark.parametrize(("doc", "fields"), [
    ({"checks": {"xid": None}}, ["checks.xid"]),
    ({"thresholds": None}, ["thresholds"]),
    ({"models": [{"match": "H100", "thresholds": None}]}, ["models[0].thresholds"]),
    ({"checks": {"xid": {"enabled": "no", "skippable": 1}}}, ["checks.xid.enabled", "checks.xid.skippable"]),
    ({"auth": None}, []),
], ids=["check-null", "thresholds-null", "model-thresholds-null", "check-flags", "auth-null-is-absent"])
def test_null_mappings_are_refused(doc: dict[str, Any], fields: list[str]) -> None:
    if not fields:
        assert config.parse(doc, KNOWN).auth is None
        return
    with pytest.raises(BadInput) as err:
        config.parse(doc, KNOWN)
    assert [p.field for p in err.value.problems] == fields
