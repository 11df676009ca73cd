"""The job_submit policy in plain Python: what slurmctld's plugin and `slurmpod policy check` both decide.

request (JobRequest) -> decide.decide (tier_rules, topology_rules, site rules) -> decision (Decision);
model holds the policy as typed values, loader reads the policy YAML into it, outcome is one built-in
rule's answer, check_cli is `slurmpod policy check`. Nothing here knows Slurm's C structs or the plugin
(slurmpod.slurm_plugins hosts this package, never the other way round).
Ref: https://slurm.schedmd.com/job_submit_plugins.html
"""
