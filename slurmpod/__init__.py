"""slurmpod: the node-side runtime for Slurm on Kubernetes."""

# A literal, not importlib.metadata: that import alone costs ~100 ms of every pod start.
__version__ = "0.1.0"
