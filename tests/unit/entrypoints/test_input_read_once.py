"""Pod start reads its input once: after ``load``, a changed environment or downward-API file changes
nothing downstream (the plan, the rendered files, the programs' environment, the daemons' settings)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import podkit
import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmpod import kubelet_format, podinfo
from slurmpod import well_known as wk
from slurmpod.entrypoints import render, start
from slurmpod.errors import BadInput

try:  # supervisord's own parser, where the test extra installed it
    from supervisor.datatypes import dict_of_key_value_pairs
except ImportError:  # pragma: no cover
    dict_of_key_value_pairs = None


def _everything(p: start.StartPlan) -> tuple[object, ...]:
    return (p.node, p.files, p.dirs, [(k.key.source, k.dest, k.user) for k in p.keys], p.programs,
            p.supervisord_conf)


def _change_the_pod(pod: podkit.Pod, env: dict[str, str]) -> None:
    env.update({wk.ENV_POD_NAME: "other-0", wk.ENV_NODE_NAME: "elsewhere", wk.ENV_POD_NAMESPACE: "other",
                wk.ENV_NODESET: "gpus", wk.ENV_CONTROLLER: "ctl-9", wk.ENV_CPU_LIMIT: "1000",
                wk.ENV_SCRATCH_BASE: "/other"})
    podkit.write_podinfo(pod.podinfo, {wk.LABEL_ROLE: "login", wk.LABEL_TOPOLOGY: "b9/h9"},
                         {wk.ANNOTATION_FEATURES: "changed", wk.ANNOTATION_WEIGHT: "9"})


@pytest.mark.parametrize("role", ["worker", "controller", "login"])
def test_a_change_after_load_reaches_nothing_downstream(tmp_path: Path, role: str) -> None:
    pod = podkit.make_pod(tmp_path, role)
    env = pod.env(role)
    env[wk.ENV_NODE_NAME] = "k8s-node-1"
    before = podkit.plan(role, dict(env))
    inp = start.load(role, env, start.Settings.from_env(env))
    _change_the_pod(pod, env)
    after = start.plan(inp, start.Adapters())
    assert _everything(after) == _everything(before)
    assert after.pod == before.pod and after.pod.labels == before.pod.labels
    # ... and the change was real: loading again sees it.
    assert podkit.plan(role, env).supervisord_conf != before.supervisord_conf


def test_the_input_is_frozen(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path, "worker")
    inp = start.load("worker", pod.env("worker"), start.Settings.from_env(pod.env("worker")))
    with pytest.raises(dataclasses.FrozenInstanceError):
        inp.pod.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        inp.pod.labels["x"] = "y"  # type: ignore[index]


def test_the_daemons_settings_do_not_follow_the_env(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path, "worker")
    env = pod.env("worker")
    me = podinfo.identity(env)
    _change_the_pod(pod, env)
    assert (me.name, me.namespace, me.role) == (podkit.POD, "default", "worker")
    assert podinfo.identity(env).role == "login"


def test_the_programs_get_the_pod_from_supervisord_conf(tmp_path: Path) -> None:
    pod = podkit.make_pod(tmp_path, "worker")
    conf = podkit.plan("worker", pod.env("worker")).supervisord_conf
    (line,) = [x for x in conf.splitlines() if x.startswith("environment=")]
    assert line == (f'environment={wk.ENV_POD_NAME}="{podkit.POD}",{wk.ENV_POD_NAMESPACE}="default",'
                    f'{wk.ENV_CONTROLLER}="{podkit.CONTROLLER}",{wk.ENV_AUTH}="munge"')
    assert conf.index(line) < conf.index("[unix_http_server]")  # the [supervisord] section: every program


@pytest.mark.parametrize("value", ['a"b', "a'b", "50%", "a\nb=c", "a ;b", "a #b", "é", "a\x00"],
                         ids=["dquote", "squote", "percent", "newline", "semicolon", "hash", "non-ascii", "nul"])
def test_what_supervisord_cannot_carry_is_refused(value: str) -> None:
    with pytest.raises(BadInput, match="supervisord"):
        render.environment_value([(wk.ENV_POD_NAME, value)])


def test_a_bad_key_is_refused() -> None:
    with pytest.raises(BadInput):
        render.environment_value([("A=B", "x")])


_CARRIED = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E, exclude_characters="\"'%;#"), max_size=40)


@pytest.mark.skipif(dict_of_key_value_pairs is None, reason="supervisor not installed")
@given(values=st.lists(_CARRIED, min_size=1, max_size=4))
def test_supervisords_parser_reads_back_exactly_the_pairs(values: list[str]) -> None:
    """The rendered line, through the INI parser's comment rule and supervisord's own pair parser."""
    pairs = [(f"K{i}", v) for i, v in enumerate(values)]
    line = render.environment_value(pairs)
    assert kubelet_format is not None
    assert dict_of_key_value_pairs(line) == dict(pairs)
