"""Slow half of ``tests/prompting/test_verbalized.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

from conftest import run_lm_eval

from calidist_tasks.prompting.verbalized import (
    CONFIDENCE_FORMAT,
)


def test_the_short_budget_yields_to_gen_kwargs(tiny_model_dir, ppdb_data_dir):
    """Through lm-eval: verbalized_prompt=short with --gen_kwargs max_gen_toks=3 sends 3."""
    out = run_lm_eval(["calidist_ppdb_verbalized"], tiny_model_dir,
                      {"data_dir": str(ppdb_data_dir), "calib_size": 1, "eval_size": 1,
                       "verbalized_prompt": "short"}, num_fewshot=0, gen_kwargs="max_gen_toks=3")
    sample = out["samples"]["calidist_ppdb_verbalized"][-1]
    assert sample["arguments"][0][1]["max_gen_toks"] == 3
    assert sample["arguments"][0][0].endswith(CONFIDENCE_FORMAT + "\nAssistant:\n")
