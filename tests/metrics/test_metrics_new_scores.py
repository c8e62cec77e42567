"""PRR, NLL and RMS calibration error against their references: LM-Polygraph's prediction
rejection ratio re-implemented from its definition and a hand-computed case, scikit-learn's
``log_loss``, and torchmetrics' binned ``l2`` calibration error re-implemented (torchmetrics is
not a dependency)."""

import math

import numpy as np
import pytest

from calidist_metrics import (
    CalibrationWarning,
    aurc,
    expected_calibration_error,
    negative_log_likelihood,
    prediction_rejection_ratio,
    rms_calibration_error,
)


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    confidence = rng.uniform(0.05, 0.999, n)  # distinct, never exactly 1.0
    correct = (rng.uniform(size=n) < confidence).astype(float)
    return confidence, correct


def _polygraph_prr(confidence, correct):
    """LM-Polygraph's PredictionRejectionArea, normalised by its random and oracle curves:
    uncertainty = -confidence, quality = correctness; each curve is the mean quality of the
    documents kept as the most uncertain are rejected one by one."""
    target = np.asarray(correct, dtype=float)
    remaining = np.arange(1, target.size + 1)
    ue = np.flip(np.cumsum(target[np.argsort(-np.asarray(confidence))]) / remaining)
    oracle = np.flip(np.cumsum(np.flip(np.sort(target))) / remaining)
    random = np.full(target.size, target.mean())
    area = np.mean
    return (area(ue) - area(random)) / (area(oracle) - area(random))


def test_prr_hand_example():
    # kept k = 1..4: risks 0, 1/2, 1/3, 1/2 (AURC 1/3); oracle 0, 0, 1/3, 1/2 (5/24); random 1/2
    confidence, correct = [0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0]
    assert aurc(confidence, correct) == pytest.approx(1 / 3)
    assert prediction_rejection_ratio(confidence, correct) == pytest.approx(
        (1 / 2 - 1 / 3) / (1 / 2 - 5 / 24))


@pytest.mark.parametrize("seed", range(5))
def test_prr_equals_lm_polygraphs_definition(seed):
    confidence, correct = _data(seed=seed)
    assert prediction_rejection_ratio(confidence, correct) == pytest.approx(
        _polygraph_prr(confidence, correct), abs=1e-12)


def test_prr_oracle_random_and_reversed():
    correct = np.array([1, 1, 1, 0, 0, 1, 0, 1, 0, 0], dtype=float)
    oracle = correct * 0.5 + 0.25  # every correct document more confident
    assert prediction_rejection_ratio(oracle, correct) == pytest.approx(1.0)
    assert prediction_rejection_ratio(np.full(10, 0.7), correct) == pytest.approx(0.0)
    assert prediction_rejection_ratio(1 - oracle, correct) < 0


def test_prr_one_class_warns_and_returns_chance():
    with pytest.warns(CalibrationWarning, match="one class"):
        assert prediction_rejection_ratio([0.2, 0.9], [1, 1]) == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_nll_equals_sklearn_log_loss(seed):
    from sklearn.metrics import log_loss  # here: seconds to import

    confidence, correct = _data(seed=seed)
    assert negative_log_likelihood(confidence, correct) == pytest.approx(
        log_loss(correct, confidence), rel=1e-12)


def test_nll_of_certain_answers_is_finite_as_sklearns():
    from sklearn.metrics import log_loss

    confidence, correct = [1.0, 0.0, 1.0], [0, 1, 1]
    value = negative_log_likelihood(confidence, correct)
    assert math.isfinite(value) and value == pytest.approx(
        log_loss(correct, confidence, labels=[0, 1]), rel=1e-12)
    assert negative_log_likelihood([0.5, 0.5], [1, 0]) == pytest.approx(math.log(2))


def _torchmetrics_l2(confidence, correct, n_bins):
    """torchmetrics' ``_binning_bucketize`` and ``_ce_compute(norm="l2")`` in numpy:
    ``torch.bucketize(conf, boundaries, right=True) - 1`` bins, then the square root of the
    proportion-weighted squared gaps."""
    boundaries = np.linspace(0, 1, n_bins + 1)
    index = np.searchsorted(boundaries, confidence, side="right") - 1
    count = np.bincount(index, minlength=boundaries.size).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        conf = np.nan_to_num(np.bincount(index, confidence, boundaries.size) / count)
        acc = np.nan_to_num(np.bincount(index, correct, boundaries.size) / count)
    ce = np.sum((acc - conf) ** 2 * count / count.sum())
    return math.sqrt(ce) if ce > 0 else 0.0


@pytest.mark.parametrize("n_bins", [10, 15])
@pytest.mark.parametrize("seed", range(3))
def test_rms_calibration_error_equals_torchmetrics_l2(n_bins, seed):
    # off the bin edges: torchmetrics' linspace edges (0.7000000000000001) put a confidence of
    # exactly 0.7 a bin lower than floor(10 * 0.7) does, as for ECE (registry.ECE_BINNING)
    confidence, correct = _data(seed=seed)
    assert rms_calibration_error(confidence, correct, n_bins=n_bins) == pytest.approx(
        _torchmetrics_l2(confidence, correct, n_bins), rel=1e-12)


def test_rms_calibration_error_hand_example_and_ece_bound():
    # bins [0.2, 0.3): conf 0.25, acc 0 (gap 0.25, weight 1/2); [0.8, 0.9): conf 0.85, acc 1
    # (gap 0.15, weight 1/2): RMS sqrt((0.0625 + 0.0225) / 2)
    confidence, correct = [0.25, 0.25, 0.85, 0.85], [0, 0, 1, 1]
    value = rms_calibration_error(confidence, correct)
    assert value == pytest.approx(math.sqrt((0.25 ** 2 + 0.15 ** 2) / 2))
    assert value >= expected_calibration_error(confidence, correct)  # l2 >= l1 of the gaps
