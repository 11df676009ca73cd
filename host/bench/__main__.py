"""`python -m slurmpod_host.bench [--out DIR] [--skip-cold] [--flavor F ...] [--only PART ...]` (`make bench`).

Parts, all by default:
  render    no Docker: 10,000-node topology rendering; periodic health and prolog runs on 8 fake GPUs;
            the job_submit plugin's cost per call in a stand-in slurmctld (C fast path vs Python)
  builds    cold and warm image builds, image sizes
  startup   pod start to IDLE against a bare slurmd start, and with SSSD on against off; preStop
  policy    submit cost of no job_submit plugin, job_submit/lua and job_submit/slurmpod, alternated
  health    prolog cost per job in a cluster: sruns with slurmpod's hooks against sruns without
  mpi       `srun --mpi=pmix -N2 -n4` MPI start-up to first output beside `srun -N2 -n4 hostname`
  exporter  the exporter's own cost with 1,000 nodes and 10,000 jobs in Slurm's state: seconds, slurmctld RPCs
            and CPU per poll beside the same four Slurm commands run bare, its memory and scrape size beside
            the same at start (a cluster of its own), per flavor
  requeue   a health fault on a job's node to the requeued job running on the healthy one, with
            requeue.fast beside Slurm's default hold (two clusters side by side, paired rounds), per flavor
  k8s       the chart on a local Kubernetes 1.20.2: helm install to all pods Ready, a worker's pod creation
            to its node IDLE, beside the emulator's figures of the same run (after its cluster is down)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from slurmpod_host.bench import builds, exporter, health, k8s, mpi, plugin, policy, requeue, startup, topology
from slurmpod_host.bench.report import Report
from slurmpod_host.cluster import cli as cluster_cli
from slurmpod_host.cluster import runtime
from slurmpod_host.images import build as image_build
from slurmpod_host.images.flavors import get as get_flavor

BENCH_CLUSTER = "spbench"
PARTS = ("render", "builds", "startup", "policy", "health", "mpi", "exporter", "requeue", "k8s")
# The requeue part's two clusters (its own: one keeps Slurm's default hold).
REQUEUE_CLUSTERS = ("spbench-fast", "spbench-hold")
EXPORTER_CLUSTER = "spbench-exporter"  # the exporter part's own: 10,000 jobs would be in every other part's way
_CLUSTER_PARTS = {"startup", "policy", "health", "mpi", "k8s"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slurmpod_host.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="bench-results")
    parser.add_argument("--flavor", action="append", help="flavors to build (default 24.11 and 26.05)")
    parser.add_argument("--skip-cold", action="store_true", help="skip the cold builds (they run debootstrap)")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--only", action="append", choices=PARTS, help="run only these parts (default: all)")
    parser.add_argument("--array-tasks", type=int, default=health.ARRAY_TASKS,
                        help="tasks in the health part's job array (hooks on against off)")
    args = parser.parse_args(argv)
    flavors = args.flavor or ["24.11", "26.05"]
    parts = set(args.only or PARTS)
    repo = image_build.find_repo()
    report = Report()
    if "render" in parts:
        # Topology: parse, place, lay out and render 10,000 labelled nodes per format, under 1 s.
        topology.render_10k_nodes(report, trials=args.trials)
        # Health: a full periodic health run, and a prolog run, on 8 GPUs of the C fake libnvidia-ml.
        health.periodic_on_fake_gpus(report, repo, args.trials)
        health.prolog_on_fake_gpus(report, repo, args.trials)
        # The same prolog through the worker's C client and the health agent, against the Python hook.
        health.hook_client_on_fake_gpus(report, repo)
        # Policy plugin: its own cost per call, fast path against Python, outside slurmctld.
        plugin.stand_in(report, repo, args.trials)
    for flavor in flavors if "builds" in parts else []:
        if not args.skip_cold:
            builds.cold_build(report, flavor, get_flavor(flavor).suite, repo)
        builds.rebuild_after_python_change(report, flavor, repo)
        builds.sizes(report, flavor)

    for flavor in flavors if "exporter" in parts else []:  # before the shared cluster: never beside it
        exporter.cost(report, flavor, args.trials, name=EXPORTER_CLUSTER)
    for flavor in flavors if "requeue" in parts else []:  # before the shared cluster: never beside it
        requeue.requeue_latency(report, flavor, args.trials, fast_name=REQUEUE_CLUSTERS[0],
                                hold_name=REQUEUE_CLUSTERS[1])
    if not parts & _CLUSTER_PARTS:
        return _finish(report, Path(args.out))
    client = runtime.connect()
    up_s = 0.0
    # The first flavor's cluster serves every cluster part; each further flavor gets a cluster of its own
    # for the per-job parts (hooks and MPI), so both flavors' figures are paired within their own run.
    for i, flavor in enumerate(flavors):
        if i and not parts & {"health", "mpi"}:
            break
        cluster_cli.down(BENCH_CLUSTER)
        started = time.monotonic()
        cluster = cluster_cli.up(BENCH_CLUSTER, flavor, workers=2, timeout_s=300)
        took = time.monotonic() - started
        up_s = up_s or took
        report.notes.append(f"cluster up ({flavor}, 2 workers) took {took:.1f} s")
        label = f"[{flavor}] "
        try:
            if "policy" in parts and not i:
                policy.submit_cost(report, client, cluster.controller, cluster.login, args.trials)
            if "startup" in parts and not i:
                startup.start_to_idle(report, client, BENCH_CLUSTER, cluster.controller, args.trials)
                startup.prestop(report, client, BENCH_CLUSTER, controller=cluster.controller, login=cluster.login,
                                workers=list(cluster.workers))
                startup.sssd_start_to_idle(report, client, BENCH_CLUSTER, controller=cluster.controller,
                                           login=cluster.login, trials=args.trials)
                startup.claim_start_to_idle(report, client, BENCH_CLUSTER, cluster.controller, args.trials)
            if "health" in parts:
                health.prolog_overhead(report, client, BENCH_CLUSTER, controller=cluster.controller,
                                       login=cluster.login, worker=cluster.workers[0],
                                       workers=list(cluster.workers), label=label, array_tasks=args.array_tasks)
            if "mpi" in parts:
                mpi.startup(report, client, cluster.login, get_flavor(flavor).mpi_pmix, label=label)
        finally:
            cluster_cli.down(BENCH_CLUSTER)
    if "k8s" in parts:  # never beside the emulator's cluster: both would use the one Docker engine
        idle = next((f.value for f in report.figures if f.name.startswith("worker pod start to IDLE")), None)
        k8s.figures(report, repo, flavors[0], args.trials, emulator_up_s=up_s, emulator_idle_s=idle,
                    client=client)
    return _finish(report, Path(args.out))


def _finish(report: Report, out: Path) -> int:
    json_path, md_path = report.write(out)
    print(md_path.read_text(encoding="utf-8"))
    print(f"wrote {json_path} and {md_path}")
    return 0 if all(f.ok is not False for f in report.figures) else 1


if __name__ == "__main__":
    sys.exit(main())
