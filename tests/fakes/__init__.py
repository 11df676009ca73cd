"""Test doubles at the real boundaries: a fake libnvidia-ml.so.1 in C, a recording Slurm client."""
