"""`make bench`: build and start-up figures, each beside a baseline measured in the same run."""
