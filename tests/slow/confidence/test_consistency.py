"""Slow half of ``tests/confidence/test_consistency.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import math

from conftest import run_lm_eval
from test_consistency import metadata  # noqa: F401 (a fixture)

from calidist_tasks.scoring.aggregation import UNREADABLE_LIMIT
from calidist_tasks.scoring.records import CONSISTENCY_KINDS


def test_consistency_and_spuq_run_with_hf(tiny_model_dir, metadata):
    """A real run: 15 sampled generations per document through lm-eval's repeats."""
    out = run_lm_eval(["calidist_ppdb_consistency", "calidist_ppdb_spuq"], tiny_model_dir,
                      {**metadata, "eval_size": 3}, gen_kwargs="max_gen_toks=4")
    results = out["results"]
    consistency_run = results["calidist_ppdb_consistency"]
    assert consistency_run["requests_per_doc,none"] == 15.0
    assert consistency_run["n_evaluation,none"] == 3.0
    assert consistency_run["n_calibration,none"] == 0.0
    assert consistency_run["sampling_temperature,none"] == 1.0  # top_k / top_p at 1.0
    for kind in CONSISTENCY_KINDS:  # NaN exactly when most samples were unreadable
        unreadable = consistency_run["parse_fail_rate,none"] > UNREADABLE_LIMIT
        assert math.isnan(consistency_run[f"ece_{kind},none"]) == unreadable
    samples = out["samples"]["calidist_ppdb_consistency"]
    assert len(samples) == 3 and all(len(s["resps"][0]) == 15 for s in samples)
    assert len({text for s in samples for text in s["resps"][0]}) > 15  # sampled, not greedy
    spuq_run = results["calidist_ppdb_spuq"]
    assert spuq_run["requests_per_doc,none"] == 10.0
    # the random tiny model's greedy replies (the reference and the 6 prompt perturbations) hold
    # no readable answer: the rule (wrong, 1/c), not a guess; only its 3 samples may read as one
    assert spuq_run["parse_fail_rate,none"] >= 0.7 and spuq_run["acc,none"] == 0.0
    # mostly unreadable: the scores would describe the fallback (1/c, all wrong), so they are NaN
    assert math.isnan(spuq_run["ece_spuq,none"])
