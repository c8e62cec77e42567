"""Records -> fits -> scores: pure functions of the per-document records (no lm_eval import)."""
