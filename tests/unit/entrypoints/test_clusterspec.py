"""The cluster spec (controller ConfigMap): defaults, a full spec, and every problem reported at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import paths
import podkit
import pytest
import yaml

from slurmpod import well_known as wk
from slurmpod.entrypoints import cluster_spec, render
from slurmpod.entrypoints.cluster_spec import ClusterSpec, NodeSetSpec, PartitionSpec
from slurmpod.errors import BadInput


def test_empty_document_gives_defaults() -> None:
    assert cluster_spec.parse({}) == ClusterSpec(
        cluster_name="slurmpod",
        auth="munge",
        select="cons_tres",
        topology_plugin="none",
        max_nodes=1024,
        node_timeout_seconds=300,
        cgroups=False,
        partitions=(PartitionSpec("main", ("workers",), True, 1, "OFF", 0, "INFINITE"),),
        nodesets=(NodeSetSpec("workers", "workers"),),
        extra_lines=(),
    )


def test_contract_example() -> None:
    spec = cluster_spec.parse(yaml.safe_load(podkit.SPEC_BASIC))
    assert spec == cluster_spec.parse({})


def test_full_spec() -> None:
    spec = cluster_spec.parse(yaml.safe_load(podkit.SPEC_PREEMPT))
    assert (spec.cluster_name, spec.topology_plugin, spec.max_nodes, spec.node_timeout_seconds, spec.cgroups) == (
        "gpu-farm",
        "tree",
        512,
        600,
        True,
    )
    assert spec.nodesets == (NodeSetSpec("h100", "h100"), NodeSetSpec("cpu", "cpu-only"))
    assert spec.partitions == (
        PartitionSpec("train", ("h100",), True, 1, "REQUEUE", 120, "7-00:00:00"),
        PartitionSpec("inference", ("h100",), False, 10, "OFF", 0, "60"),
        PartitionSpec("cpu", ("cpu",), False, 1, "OFF", 0, "INFINITE"),
    )
    assert spec.extra_lines == ("# site additions", "SchedulerParameters=bf_continue")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("INFINITE", "INFINITE"),
        ("UNLIMITED", "UNLIMITED"),
        (60, "60"),
        ("1-12", "1-12"),
        ("2:30:00", "2:30:00"),
        ("7-00:00:00", "7-00:00:00"),
    ],
    ids=["infinite", "unlimited", "minutes-int", "days-hours", "h-m-s", "d-h-m-s"],
)
def test_max_time(value: object, expected: str) -> None:
    doc = {"partitions": [{"name": "p", "nodesets": ["workers"], "maxTime": value}]}
    assert cluster_spec.parse(doc).partitions[0].max_time == expected


def test_preempt_mode_case_insensitive_and_nodeset_feature_defaults_to_name() -> None:
    doc = {"nodesets": [{"name": "gpu"}], "partitions": [{"name": "p", "nodesets": ["gpu"], "preemptMode": "requeue"}]}
    spec = cluster_spec.parse(doc)
    assert spec.partitions[0].preempt_mode == "REQUEUE"
    assert spec.nodesets == (NodeSetSpec("gpu", "gpu"),)


def test_every_problem_at_once() -> None:
    doc: dict[str, Any] = {
        "clusterName": "a b",
        "auth": "kerberos",
        "bogus": 1,
        "nodesets": [{"name": "w", "feature": "x&y", "color": "red"}, "not-a-map"],
        "partitions": [
            {"name": "p1", "nodesets": ["nope"], "default": True, "preemptMode": "MAYBE"},
            {"name": "p2", "nodesets": ["w"], "default": "yes", "graceTime": -1},
        ],
        "extraLines": ["ok", "two\nlines", 3],
    }
    with pytest.raises(BadInput) as err:
        cluster_spec.parse(doc)
    fields = [p.field for p in err.value.problems]
    assert fields == [
        "bogus",
        "clusterName",
        "auth",
        "nodesets[0].color",
        "nodesets[0].feature",
        "nodesets[1]",
        "partitions[0].nodesets",
        "partitions[0].preemptMode",
        "partitions[1].nodesets",
        "partitions[1].default",
        "partitions[1].graceTime",
        "extraLines[1]",
        "extraLines[2]",
    ]


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"nodesets": "workers"}, "nodesets"),
        ({"partitions": {"name": "main"}}, "partitions"),
        ({"extraLines": "MaxJobCount=5"}, "extraLines"),
        ({"nodeTimeoutSeconds": 5}, "nodeTimeoutSeconds"),
        ({"select": "cons_res"}, "select"),
        ({"policy": "python"}, "policy"),
        ({"policy": True}, "policy"),
        ({"partitions": [{"name": "p", "nodesets": []}]}, "partitions[0].nodesets"),
        ({"partitions": [{"name": "p", "nodesets": ["workers"], "priorityTier": 65534}]}, "partitions[0].priorityTier"),
    ],
    ids=[
        "nodesets-not-list",
        "partitions-not-list",
        "extra-lines-not-list",
        "node-timeout-too-short",
        "select-removed-plugin",
        "policy-unknown-plugin",
        "policy-boolean",
        "partition-without-nodesets",
        "priority-tier-too-big",
    ],
)
def test_refused(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(BadInput) as err:
        cluster_spec.parse(doc)
    assert field in [p.field for p in err.value.problems]


@pytest.mark.parametrize(
    ("doc", "policy", "line"),
    [({}, "none", None), ({"policy": "none"}, "none", None),
     ({"policy": "slurmpod"}, "slurmpod", "JobSubmitPlugins=slurmpod"),
     ({"policy": "lua"}, "lua", "JobSubmitPlugins=lua")],
    ids=["absent-means-none", "none", "slurmpod", "lua"],
)
def test_policy_selects_the_job_submit_plugin(doc: dict[str, Any], policy: str, line: str | None) -> None:
    spec = cluster_spec.parse(doc)
    assert spec.policy == policy
    lines = [x for x in render.slurm_conf(spec, "ctl-0").splitlines() if x.startswith("JobSubmitPlugins")]
    assert lines == ([line] if line else [])


def _shipped_cluster_configmap() -> dict[str, Any]:
    """The `cluster` ConfigMap of deploy/kubernetes/slurmpod.yaml (the chart's default output)."""
    text = (paths.REPO / "deploy/kubernetes/slurmpod.yaml").read_text(encoding="utf-8")
    (doc,) = [d for d in yaml.safe_load_all(text)
              if d and d["kind"] == "ConfigMap" and d["metadata"]["name"] == "slurmpod-cluster"]
    return doc  # type: ignore[no-any-return]


def test_shipped_spec_turns_the_slurmpod_policy_on() -> None:
    manifest = _shipped_cluster_configmap()
    assert cluster_spec.parse(yaml.safe_load(manifest["data"]["cluster.yaml"])).policy == "slurmpod"


def test_load(tmp_path: Path) -> None:
    f = tmp_path / "cluster.yaml"
    f.write_text(podkit.SPEC_PREEMPT)
    assert cluster_spec.load(f).cluster_name == "gpu-farm"
    f.write_text("")
    assert cluster_spec.load(f) == cluster_spec.parse({})


def test_load_yaml_error_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "cluster.yaml"
    f.write_text("partitions:\n  - {name: [\n")
    with pytest.raises(BadInput) as err:
        cluster_spec.load(f)
    assert "\n" not in str(err.value)
    assert err.value.problems[0].value == str(f)


@pytest.mark.parametrize(
    ("doc", "field", "value"),
    [
        ({"partitions": [{"name": "p", "nodesets": ["workers"]}, {"name": "p", "nodesets": ["workers"]}]},
         "partitions", "p"),
        ({"nodesets": [{"name": "a"}, {"name": "a"}], "partitions": [{"name": "p", "nodesets": ["a"]}]},
         "nodesets", "a"),
        ({"clusterName": None}, "clusterName", "None"),
    ],
    ids=["duplicate-partition", "duplicate-nodeset", "null-cluster-name"],
)
def test_duplicates_and_null_names_refused(doc: dict[str, object], field: str, value: str) -> None:
    with pytest.raises(BadInput) as err:
        cluster_spec.parse(doc)
    assert any(p.field == field and p.value == value for p in err.value.problems), err.value.problems


def test_unquoted_yaml_off_means_preempt_mode_off() -> None:
    spec = cluster_spec.parse(yaml.safe_load("partitions: [{name: p, nodesets: [workers], preemptMode: off}]"))
    assert spec.partitions[0].preempt_mode == "OFF"


def test_hooks_render_prolog_epilog_and_health_check() -> None:
    from slurmpod.entrypoints import render

    spec = cluster_spec.parse(yaml.safe_load(podkit.SPEC_PREEMPT))
    conf = render.slurm_conf(spec, "gpu-farm-controller-0").splitlines()
    for line in ("Prolog=/usr/local/sbin/site-prolog", "Epilog=/usr/local/sbin/site-epilog",
                 "PrologFlags=Alloc,Contain", "HealthCheckProgram=/usr/local/sbin/site-healthcheck",
                 "HealthCheckInterval=300", "HealthCheckNodeState=ANY,CYCLE"):
        assert line in conf


def test_default_hooks_are_slurmpods_checks() -> None:
    from slurmpod.entrypoints import render

    conf = render.slurm_conf(cluster_spec.parse({}), "c-0").splitlines()
    for line in (f"Prolog={wk.PROLOG_BIN}", f"Epilog={wk.EPILOG_BIN}", "PrologFlags=Alloc,NoHold,ForceRequeueOnFail",
                 "PrologEpilogTimeout=60", f"HealthCheckProgram={wk.HEALTHCHECK_BIN}", "HealthCheckInterval=300",
                 "HealthCheckNodeState=ANY", f"PlugStackConfig={wk.PLUGSTACK_CONF}"):
        assert line in conf
    assert not any(line.startswith("TaskProlog=") for line in conf)  # the task environment is the SPANK plugin
    assert f"PrEpPlugins={wk.PREP_PLUGIN}" in conf  # slurmd asks the agent in-process


@pytest.mark.parametrize("hooks", [{"prolog": "/usr/local/sbin/site-prolog"}, {"epilog": None}, {"prolog": None}],
                         ids=["the-sites-prolog", "no-epilog", "no-prolog"])
def test_the_prep_plugin_only_where_both_hooks_are_slurmpods(hooks: dict[str, str | None]) -> None:
    """It runs slurmpod's Prolog and Epilog whatever slurm.conf names: a site's own hook, or a hook turned
    off, leaves Slurm's script plugin in charge."""
    from slurmpod.entrypoints import render

    conf = render.slurm_conf(cluster_spec.parse({"hooks": hooks}), "c-0")
    assert "PrEpPlugins" not in conf


@pytest.mark.parametrize(
    ("hooks", "extra", "line"),
    [
        (None, [], "SchedulerParameters=nohold_on_prolog_fail"),
        (None, ["SchedulerParameters=bf_continue,nohold_on_prolog_fail"],
         "SchedulerParameters=nohold_on_prolog_fail,bf_continue"),
        ({"prolog": None}, ["SchedulerParameters=bf_continue"], "SchedulerParameters=bf_continue"),
    ],
    ids=["default", "merged-with-extra-lines", "no-prolog-no-nohold"],
)
def test_a_failed_prolog_requeues_without_hold(hooks: dict[str, Any] | None, extra: list[str], line: str) -> None:
    from slurmpod.entrypoints import render

    doc: dict[str, Any] = {"extraLines": extra} | ({"hooks": hooks} if hooks is not None else {})
    conf = render.slurm_conf(cluster_spec.parse(doc), "c-0").splitlines()
    assert [x for x in conf if x.startswith("SchedulerParameters")] == [line]


def test_shipped_configmap_spells_out_the_defaults() -> None:
    """The shipped cluster ConfigMap names every hook; it must say what the defaults are."""
    doc = _shipped_cluster_configmap()
    spec = yaml.safe_load(doc["data"]["cluster.yaml"])
    assert cluster_spec.parse(spec).hooks == cluster_spec.DEFAULT_HOOKS
    assert cluster_spec.parse({k: v for k, v in spec.items() if k != "hooks"}).hooks == cluster_spec.DEFAULT_HOOKS


def test_null_hooks_no_lines() -> None:
    from slurmpod.entrypoints import render

    off = {"prolog": None, "epilog": None, "prologFlags": None, "healthCheckProgram": None,
           "healthCheckNodeState": None, "prologEpilogTimeout": None, "taskProlog": None}
    conf = render.slurm_conf(cluster_spec.parse({"hooks": off}), "c-0")
    assert not any(k in conf for k in ("Prolog", "Epilog", "HealthCheck"))


def test_a_hook_left_out_keeps_its_default() -> None:
    hooks = cluster_spec.parse({"hooks": {"healthCheckInterval": 10}}).hooks
    assert hooks.health_check_interval == 10
    assert hooks.prolog == wk.PROLOG_BIN and hooks.health_check_program == wk.HEALTHCHECK_BIN


@pytest.mark.parametrize(
    ("hooks", "field"),
    [
        ({"prolog": "relative/prolog"}, "hooks.prolog"),
        ({"epilog": "/bin/epilog\nSlurmUser=root"}, "hooks.epilog"),
        ({"prologFlags": ["Alloc", "Bogus"]}, "hooks.prologFlags[1]"),
        ({"prologFlags": ["Alloc", "NoHold", "Contain"]}, "hooks.prologFlags"),
        ({"prologFlags": ["NoHold", "X11"]}, "hooks.prologFlags"),
        ({"healthCheckProgram": None, "healthCheckInterval": 60}, "hooks.healthCheckInterval"),
        ({"prologEpilogTimeout": 70_000}, "hooks.prologEpilogTimeout"),
        ({"healthCheckProgram": "/bin/hc", "healthCheckNodeState": ["IDLE", "SOMETIMES"]},
         "hooks.healthCheckNodeState[1]"),
        ({"prolog": "/bin/p", "postlog": "/bin/x"}, "hooks.postlog"),
    ],
    ids=["relative-path", "newline-injection", "unknown-flag", "nohold-with-contain", "nohold-with-x11",
         "interval-without-program", "timeout-too-long",
         "unknown-state",
         "unknown-key"],
)
def test_bad_hooks_name_the_field(hooks: dict[str, object], field: str) -> None:
    with pytest.raises(BadInput) as err:
        cluster_spec.parse({"hooks": hooks})
    assert field in [p.field for p in err.value.problems], err.value.problems


@pytest.mark.parametrize(
    ("doc", "plugins", "line"),
    [
        ({}, frozenset({"pmix", "pmix_v5", "pmi2", "cray_shasta"}), "MpiDefault=pmix"),
        ({}, frozenset({"pmi2", "cray_shasta"}), "MpiDefault=none"),
        ({"mpiDefault": "none"}, frozenset({"pmix"}), "MpiDefault=none"),
        ({"mpiDefault": "pmi2"}, frozenset({"pmi2"}), "MpiDefault=pmi2"),
    ],
    ids=["pmix-where-slurm-has-it", "none-without-pmix", "spec-turns-it-off", "spec-names-pmi2"],
)
def test_mpi_default_follows_the_spec_and_the_plugins(doc: dict[str, Any], plugins: frozenset[str], line: str) -> None:
    from slurmpod.entrypoints import render

    conf = render.slurm_conf(cluster_spec.parse(doc), "c-0", mpi_plugins=plugins).splitlines()
    assert [x for x in conf if x.startswith("MpiDefault")] == [line]


def test_mpi_default_the_slurm_lacks_is_bad_input() -> None:
    from slurmpod.entrypoints import render

    with pytest.raises(BadInput) as err:
        render.slurm_conf(cluster_spec.parse({"mpiDefault": "pmix"}), "c-0", mpi_plugins=frozenset({"pmi2"}))
    assert err.value.problems[0].field == "mpiDefault" and "mpi_pmix.so" in err.value.problems[0].reason


def test_srun_port_range_is_rendered() -> None:
    from slurmpod.entrypoints import render

    default = render.slurm_conf(cluster_spec.parse({}), "c-0").splitlines()
    assert f"SrunPortRange={wk.DEFAULT_SRUN_PORT_RANGE}" in default
    conf = render.slurm_conf(cluster_spec.parse({"srunPortRange": "40000-40999"}), "c-0").splitlines()
    assert "SrunPortRange=40000-40999" in conf


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"mpiDefault": "openmpi"}, "mpiDefault"),
        ({"mpiDefault": "pmix\nSlurmUser=root"}, "mpiDefault"),
        ({"srunPortRange": "63000-60001"}, "srunPortRange"),
        ({"srunPortRange": "80-90"}, "srunPortRange"),
        ({"srunPortRange": "60001-63000\nSlurmUser=root"}, "srunPortRange"),
        ({"hooks": {"taskProlog": "relative/prog"}}, "hooks.taskProlog"),
        ({"hooks": {"taskProlog": "/bin/x\nSlurmUser=root"}}, "hooks.taskProlog"),
    ],
    ids=["unknown-mpi", "mpi-newline", "ports-reversed", "ports-privileged", "ports-newline", "task-prolog-relative",
         "task-prolog-newline"],
)
def test_mpi_ports_and_task_prolog_are_validated(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(BadInput) as err:
        cluster_spec.parse(doc)
    assert [pr.field for pr in err.value.problems] == [field]


@pytest.mark.parametrize(
    ("doc", "flags"),
    [
        ({}, wk.DEFAULT_PROLOG_FLAGS),
        # slurmctld refuses NoHold beside Contain
        ({"cgroups": True}, (*(f for f in wk.DEFAULT_PROLOG_FLAGS if f != "NoHold"), "Contain")),
        ({"cgroups": True, "hooks": {"prologFlags": ["Alloc", "Contain"]}}, ("Alloc", "Contain")),
        ({"cgroups": True, "hooks": {"prologFlags": None}}, ("Contain",)),
        ({"cgroups": False, "hooks": {"prologFlags": None}}, ()),
    ],
    ids=["default", "cgroups-adds-contain-drops-nohold", "contain-once", "cgroups-without-hooks", "neither"],
)
def test_prolog_flags_gain_contain_with_cgroups(doc: dict[str, Any], flags: tuple[str, ...]) -> None:
    """pam_slurm_adopt needs the extern step, which PrologFlags=Contain makes; the hooks' flags stay."""
    spec = cluster_spec.parse(doc)
    assert render.prolog_flags(spec) == flags
    lines = [x for x in render.slurm_conf(spec, "ctl-0").splitlines() if x.startswith("PrologFlags=")]
    assert lines == ([f"PrologFlags={','.join(flags)}"] if flags else [])
