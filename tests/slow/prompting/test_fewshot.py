"""Slow half of ``tests/prompting/test_fewshot.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

from pathlib import Path

from conftest import load_task, run_lm_eval
from test_fewshot import (
    PAPER_DOC,
    data_dir,  # noqa: F401 (a fixture)
)


def test_num_fewshot_through_lm_eval(tiny_model_dir: Path, data_dir: Path) -> None:
    """--num_fewshot 1 reaches every prompt of a run (original and hinted)."""
    out = run_lm_eval(["calidist_mscinli_assertion", "calidist_csqa_probe"], tiny_model_dir,
                      {"data_dir": str(data_dir), "calib_size": 6, "eval_size": 2},
                      num_fewshot=1, batch_size=32)
    for task, n_labels in (("calidist_mscinli_assertion", 4), ("calidist_csqa_probe", 5)):
        assert out["configs"][task]["num_fewshot"] == 1
        assert out["configs"][task]["metadata"]["fewshot_layout"] == "plain"  # no chat template
        sample = out["samples"][task][-1]
        contexts = {args[0] for args in sample["arguments"]}
        assert all(c.count("The answer is (") == n_labels + 1 for c in contexts)
        assert 0.0 <= out["results"][task]["ece,none"] <= 1.0
    # zero-shot stays the default
    assert "The answer is (a)" not in load_task(
        "calidist_mscinli", {"data_dir": str(data_dir), "calib_size": 6, "eval_size": 2}
    ).fewshot_context(PAPER_DOC, num_fewshot=0, gen_prefix="The answer is (")
