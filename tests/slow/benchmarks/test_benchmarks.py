"""Slow half of ``tests/benchmarks/test_benchmarks.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import pytest


@pytest.mark.slow  # builds the tiny model and runs lm-eval (no tiny_model_dir fixture to mark it)
def test_own_share_times_our_hooks_against_the_models_calls(tmp_path):
    from lm_eval.models.huggingface import HFLM

    from benchmarks.markdown import own_share_line
    from benchmarks.overhead import MODEL_CALLS, OWN_HOOKS, own_share
    from calidist_tasks.tasks.base import CaliDistTask

    before = [CaliDistTask.__dict__[name] for name in OWN_HOOKS] + \
        [HFLM.__dict__[name] for name in MODEL_CALLS]
    found = own_share(tmp_path, {"calib_size": 4, "eval_size": 4})
    assert found["documents"] == 8 and found["calidist_s"] > 0 and found["model_s"] > 0
    assert found["share"] == found["calidist_s"] / found["model_s"]
    # the timers are gone after the run
    assert before == [CaliDistTask.__dict__[name] for name in OWN_HOOKS] + \
        [HFLM.__dict__[name] for name in MODEL_CALLS]
    line = own_share_line({"documents": 60, "calidist_s": 0.05, "model_s": 20.0,
                           "share": 0.0025})[0]
    assert "**0.2%** (target: at most 1%: met)" in line and own_share_line(None) == []
