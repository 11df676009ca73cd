"""Slurm topology from Kubernetes node labels (later issue)."""
