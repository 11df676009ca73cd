"""job_submit_slurmpod.so: the Slurm plugin that hosts the policy (slurmpod.policy) inside slurmctld.

The C is in the .c/.h files beside these modules: job_submit_slurmpod.c (the plugin Slurm loads; its
header comment says what it enforces), fastpath.c (the built-in rules over a compiled table, without
Python), slurmpod_job.h and fastpath.h (the structs C and Python share), python_api.h (what the
embedded Python provides). build_plugin compiles them with cffi's embedding API; embedded + bridge are
the plugin's Python side; fastpath compiles a loaded policy into the C table; stats reads the plugin's
per-call timing.
Ref: https://slurm.schedmd.com/job_submit_plugins.html, https://cffi.readthedocs.io/en/stable/embedding.html
"""
