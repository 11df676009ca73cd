"""`python -m slurmpod_host.bench [--out DIR] [--skip-cold] [--flavor F ...]` (what `make bench` runs)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from slurmpod_host.bench import builds, health, startup
from slurmpod_host.bench.report import Report
from slurmpod_host.cluster import cli as cluster_cli
from slurmpod_host.cluster import runtime
from slurmpod_host.images import build as image_build
from slurmpod_host.images.flavors import get as get_flavor

BENCH_CLUSTER = "spbench"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slurmpod_host.bench", description=__doc__)
    parser.add_argument("--out", default="bench-results")
    parser.add_argument("--flavor", action="append", help="flavors to build (default 24.11 and 26.05)")
    parser.add_argument("--skip-cold", action="store_true", help="skip the cold builds (they run debootstrap)")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--health-only", action="store_true",
                        help="only the node-health figures: fake-GPU check runs and the prolog's cost per job")
    args = parser.parse_args(argv)
    flavors = args.flavor or ["24.11", "26.05"]
    repo = image_build.find_repo()
    report = Report()
    for flavor in [] if args.health_only else flavors:
        if not args.skip_cold:
            builds.cold_build(report, flavor, get_flavor(flavor).suite, repo)
        builds.rebuild_after_python_change(report, flavor, repo)
        builds.sizes(report, flavor)

    health.periodic_on_fake_gpus(report, repo)
    health.prolog_on_fake_gpus(report, repo)

    client = runtime.connect()
    cluster_cli.down(BENCH_CLUSTER)
    started = time.monotonic()
    cluster = cluster_cli.up(BENCH_CLUSTER, flavors[0], workers=2, timeout_s=300)
    report.notes.append(f"cluster up ({flavors[0]}, 2 workers) took {time.monotonic() - started:.1f} s")
    try:
        if not args.health_only:
            startup.start_to_idle(report, client, BENCH_CLUSTER, cluster.controller, args.trials)
            startup.prestop(report, client, BENCH_CLUSTER, controller=cluster.controller, login=cluster.login,
                            workers=list(cluster.workers))
        health.prolog_overhead(report, client, BENCH_CLUSTER, controller=cluster.controller, login=cluster.login,
                               worker=cluster.workers[0])
    finally:
        cluster_cli.down(BENCH_CLUSTER)
    json_path, md_path = report.write(Path(args.out))
    print(md_path.read_text(encoding="utf-8"))
    print(f"wrote {json_path} and {md_path}")
    return 0 if all(f.ok is not False for f in report.figures) else 1


if __name__ == "__main__":
    sys.exit(main())
