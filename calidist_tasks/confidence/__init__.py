"""Confidence sources of generation tasks: stated, consistency, SPUQ, chat log-probabilities."""
