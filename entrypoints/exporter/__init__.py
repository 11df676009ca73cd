"""The controller's Prometheus exporter (`slurmpod daemon exporter`, docs/metrics.md).

- collect.py  one poll's documents -> metric families; pure, no I/O
- poll.py     the bounded-rate poll loop: a deadline per Slurm call, the last good poll kept
- daemon.py   main: the cluster spec, the HTTP server, the loop
"""
