"""slurmpod_host: the host side of slurmpod (image builder, pods-in-Docker emulator, bench).

It runs on a user's machine or in CI, never in a pod: the images carry only the `slurmpod`
distribution. Installed from this folder as the `slurmpod-host` distribution (see host/pyproject.toml).
"""
