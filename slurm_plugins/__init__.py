"""job_submit policy and its cffi-embedded plugin (later issue)."""
