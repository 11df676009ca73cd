"""The worker: slurmd registering this pod as a dynamic node, with sshd and reconcile-node beside it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from slurmpod import hardware, mounttable
from slurmpod import well_known as wk
from slurmpod.entrypoints import health_config, nodespec, programs, render, slinky
from slurmpod.entrypoints.startplan import Common, OutDir, OutFile, RolePlan, homes
from slurmpod.prolog_epilog import task_env

if TYPE_CHECKING:
    from slurmpod.entrypoints.inputs import Adapters, StartInput

# Seconds reconcile-node waits before its first look (slurmd registers in about 1 s).
RECONCILE_DELAY_S = 3


def build(inp: StartInput, c: Common, adapters: Adapters) -> RolePlan:
    """The node from the pod and a probe of the container; ``inp.operator``: slurmd args a Slinky
    operator started the pod with, merged into the node."""
    root = inp.settings.hw_root
    assert inp.slurm_version is not None and inp.task_env is not None  # read for a node role
    hw = hardware.probe(root, adapters.gpus())
    node = nodespec.build(c.pod, hw, inp.slurm_version, inp.nodeset)
    if inp.operator is not None:
        node = slinky.merge(node, inp.operator)
    node_conf = node.conf_string()
    files = [OutFile(f"{wk.SLURM_ETC}/gres.conf", node.gres_conf())] if node.gpus else []
    try:
        mounted = mounttable.mount_points((root / "proc/self/mounts").read_text(encoding="utf-8"))
    except OSError:
        mounted = frozenset()
    facts = health_config.NodeFacts(len(node.gpus), c.auth, node.real_memory_mib, health_config.required(mounted))
    files.append(OutFile(wk.HEALTH_CONFIG, health_config.render(facts)))
    files.append(OutFile(wk.UCX_CONF, render.ucx_conf(hw.rdma_devices)))
    # What slurmpod's SPANK plugin sets in each task (prolog_epilog/task_env.py); its scratch base is sticky.
    try:
        routes = (root / "proc/net/route").read_text(encoding="utf-8")
    except OSError:
        routes = ""
    tenv = task_env.from_pod(inp.task_env, c.pod.node_name, routes, node.placement)
    files.append(OutFile(wk.TASK_ENV_FILE, task_env.render(tenv)))
    exports, scratch_line = task_env.render_for_script(tenv)
    files.append(OutFile(wk.TASK_PROLOG_EXPORTS, exports))
    if scratch_line is not None:
        files.append(OutFile(wk.TASK_PROLOG_SCRATCH, scratch_line))
    files.append(OutFile(wk.PLUGSTACK_CONF, render.plugstack_conf()))
    scratch = (OutDir(tenv.scratch_base, 0, 0, 0o1777),) if tenv.scratch_base else ()
    # The health agent first (supervisord's priority order), so the hooks usually find it; until its
    # socket is there they run the checks themselves.
    agent = [programs.health_agent(inp.health_agent_metrics_port)] if inp.health_agent else []
    progs = [
        *agent,
        programs.slurmd(c.auth, c.pod.controller, node_conf, node.extra, c.directory, claim=inp.claim_placeholder),
        programs.sshd(c.directory),
        # One-shot, restarted by supervisord if it fails: it waits for the controller however long.
        # It starts once slurmd has had time to register, so its Python start and polls do not compete
        # with slurmd for the CPU on the path to IDLE.
        programs.slurmpod_task("reconcile-node", ["daemon", "reconcile-node", "--expect", node_conf],
                               restart="unexpected", delay_s=RECONCILE_DELAY_S),
    ]
    dirs = (OutDir(wk.SLURMD_SPOOL, 0, 0, 0o755), *scratch, *homes())
    return RolePlan(node, tuple(files), dirs, tuple(progs))
