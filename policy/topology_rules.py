"""Keep multi-node GPU jobs inside one network block (topology/block) or leaf switch (topology/tree).

tree:  --switches=1@<max wait> -> job_desc.req_switch = 1, wait4switch = seconds.
       Ref: https://slurm.schedmd.com/sbatch.html#OPT_switches
block: --segment=<n> -> job_desc.segment_size. A job of at most one block gets segment = its node count
       (one segment, so one base block: the segment may not exceed the base block size); a larger job
       whose node count is a multiple of the block gets whole-block segments.
       Ref: https://slurm.schedmd.com/sbatch.html#OPT_segment, https://slurm.schedmd.com/topology.html
"""

from __future__ import annotations

from slurmpod import well_known as wk
from slurmpod.policy.decision import Changes
from slurmpod.policy.model import Oversize, Policy, Topology, TopologyKind
from slurmpod.policy.outcome import NOTHING, Outcome, Rule, change, refuse
from slurmpod.policy.request import JobRequest, Sharing, gpu_count, with_gpus_per_node


def check(policy: Policy, req: JobRequest) -> Outcome:
    t = policy.topology
    if t.kind is TopologyKind.NONE and not t.whole_node_gpus:
        return NOTHING  # nothing to place, so nothing to opt out of
    if not req.multi_node or (t.gpu_jobs_only and req.gpus == 0):
        return NOTHING
    if wk.POLICY_OPT_OUT_TOKEN in (req.comment or ""):
        if t.opt_out.allows(req):
            return Outcome(notes=("topology placement skipped (opt-out)",), rules=(Rule.OPT_OUT,))
        return refuse(Rule.OPT_OUT, f"user {req.user or req.uid} may not opt out of topology placement; "
                                    f"remove {wk.POLICY_OPT_OUT_TOKEN!r} from --comment")
    whole = _whole_node(t, req)
    if whole.reject is not None:
        return whole
    return whole.then(_placement(t, req))


def _whole_node(t: Topology, req: JobRequest) -> Outcome:
    want = t.whole_node_gpus
    if not want or req.gpus == 0:
        return NOTHING
    if req.gpus_per_task_or_socket and not req.gpus_per_node and not gpu_count(req.tres_per_job):
        return refuse(Rule.WHOLE_NODE, f"multi-node GPU jobs use whole nodes: ask --gpus-per-node={want}, "
                                       f"not GPUs per task or per socket")
    if gpu_count(req.tres_per_job):
        if req.gpus == want * req.nodes:
            return NOTHING
        return refuse(Rule.WHOLE_NODE, f"multi-node GPU jobs use whole nodes: ask --gpus-per-node={want} "
                                       f"(or --gpus={want * req.nodes} for {req.nodes} nodes)")
    if req.gpus_per_node > want:
        return refuse(Rule.WHOLE_NODE, f"a node has {want} GPUs; {req.gpus_per_node} per node cannot run")
    if req.gpus_per_node == want and req.sharing is Sharing.EXCLUSIVE:
        return NOTHING
    return change(Rule.WHOLE_NODE, Changes(tres_per_node=with_gpus_per_node(req.tres_per_node, want),
                                           sharing=Sharing.EXCLUSIVE),
                  f"multi-node GPU job given whole nodes ({want} GPUs each, exclusive)")


def _placement(t: Topology, req: JobRequest) -> Outcome:
    if t.kind is TopologyKind.NONE:
        return NOTHING
    unit = "leaf switch" if t.kind is TopologyKind.TREE else "block"
    if (t.kind is TopologyKind.TREE and req.req_switch is not None) or \
            (t.kind is TopologyKind.BLOCK and req.segment_size is not None):
        return NOTHING  # the user placed the job; Slurm validates it
    n, size = req.nodes, t.group_size
    if t.kind is TopologyKind.BLOCK and req.max_nodes is not None and req.max_nodes > n:
        # --segment needs the node count divisible by it, which a range (-N 2-6) cannot promise.
        return Outcome(notes=(f"a node range ({n}-{req.max_nodes}) is not kept to one {unit}",),
                       rules=(Rule.TOPOLOGY,))
    if n <= size:
        if t.kind is TopologyKind.TREE:
            return change(Rule.TOPOLOGY, Changes(req_switch=1, wait4switch=t.max_switch_wait_s),
                          f"kept within one {unit} (--switches=1@{t.max_switch_wait_s}s)")
        return change(Rule.TOPOLOGY, Changes(segment_size=n), f"kept within one {unit} (--segment={n})")
    if t.oversize is Oversize.ALLOW:
        return NOTHING
    if t.oversize is Oversize.SEGMENT and t.kind is TopologyKind.BLOCK and n % size == 0:
        return change(Rule.TOPOLOGY, Changes(segment_size=size),
                      f"{n} nodes placed as {n // size} whole blocks (--segment={size})")
    hint = f"ask for at most {size} nodes"
    if t.oversize is Oversize.SEGMENT:
        hint += f", or a multiple of {size} so each {size}-node segment fills one {unit}"
    kind = "GPU job" if req.gpus else "job"  # with gpuJobsOnly: false, CPU jobs are placed too
    return refuse(Rule.TOPOLOGY, f"a {n}-node {kind} does not fit one {unit} of {size} nodes: {hint}")
