"""slurmpod.entrypoints.k8s_sync: the controller daemon that keeps Kubernetes and Slurm agreeing about every node.

  observe   one pass's input: Kubernetes nodes and worker pods, Slurm nodes, as typed snapshots
  decide    the pure decisions: which drains to set and lift, which labels, conditions, remediations
  budget    the cluster-wide rate limit on remediations, kept across restarts
  act       carries the decisions out, each with a log line, an Event and a counter
  daemon    the loop (`slurmpod daemon k8s-sync`) and its settings
"""
