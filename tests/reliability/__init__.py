"""Reliability suite (issue 7): bad input of every kind, determinism, resume, safety."""
