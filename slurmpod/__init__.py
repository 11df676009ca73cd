"""slurmpod: the node-side runtime for Slurm on Kubernetes."""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("slurmpod")
except _metadata.PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"
