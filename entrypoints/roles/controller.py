"""The controller: slurmctld with slurm.conf from the cluster spec, and the daemons beside it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from slurmpod import slurm_version
from slurmpod import well_known as wk
from slurmpod.entrypoints import programs, render
from slurmpod.entrypoints.startplan import Common, OutDir, OutFile, RolePlan, jwt_key
from slurmpod.errors import TransientError

if TYPE_CHECKING:
    from slurmpod.entrypoints.inputs import Adapters, StartInput

log = logging.getLogger(__name__)


def build(inp: StartInput, c: Common, adapters: Adapters) -> RolePlan:
    spec = inp.spec
    assert spec is not None  # the registry has the controller read it
    part = plan(c, inp, topology_files(inp, adapters), slurm_version.mpi_plugins(inp.settings.hw_root))
    keys = jwt_key(inp.settings.jwt_key, needed=spec.restapi.enabled)
    return RolePlan(part.node, part.files, part.dirs, part.programs, keys)


def plan(c: Common, inp: StartInput, extra_files: tuple[OutFile, ...] = (),
         mpi_plugins: frozenset[str] = frozenset()) -> RolePlan:
    """``mpi_plugins``: the image's MPI plugin types (MpiDefault follows them unless the spec names one)."""
    spec, accounting = inp.spec, inp.accounting_host
    assert spec is not None
    files = [OutFile(wk.SLURM_CONF, render.slurm_conf(spec, c.pod.name, accounting, mpi_plugins,
                                                            inp.slurm_version)), *extra_files,
             # Debian's plugstack.conf includes a glob Slurm cannot parse; configless nodes get this one.
             # Ref: https://slurm.schedmd.com/spank.html#SECTION_CONFIGURATION
             OutFile(f"{wk.SLURM_ETC}/plugstack.conf", "# rendered by slurmpod: no SPANK plugins\n"),
             OutFile(f"{wk.SLURM_ETC}/gres.conf", render.gres_conf())]
    if spec.cgroups:
        files.append(OutFile(f"{wk.SLURM_ETC}/cgroup.conf", render.cgroup_conf()))
    dirs = [OutDir(wk.STATE_SAVE_LOCATION, wk.SLURM_UID, wk.SLURM_UID, 0o700)]
    from slurmpod.entrypoints.cluster_spec import Policy  # noqa: PLC0415 - workers never load it

    if spec.policy is Policy.SLURMPOD:
        # The job_submit plugin runs inside slurmctld (SlurmUser) and writes its timing stats here.
        dirs.append(OutDir(wk.PLUGIN_STATS_DIR, wk.SLURM_UID, wk.SLURM_UID, 0o755))
    if c.auth == wk.AUTH_SLURM:
        # slurmctld's SACK socket (client commands in this pod use it). "If not using systemd, create
        # the runtime directories". Ref: https://slurm.schedmd.com/authentication.html#single_key_setup
        dirs.append(OutDir(wk.SLURMCTLD_RUN_DIR, wk.SLURM_UID, wk.SLURM_UID, 0o755))
    progs = [
        programs.slurmctld(c.auth, accounting, c.directory),
        programs.slurmpod_task(
            "node-reaper", ["daemon", "node-reaper", "--node-timeout", str(spec.node_timeout_seconds)],
            restart="true",
        ),
    ]
    if spec.accounting.enabled:
        # Registers the cluster and makes the spec's QoS, accounts and users in slurmdbd, once it answers.
        progs.append(programs.slurmpod_task("accounting-setup", ["daemon", "accounting-setup"],
                                            restart="unexpected"))
    if spec.topology_plugin != "none":
        # Re-renders the topology as worker pods come and go; reconfigures only on a change.
        progs.append(programs.slurmpod_task("topology-sync", ["daemon", "topology-sync"], restart="true"))
    if spec.k8s_sync.enabled:
        # Kubernetes node state -> Slurm drains; Slurm node state -> worker pod label and condition.
        progs.append(programs.slurmpod_task("k8s-sync", ["daemon", "k8s-sync"], restart="true"))
    if any(ns.autoscaling.by_slurmpod for ns in spec.nodesets):
        # Nodeset replicas follow the pending jobs they could serve; scale-in drains idle nodes first.
        progs.append(programs.slurmpod_task("autoscale", ["daemon", "autoscale"], restart="true"))
    if spec.metrics.enabled:
        # Slurm's and slurmpod's series for Prometheus, read from slurmctld at a bounded rate (docs/metrics.md).
        progs.append(programs.slurmpod_task("exporter", ["daemon", "exporter", "--port", str(inp.exporter_port)],
                                            restart="true"))
    return RolePlan(None, tuple(files), tuple(dirs), tuple(progs))


def topology_files(inp: StartInput, adapters: Adapters) -> tuple[OutFile, ...]:
    """topology.conf (24.11) or topology.yaml (25.05+) before slurmctld starts: TopologyPlugin needs the
    file to exist. With the slurm source no worker has registered yet, so it holds no nodes until the
    first topology-sync pass; with the api source it holds the pods the API lists now."""
    from slurmpod.entrypoints import topology_sync  # noqa: PLC0415 - the controller's alone

    assert inp.spec is not None and inp.slurm_version is not None
    tgt = topology_sync.target(inp.spec, inp.slurm_version)
    if tgt is None:
        return ()
    source = None
    if inp.kube_api is not None:
        source = topology_sync.source_for(adapters.slurm(), inp.pod.namespace, inp.kube_api)
    try:
        text = topology_sync.render_now(tgt, source)
    except TransientError as exc:  # the API is away: start without nodes; topology-sync fills them in
        log.warning("topology rendered without nodes", extra={"ctx": {"err": str(exc)[:200]}})
        text = topology_sync.render_now(tgt, None)
    return (OutFile(str(tgt.path), text),)
