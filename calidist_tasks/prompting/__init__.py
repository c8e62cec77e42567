"""Prompts: their parts, distractor styles, few-shot exemplars, and the reply reader."""
