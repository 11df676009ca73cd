"""No label, annotation or env value can add a line or a key to anything a pod renders.

For arbitrary text in the features and weight annotations, the nodeset and topology labels/env, POD_NAME,
SLURMPOD_CONTROLLER and the cluster spec's names, the pod-start plan either refuses the input (BadInput,
the exit-2 path) or renders files whose lines and keys are exactly those of the same plan made from
benign values: the `slurmd --conf` string, the static node line, gres.conf, slurm.conf, supervisord.conf
and every run script.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from collections.abc import Mapping
from pathlib import Path

import podkit
import pytest
import yaml
from hypothesis import event, given, settings
from hypothesis import strategies as st

from slurmpod import podinfo
from slurmpod import well_known as wk
from slurmpod.entrypoints import nodespec, start
from slurmpod.errors import BadInput
from slurmpod.hardware import Gpu, Hardware
from slurmpod.slurm_version import SlurmVersion

SETTINGS = settings(max_examples=200, deadline=None)

FRAGMENTS = st.sampled_from(
    [
        "gpu",
        "h100",
        "a_b",
        "x.y",
        "blk",
        "-",
        "7",
        "",
        " ",
        "\t",
        "\n",
        "\r\n",
        "\r",
        "=",
        "#",
        ",",
        ":",
        '"',
        "'",
        "\\",
        "$(id)",
        "`id`",
        ";",
        "&",
        "|",
        "%(here)s",
        "[",
        "]",
        "\x00",
        "\x0b",
        "\x0c",
        "\x85",
        "\u2028",
        "\u00a0",
        "Features=evil",
        " NodeName=x",
        "\nPartitionName=p",
        "é",
    ]
)
FEATURE = st.from_regex(r"\A[A-Za-z0-9_][A-Za-z0-9_.-]{0,12}\Z")
NAME = FEATURE
DNS_LABEL = st.from_regex(r"\A[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?\Z")
HOST = st.one_of(DNS_LABEL, st.tuples(DNS_LABEL, st.integers(1, 65535)).map(lambda t: f"{t[0]}:{t[1]}"))
# Hostile text: anything at all, fragments that mean something to Slurm, shells or INI files, and
# valid values with one such fragment spliced in (the near misses a validator most easily lets through).
TEXT = st.one_of(
    st.text(max_size=24),
    st.lists(FRAGMENTS, max_size=6).map("".join),
    st.tuples(FEATURE, FRAGMENTS, FEATURE).map("".join),
)

# Every key the --conf string may carry. Ref: https://slurm.schedmd.com/slurm.conf.html#SECTION_NODE-CONFIGURATION
CONF_KEYS = {
    "CPUs",
    "Boards",
    "SocketsPerBoard",
    "CoresPerSocket",
    "ThreadsPerCore",
    "RealMemory",
    "CoreSpecCount",
    "MemSpecLimit",
    "Gres",
    "Features",
    "Weight",
    "Topology",
}
SHAPE_KEYS = ["CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory"]


def parse_conf(conf: str) -> dict[str, str]:
    """Split a Key=Value line; every token must hold exactly one '=' and keys may not repeat."""
    assert conf == conf.strip() and len(conf.splitlines()) == 1
    tokens = conf.split()
    assert " ".join(tokens) == conf, "whitespace other than single spaces"
    pairs = [t.split("=") for t in tokens]
    assert all(len(p) == 2 and p[0] for p in pairs), conf
    keys = [p[0] for p in pairs]
    assert len(set(keys)) == len(keys), conf
    return dict((k, v) for k, v in pairs)


def shape(text: str) -> list[tuple[str, ...]]:
    """Per line: comment lines verbatim, others the sequence of keys (text before each token's '=')."""
    out: list[tuple[str, ...]] = []
    for line in text.split("\n"):
        if line.startswith(("#", ";", "[")) or not line.strip():
            out.append((line,))
        else:
            out.append(tuple(tok.split("=", 1)[0] for tok in line.split()))
    return out


def same_script_shape(script: str, base: str) -> None:
    """Same lines as the benign run script; the lines that name the controller (the final exec line, and
    the claim-placeholder line before it) have the same number of shell words."""
    lines, base_lines = script.splitlines(), base.splitlines()
    assert len(lines) == len(base_lines)
    for i, (line, benign) in enumerate(zip(lines, base_lines, strict=True)):
        if i == len(lines) - 1 or benign.startswith("SLURM_CONF_SERVER="):
            assert len(shlex.split(line)) == len(shlex.split(benign)), (line, benign)
            assert line.startswith("SLURM_CONF_SERVER=") == benign.startswith("SLURM_CONF_SERVER=")
        else:
            assert line == benign


def same_supervisord_conf(conf: str, base: str, **pod: str) -> None:
    """The benign supervisord.conf, but for the programs' environment, which holds the pod's own values
    (``pod``: POD_NAME=..., SLURMPOD_CONTROLLER=...) as whole KEY="value" pairs and nothing else."""
    lines, base_lines = conf.splitlines(), base.splitlines()
    env = [i for i, line in enumerate(lines) if line.startswith("environment=")]
    assert env == [i for i, line in enumerate(base_lines) if line.startswith("environment=")] and len(env) == 1
    assert lines[:env[0]] + lines[env[0] + 1:] == base_lines[:env[0]] + base_lines[env[0] + 1:]
    pairs = dict(re.findall(r'([A-Z_]+)="([^"]*)"', lines[env[0]]))
    base_pairs = dict(re.findall(r'([A-Z_]+)="([^"]*)"', base_lines[env[0]]))
    assert lines[env[0]] == "environment=" + ",".join(f'{k}="{v}"' for k, v in pairs.items())
    assert pairs.keys() == base_pairs.keys() and pod.items() <= pairs.items()


def _refusal_names_fields(exc: BadInput) -> None:
    event("refused")  # `pytest --hypothesis-show-statistics` shows how often each path is taken
    assert exc.problems
    for problem in exc.problems:
        assert problem.field and problem.reason
        assert "\n" not in str(problem)  # one line each, whatever the value held


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> tuple[podkit.Pod, start.StartPlan]:
    pod = podkit.make_pod(tmp_path_factory.mktemp("worker"), "worker")
    # With the claim: its line names the controller too.
    env = pod.env("worker", SLURMPOD_SLURM_VERSION="25.05", SLURMPOD_CLAIM_PLACEHOLDER="true")
    return pod, podkit.plan("worker", env)


WORKER_VALID = {
    "features": st.lists(FEATURE, max_size=4).map(" , ".join),
    "weight": st.one_of(st.none(), st.integers(1, nodespec.MAX_WEIGHT).map(lambda n: f" {n} ")),
    "nodeset": FEATURE,
    "topology": st.one_of(st.none(), st.just(""), st.just("  "), NAME, st.tuples(NAME, NAME).map(":".join),
                          st.lists(NAME, min_size=2, max_size=3).map("/".join)),
    "pod_name": DNS_LABEL,
    "controller": HOST,
}


def _one_hostile(valid: Mapping[str, st.SearchStrategy[str | None]]) -> st.SearchStrategy[dict[str, str | None]]:
    """Every field valid but (usually) one, which gets arbitrary text: so both outcomes are common."""

    def build(hostile: str | None) -> st.SearchStrategy[dict[str, str | None]]:
        return st.fixed_dictionaries({k: TEXT if k == hostile else v for k, v in valid.items()})

    return st.sampled_from([None, *valid]).flatmap(build)


@SETTINGS
@given(values=_one_hostile(WORKER_VALID))
def test_worker_inputs_cannot_add_lines_or_keys(
    worker: tuple[podkit.Pod, start.StartPlan], values: dict[str, str | None]
) -> None:
    features, weight, nodeset = values["features"] or "", values["weight"], values["nodeset"] or ""
    topology, pod_name, controller = values["topology"], values["pod_name"] or "", values["controller"] or ""
    pod, base = worker
    annotations = {wk.ANNOTATION_FEATURES: features}
    if weight is not None:
        annotations[wk.ANNOTATION_WEIGHT] = weight
    podkit.write_podinfo(pod.podinfo, podkit.worker_labels(nodeset), annotations)
    env = pod.env(
        "worker",
        SLURMPOD_SLURM_VERSION="25.05",
        SLINKY_TOPOLOGY=topology,
        POD_NAME=pod_name,
        SLURMPOD_CONTROLLER=controller,
        SLURMPOD_CLAIM_PLACEHOLDER="true",
    )
    try:
        plan = podkit.plan("worker", env)
    except BadInput as exc:
        _refusal_names_fields(exc)
        return
    event("accepted")
    assert plan.node is not None

    conf = parse_conf(plan.node.conf_string())
    assert set(conf) <= CONF_KEYS
    expected_features = list(dict.fromkeys([nodeset, *(f.strip() for f in features.split(",") if f.strip())]))
    assert conf["Features"].split(",") == expected_features
    if weight is None:
        assert "Weight" not in conf
    else:
        assert conf["Weight"] == str(int(weight.strip()))
    unit = (topology or "").strip()
    if unit:
        parts = unit.split("/")  # the path form: the innermost unit, before the host
        assert conf["Topology"] == (unit if ":" in unit else f"default:{parts[-2] if len(parts) > 1 else unit}")
    else:
        assert "Topology" not in conf
    assert set(conf) == set(SHAPE_KEYS) | {"Features"} | ({"Weight"} if weight is not None else set()) | (
        {"Topology"} if unit else set()
    ) | ({"Gres"} if plan.node.gpus else set())

    static = parse_conf(plan.node.node_line())
    assert static == {"NodeName": pod_name, **conf, "State": "UNKNOWN"}
    for f in plan.files:  # gres.conf where the host has GPUs: one line per GPU
        if f.path.endswith("/gres.conf"):
            assert len(f.content.splitlines()) == len(plan.node.gpus)

    same_supervisord_conf(plan.supervisord_conf, base.supervisord_conf, POD_NAME=pod_name,
                          SLURMPOD_CONTROLLER=controller)
    for prog, base_prog in zip(plan.programs, base.programs, strict=True):
        assert prog.name == base_prog.name
        if prog.name != "slurmd" or not unit:  # a placement adds `--extra JSON`: two more words
            same_script_shape(prog.script, base_prog.script)
    slurmd = next(p for p in plan.programs if p.name == "slurmd")
    argv = shlex.split(slurmd.script.splitlines()[-1])
    tail = ["--conf", plan.node.conf_string(), *(["--extra", plan.node.extra or ""] if unit else [])]
    assert argv[:5] == ["exec", "/usr/sbin/slurmd", "-D", "-Z", "--conf-server"]
    assert argv[6:] == tail
    if unit:
        assert json.loads(plan.node.extra or "") == {wk.EXTRA_TOPOLOGY_KEY: unit}


@pytest.fixture(scope="module")
def login(tmp_path_factory: pytest.TempPathFactory) -> tuple[podkit.Pod, start.StartPlan]:
    pod = podkit.make_pod(tmp_path_factory.mktemp("login"), "login")
    env = pod.env("login")
    return pod, podkit.plan("login", env)


@SETTINGS
@given(values=_one_hostile({"pod_name": DNS_LABEL, "controller": HOST, "cluster": NAME}))
def test_login_inputs_cannot_add_lines(
    login: tuple[podkit.Pod, start.StartPlan], values: dict[str, str | None]
) -> None:
    pod, base = login
    pod_name, controller, cluster = values["pod_name"] or "", values["controller"] or "", values["cluster"] or ""
    env = pod.env("login", POD_NAME=pod_name, SLURMPOD_CONTROLLER=controller, SLURMPOD_CLUSTER_NAME=cluster)
    try:
        plan = podkit.plan("login", env)
    except BadInput as exc:
        _refusal_names_fields(exc)
        return
    event("accepted")
    same_supervisord_conf(plan.supervisord_conf, base.supervisord_conf, POD_NAME=pod_name,
                          SLURMPOD_CONTROLLER=controller)
    for prog, base_prog in zip(plan.programs, base.programs, strict=True):
        same_script_shape(prog.script, base_prog.script)
    sackd = next(p for p in plan.programs if p.name == "sackd")
    argv = shlex.split(sackd.script.splitlines()[-1])
    assert argv[:-1] == ["exec", "/usr/sbin/sackd", "-D", "--conf-server"]
    assert argv[-1] in (controller, f"{controller}:{wk.SLURMCTLD_PORT}")


@pytest.fixture(scope="module")
def controller_pod(tmp_path_factory: pytest.TempPathFactory) -> podkit.Pod:
    return podkit.make_pod(tmp_path_factory.mktemp("controller"), "controller")


def _spec(*, cluster: str, partition: str, nodeset: str, feature: str, max_time: str, preempt: str) -> str:
    doc = {
        "clusterName": cluster,
        "nodesets": [{"name": nodeset, "feature": feature}],
        "partitions": [
            {"name": partition, "nodesets": [nodeset], "default": True, "maxTime": max_time, "preemptMode": preempt}
        ],
    }
    return yaml.safe_dump(doc, allow_unicode=True)


SPEC_VALID = {
    "cluster": NAME,
    "partition": NAME,
    "nodeset": NAME,
    "feature": FEATURE,
    "max_time": st.sampled_from(["INFINITE", "UNLIMITED", "60", "1-00:00:00", "2:30"]),
    "preempt": st.sampled_from(["OFF", "requeue", "CANCEL", "suspend", "GANG"]),
    "pod_name": DNS_LABEL,
}


@SETTINGS
@given(values=_one_hostile(SPEC_VALID))
def test_cluster_spec_names_cannot_add_lines_or_keys(controller_pod: podkit.Pod, values: dict[str, str | None]) -> None:
    cluster, partition, nodeset, feature, max_time, preempt, pod_name = (values[k] or "" for k in SPEC_VALID)
    pod = controller_pod
    pod.spec.write_text(
        _spec(
            cluster=cluster, partition=partition, nodeset=nodeset, feature=feature, max_time=max_time, preempt=preempt
        ),
        encoding="utf-8",
    )
    env = pod.env("controller", POD_NAME=pod_name)
    try:
        plan = podkit.plan("controller", env)
    except BadInput as exc:
        _refusal_names_fields(exc)
        return
    event("accepted")
    slurm_conf = next(f.content for f in plan.files if f.path == wk.SLURM_CONF)
    mode = "OFF" if "PreemptMode=OFF " in slurm_conf.split("PartitionName=", 1)[1] else "REQUEUE"
    assert preempt.upper() == parse_conf(slurm_conf.split("\n")[-2])["PreemptMode"]
    pod.spec.write_text(
        _spec(cluster="c", partition="p", nodeset="n", feature="f", max_time="INFINITE", preempt=mode), encoding="utf-8"
    )
    base = podkit.plan("controller", pod.env("controller"))
    base_conf = next(f.content for f in base.files if f.path == wk.SLURM_CONF)
    assert shape(slurm_conf) == shape(base_conf)
    lines = dict(
        line.split("=", 1) for line in slurm_conf.splitlines() if line and not line.startswith("#") and " " not in line
    )
    assert (lines["ClusterName"], lines["SlurmctldHost"]) == (cluster, pod_name)
    part = next(line for line in slurm_conf.splitlines() if line.startswith("PartitionName="))
    assert parse_conf(part)["PartitionName"] == partition
    assert parse_conf(part)["Nodes"] == nodeset
    same_supervisord_conf(plan.supervisord_conf, base.supervisord_conf, POD_NAME=pod_name)
    for prog, base_prog in zip(plan.programs, base.programs, strict=True):
        same_script_shape(prog.script, base_prog.script)


GPUS = (Gpu(0, 0, "GPU-a", "H100", (0, 1)), Gpu(1, 1, "GPU-b", "H100", (2, 3)))
GPU_HOST = Hardware(
    cpus=4,
    sockets=1,
    cores_per_socket=4,
    threads_per_core=1,
    allowed_cpus=(0, 1, 2, 3),
    cgroup_cpu_millis=None,
    memory_mib=4096,
    cgroup_memory_mib=None,
    gpus=GPUS,
)


@SETTINGS
@given(
    values=_one_hostile(
        {"pod_name": DNS_LABEL, "features": WORKER_VALID["features"], "topology": WORKER_VALID["topology"]}
    )
)
def test_gres_conf_lines_fixed(tmp_path_factory: pytest.TempPathFactory, values: dict[str, str | None]) -> None:
    pod_name, features, topology = values["pod_name"] or "", values["features"] or "", values["topology"] or ""
    empty = tmp_path_factory.getbasetemp() / "no-podinfo-files"
    empty.mkdir(exist_ok=True)
    env = {wk.ENV_POD_NAME: pod_name, wk.ENV_CONTROLLER: "ctl", wk.ENV_SLINKY_TOPOLOGY: topology}
    try:
        pod = podinfo.load(env, empty)
        pod = dataclasses.replace(pod, annotations={wk.ANNOTATION_FEATURES: features})
        node = nodespec.build(pod, GPU_HOST, SlurmVersion(26, 5))
    except BadInput as exc:
        _refusal_names_fields(exc)
        return
    event("accepted")
    lines = node.gres_conf().splitlines()
    assert len(lines) == len(GPUS)
    for gpu, line in zip(GPUS, lines, strict=True):
        assert parse_conf(line) == {
            "NodeName": pod_name,
            "Name": "gpu",
            "File": f"/dev/nvidia{gpu.minor}",
            "Cores": f"{gpu.cpu_affinity[0]}-{gpu.cpu_affinity[-1]}",
        }
    assert parse_conf(node.conf_string())["Gres"] == "gpu:2"


def test_strategies_reach_both_outcomes(tmp_path: Path) -> None:
    """Guard against a vacuous property: benign and hostile values take the two different paths."""
    pod = podkit.make_pod(tmp_path)
    good = pod.env(SLURMPOD_SLURM_VERSION="25.05", SLINKY_TOPOLOGY="tree:s1")
    plan = podkit.plan("worker", good)
    assert plan.node is not None and "Topology=tree:s1" in plan.node.conf_string()
    bad = pod.env(SLURMPOD_SLURM_VERSION="25.05", SLINKY_TOPOLOGY="tree:s1\nNodeName=x")
    with pytest.raises(BadInput):
        podkit.plan("worker", bad)
