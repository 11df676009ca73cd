"""slurmpod.entrypoints.autoscale: the controller daemon that sets worker nodesets' replicas from the demand
of the pending jobs they could serve, and never removes a node a job runs on.

  observe   one pass's input per nodeset: its StatefulSet's Scale, its Slurm nodes by ordinal, its demand
  decide    the pure decisions: scale out, drain the highest ordinals, lift our drains, scale in
  act       carries the decisions out, each with a log line and a counter (read by the exporter)
  daemon    the loop (`slurmpod daemon autoscale`) and its settings
"""
