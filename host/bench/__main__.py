"""`python -m slurmpod_host.bench [--out DIR] [--skip-cold] [--flavor F ...] [--only PART ...]` (`make bench`).

Parts: builds (cold and warm image builds, sizes), startup (pod start to IDLE, preStop), policy (submit
cost of no job_submit plugin, job_submit/lua and job_submit/slurmpod, alternated). All by default.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from slurmpod_host.bench import builds, policy, startup
from slurmpod_host.bench.report import Report
from slurmpod_host.cluster import cli as cluster_cli
from slurmpod_host.cluster import runtime
from slurmpod_host.images import build as image_build
from slurmpod_host.images.flavors import get as get_flavor

BENCH_CLUSTER = "spbench"
PARTS = ("builds", "startup", "policy")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slurmpod_host.bench", description=__doc__)
    parser.add_argument("--out", default="bench-results")
    parser.add_argument("--flavor", action="append", help="flavors to build (default 24.11 and 26.05)")
    parser.add_argument("--skip-cold", action="store_true", help="skip the cold builds (they run debootstrap)")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--only", action="append", choices=PARTS, help="run only these parts (default: all)")
    args = parser.parse_args(argv)
    flavors = args.flavor or ["24.11", "26.05"]
    parts = set(args.only or PARTS)
    repo = image_build.find_repo()
    report = Report()
    for flavor in flavors if "builds" in parts else []:
        if not args.skip_cold:
            builds.cold_build(report, flavor, get_flavor(flavor).suite, repo)
        builds.rebuild_after_python_change(report, flavor, repo)
        builds.sizes(report, flavor)

    client = runtime.connect()
    if not parts & {"startup", "policy"}:
        return _finish(report, Path(args.out))
    cluster_cli.down(BENCH_CLUSTER)
    started = time.monotonic()
    cluster = cluster_cli.up(BENCH_CLUSTER, flavors[0], workers=2, timeout_s=300)
    report.notes.append(f"cluster up ({flavors[0]}, 2 workers) took {time.monotonic() - started:.1f} s")
    try:
        if "policy" in parts:
            policy.submit_cost(report, client, cluster.controller, cluster.login, args.trials)
        if "startup" in parts:
            startup.start_to_idle(report, client, BENCH_CLUSTER, cluster.controller, args.trials)
            startup.prestop(report, client, BENCH_CLUSTER, controller=cluster.controller, login=cluster.login,
                            workers=list(cluster.workers))
    finally:
        cluster_cli.down(BENCH_CLUSTER)
    return _finish(report, Path(args.out))


def _finish(report: Report, out: Path) -> int:
    json_path, md_path = report.write(out)
    print(md_path.read_text(encoding="utf-8"))
    print(f"wrote {json_path} and {md_path}")
    return 0 if all(f.ok is not False for f in report.figures) else 1


if __name__ == "__main__":
    sys.exit(main())
