"""job_submit_slurmpod.so: the Slurm plugin that hosts the policy (slurmpod.policy) inside slurmctld.

build_plugin builds the .so with cffi's embedding API; embedded + bridge are the plugin's Python side;
fastpath compiles a loaded policy into the table the C fast path reads; stats reads the plugin's
per-call timing.
Ref: https://slurm.schedmd.com/job_submit_plugins.html, https://cffi.readthedocs.io/en/stable/embedding.html
"""
