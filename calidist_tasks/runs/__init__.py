"""Run files and multi-run chains: earlier runs, two-stage and reply runs, recovery."""
