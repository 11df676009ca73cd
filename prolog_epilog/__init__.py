"""Health checks run as Slurm prolog, epilog and HealthCheckProgram (later issue)."""
