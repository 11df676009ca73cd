"""job_submit policy in plain Python and its cffi-embedded plugin (job_submit_slurmpod.so).

request (JobRequest) -> engine.decide (tier_rules, topology_rules, custom rules) -> decision (Decision);
loader reads the policy YAML; check_cli is `slurmpod policy check`; bridge + embedded are the plugin's
Python side; build_plugin builds the .so; stats reads its per-call timing.
"""
