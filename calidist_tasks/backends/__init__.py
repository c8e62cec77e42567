"""The lm-eval seam, the prefix-cache backend, API replies and offline models."""
