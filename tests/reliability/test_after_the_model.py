"""Bad input that only shows once the model has answered: it must never cost the model's work nor
print a number that looks good by accident (documents whose option count varies, replies that are
all unreadable)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import run_lm_eval
from family_data import aqua_rows


def _aqua_with_four_option_rows(root: Path) -> Path:
    """AQuA files where every third row has 4 options instead of 5 (answers stay in range)."""
    for split, n in (("test", 9), ("dev", 9)):
        rows = aqua_rows(n, split)
        for i, row in enumerate(rows):
            if i % 3 == 0:
                row["options"] = row["options"][:4]
                row["correct"] = "ABCD"[i % 4]
        path = root / "aqua" / f"{split}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return root


def test_varying_option_counts_keep_every_method_but_vector_scaling(tiny_model_dir, tmp_path):
    data = _aqua_with_four_option_rows(tmp_path)
    metadata = {"data_dir": str(data), "calib_size": 9, "eval_size": 9}
    with pytest.warns(UserWarning, match=r"vector scaling skipped .* 4 and 5 options"):
        out = run_lm_eval(["calidist_aqua", "calidist_aqua_assertion"], tiny_model_dir,
                          metadata, num_fewshot=0)
    baselines = out["results"]["calidist_aqua"]
    for name in ("ece_ts", "brier_platt", "auroc_isotonic", "ece_vanilla", "temperature"):
        assert math.isfinite(baselines[f"{name},none"]), name
    assert all(math.isnan(baselines[f"{score}_vector,none"])
               for score in ("ece", "ece_adaptive", "brier", "auroc", "mce", "smece", "aurc"))
    assert math.isnan(baselines["acc_vector,none"])
    calidist = out["results"]["calidist_aqua_assertion"]
    assert math.isfinite(calidist["ece,none"]) and math.isfinite(calidist["alpha,none"])


def test_temperature_scaling_on_ragged_logits_matches_per_row_softmax():
    import numpy as np

    from calidist_metrics import TemperatureScaling

    logits = [[0.0, 1.0, -1.0, 0.5, 0.2], [2.0, 0.0, 1.0, -0.5], [0.3, 0.1, 0.0, 0.0, -2.0]]
    fit = TemperatureScaling().fit(logits, [1, 0, 2])
    probs = fit.predict_proba(logits)
    assert probs.shape == (3, 5) and probs[1, 4] == 0.0
    row = np.exp(np.array(logits[1]) / fit.temperature_)
    np.testing.assert_allclose(probs[1, :4], row / row.sum())
    with pytest.raises(ValueError, match="does not have"):
        TemperatureScaling().fit(logits, [1, 4, 2])


def test_all_unreadable_replies_give_nan_scores_not_a_perfect_ece(tiny_model_dir, ppdb_data_dir):
    """The tiny random model writes no readable answer: every score must say so (NaN)."""
    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 4, "eval_size": 6,
                "verbalized_prompt": "short"}
    with pytest.warns(UserWarning, match=r"unreadable .* every calibration score .* NaN"):
        out = run_lm_eval(["calidist_ppdb_verbalized", "calidist_ppdb_assertion_verbalized"],
                          tiny_model_dir, metadata, gen_kwargs="max_gen_toks=4", num_fewshot=0)
    for task in ("calidist_ppdb_verbalized", "calidist_ppdb_assertion_verbalized"):
        results = out["results"][task]
        assert results["parse_fail_rate,none"] > 0.5
        scores = [k for k in results if "_stderr" not in k and k.split(",")[0].startswith(
            ("ece", "brier", "auroc", "mce", "smece", "aurc"))]
        assert scores and all(math.isnan(results[k]) for k in scores)
        assert math.isfinite(results["acc,none"])
