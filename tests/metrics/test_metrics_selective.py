"""Selective prediction: thresholds by hand, against a brute-force search, ties, the bootstrap."""

import math

import numpy as np
import pytest

from calidist_metrics import (
    SelectiveThreshold,
    coverage_at_accuracy,
    risk_coverage_curve,
    selective_threshold,
    selective_threshold_interval,
)


def test_a_hand_computed_case() -> None:
    # most confident first: 0.95 right, 0.9 right, 0.8 wrong, 0.7 right, 0.6 wrong, 0.5 right
    # kept 1..6: accuracy 1, 1, 2/3, 3/4, 3/5, 4/6
    confidence = [0.7, 0.95, 0.5, 0.8, 0.6, 0.9]
    correct = [1, 1, 1, 0, 0, 1]
    assert selective_threshold(confidence, correct, 0.9) == SelectiveThreshold(0.9, 2 / 6, 1.0)
    # 0.75 is first reached again at 0.7 (4 kept) after 2/3 at 0.8: the lowest threshold wins
    assert selective_threshold(confidence, correct, 0.75) == SelectiveThreshold(0.7, 4 / 6, 0.75)
    assert selective_threshold(confidence, correct, 0.6) == SelectiveThreshold(0.5, 1.0, 4 / 6)
    assert coverage_at_accuracy(confidence, correct, 0.75) == 4 / 6


def test_no_threshold_reaches_the_target() -> None:
    found = selective_threshold([0.9, 0.8], [0, 1], 0.9)
    assert math.isnan(found.threshold) and found.coverage == 0.0 and math.isnan(found.accuracy)


def test_ties_are_kept_or_dropped_together() -> None:
    # the two 0.8s (one right, one wrong) cannot be split: keeping the right one alone would
    # give 2/2 at coverage 2/4, but a threshold of 0.8 keeps both (2/3)
    found = selective_threshold([0.9, 0.8, 0.8, 0.1], [1, 1, 0, 0], 0.9)
    assert found == SelectiveThreshold(0.9, 0.25, 1.0)
    assert selective_threshold([0.9, 0.8, 0.8, 0.1], [1, 0, 1, 0], 0.6) == (
        SelectiveThreshold(0.8, 0.75, 2 / 3))


def _brute_force(confidence: np.ndarray, correct: np.ndarray, target: float) -> tuple:
    best = (math.nan, 0.0, math.nan)
    for t in np.unique(confidence):
        kept = confidence >= t
        accuracy = correct[kept].mean()
        if accuracy >= target - 1e-12 and kept.mean() > best[1]:
            best = (t, kept.mean(), accuracy)
    return best


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("target", [0.5, 0.8, 0.9, 0.95])
def test_equals_a_brute_force_search(seed: int, target: float) -> None:
    rng = np.random.default_rng(seed)
    confidence = np.round(rng.uniform(0.3, 1.0, 60), 1)  # rounded: many ties
    correct = (rng.uniform(size=60) < confidence).astype(float)
    found = selective_threshold(confidence, correct, target)
    expected = _brute_force(confidence, correct, target)
    np.testing.assert_equal(tuple(found), expected)


def test_agrees_with_the_risk_coverage_curve_where_there_are_no_ties() -> None:
    rng = np.random.default_rng(3)
    confidence = rng.uniform(size=200)
    correct = (rng.uniform(size=200) < confidence).astype(float)
    coverage, risk = risk_coverage_curve(confidence, correct)
    found = selective_threshold(confidence, correct, 0.8)
    reaching = coverage[1.0 - risk >= 0.8]
    assert found.coverage == reaching.max()


def test_the_bootstrap_interval_is_seeded_and_brackets_the_resamples() -> None:
    rng = np.random.default_rng(0)
    confidence = rng.uniform(0.3, 1.0, 300)
    correct = (rng.uniform(size=300) < confidence).astype(float)
    found, low, high = selective_threshold_interval(confidence, correct, 0.9, n_resamples=200)
    assert found == selective_threshold(confidence, correct, 0.9)
    assert 0.0 <= low < found.coverage < high <= 1.0
    assert (found, low, high) == selective_threshold_interval(confidence, correct, 0.9,
                                                              n_resamples=200)
    assert (low, high) != selective_threshold_interval(confidence, correct, 0.9,
                                                       n_resamples=200, seed=1)[1:]


@pytest.mark.parametrize("target", [0, 1.5, True, "0.9", math.nan])
def test_a_bad_target_is_refused(target: object) -> None:
    with pytest.raises(ValueError, match="target_accuracy must be a number in"):
        selective_threshold([0.5], [1], target)


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="length mismatch"):
        selective_threshold([0.5, 0.6], [1], 0.9)
    with pytest.raises(ValueError, match="confidence must lie in"):
        selective_threshold([1.5], [1], 0.9)
