"""Slurm topology from Kubernetes node labels: placement paths -> topology.conf / topology.yaml.

Modules, each with one job (docs/topology.md has the choices):
  model         the types that cross module boundaries (Placement, Layout, enums)
  hostlist      Slurm hostlist expressions: compress and expand
  kube          `kubectl get nodes|pods -o json` documents -> nodes and worker pods
  annotation    the generic placement value (`block1/host3`, `unit`, `topo:unit`) of nodes and pods
  providers     provider profiles: labels of one node -> its placement path
  layout        placements -> switches and blocks (names checked, unplaced nodes handled)
  blocksizes    BlockSizes: the default, and Slurm's rules for a given list
  render_conf   topology.conf for topology/tree and topology/block
  render_yaml   topology.yaml (Slurm 25.05+)
  node_topology the per-node `Topology=` registration value (Slurm 25.05+)
  sync          previous rendering + current nodes/pods -> what changed and what to do
  extra_placements  placements the workers registered with slurmctld (`slurmd --extra`) -> nodes
  render_cli    `slurmpod topology render`
"""
