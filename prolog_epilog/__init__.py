"""Node health: checks run as Slurm Prolog, Epilog and HealthCheckProgram, and the actions they take.

Layers (one direction): ``cli`` -> ``main`` (settings from env and flags) -> ``runner`` / ``actions`` ->
``checks.*`` (one check per module) -> adapters (``slurmpod.nvml``, ``gpu_readers``, ``cudalib``,
``slurmpod.slurm``) -> types (``result``, ``config``).
"""
