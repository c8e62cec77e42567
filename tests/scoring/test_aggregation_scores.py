"""MCE, smooth ECE and AURC in lm-eval's results: every confidence reports them, with ↓ arrows,
computed by calidist_metrics, and NaN when the replies were mostly unreadable."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from calidist_metrics import CalibrationWarning, aurc, maximum_calibration_error, smooth_ece
from calidist_tasks.registry import higher_is_better, metric_names
from calidist_tasks.scoring.aggregation import (
    SCORES,
    summarize_baselines,
    unless_unreadable,
)
from calidist_tasks.settings import RunSettings

NEW = ("mce", "smece", "aurc")


def test_new_scores_for_every_confidence_with_lower_is_better_arrows():
    assert set(NEW) <= set(SCORES)
    names = set(metric_names(True) + metric_names(False)
                + metric_names(False, "consistency")
                + metric_names(False, "spuq")
                + metric_names(False, "verbalized"))
    for score in NEW:
        for suffix in ("", "_vanilla", "_ts", "_platt", "_isotonic", "_vector", "_consistency",
                       "_entropy", "_fsd", "_spuq"):
            assert f"{score}{suffix}" in names, f"{score}{suffix}"
            assert higher_is_better(f"{score}{suffix}") is False
    assert higher_is_better("auroc") is True and higher_is_better("acc_vector") is True


def test_new_scores_equal_the_library_on_the_baselines():
    rng = np.random.default_rng(0)
    records = []
    for i in range(40):
        logits = rng.normal(size=3)
        probs = np.exp(logits) / np.exp(logits).sum()
        label = int(rng.integers(3))
        records.append({"index": i, "split": "calibration" if i < 20 else "evaluation",
                        "label": label, "prediction": int(probs.argmax()),
                        "confidence": float(probs.max()), "correct": int(probs.argmax() == label),
                        "letter_logprobs": np.log(probs).tolist(), "requests": 3})
    context = {"task": "calidist_x", "labels": ["a", "b", "c"], "model": None}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        out = summarize_baselines(records, RunSettings(), context)
    evaluation = records[20:]
    confidence = np.array([r["confidence"] for r in evaluation])
    correct = np.array([r["correct"] for r in evaluation])
    assert out["mce_vanilla"] == pytest.approx(maximum_calibration_error(confidence, correct))
    assert out["smece_vanilla"] == pytest.approx(smooth_ece(confidence, correct))
    assert out["aurc_vanilla"] == pytest.approx(aurc(confidence, correct))
    for name in NEW:
        for suffix in ("_vanilla", "_ts", "_platt", "_isotonic", "_vector"):
            assert 0.0 <= out[f"{name}{suffix}"] <= 1.0, (name, suffix)


def test_unreadable_results_make_the_new_scores_nan():
    results = {"acc": 0.4, "parse_fail_rate": 0.9, "mce_vanilla": 0.1, "smece": 0.2,
               "aurc_platt": 0.3, "n_evaluation": 6.0}
    with pytest.warns(CalibrationWarning, match="unreadable"):
        out = unless_unreadable(results)
    assert all(math.isnan(out[k]) for k in ("mce_vanilla", "smece", "aurc_platt"))
    assert out["acc"] == 0.4 and out["parse_fail_rate"] == 0.9 and out["n_evaluation"] == 6.0
