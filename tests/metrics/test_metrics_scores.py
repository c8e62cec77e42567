"""Scores: agreement with scikit-learn, hand-computed ECE / MCE / AURC, smooth ECE against its
definition and the paper's stated behaviour, properties, input checks, bootstrap."""

import dataclasses
import math
import subprocess
import sys
import warnings
from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calidist_metrics import (
    CalibrationWarning,
    accuracy_at_coverage,
    aurc,
    auroc,
    bootstrap_interval,
    brier_score,
    expected_calibration_error,
    maximum_calibration_error,
    negative_log_likelihood,
    paired_bootstrap_test,
    prediction_rejection_ratio,
    reliability_bins,
    risk_coverage_curve,
    rms_calibration_error,
    smooth_ece,
    smooth_ece_bandwidth,
)

SCORES = [expected_calibration_error, brier_score, auroc, reliability_bins,
          maximum_calibration_error, smooth_ece, smooth_ece_bandwidth, risk_coverage_curve, aurc,
          accuracy_at_coverage, prediction_rejection_ratio, negative_log_likelihood,
          rms_calibration_error]


def _data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    confidence = rng.uniform(0.2, 1.0, n)
    correct = (rng.uniform(size=n) < confidence).astype(int)
    return confidence, correct


@st.composite
def documents(draw, min_size=1, max_size=60):
    n = draw(st.integers(min_size, max_size))
    conf = st.one_of(
        st.floats(0.0, 1.0, allow_nan=False),
        st.sampled_from([0.0, 0.1, 0.3, 0.5, 0.7, 1.0]),
    )
    confidence = np.array(draw(st.lists(conf, min_size=n, max_size=n)))
    correct = np.array(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    return confidence, correct


# -- agreement with scikit-learn ------------------------------------------------------------


def test_brier_matches_sklearn():
    from sklearn.metrics import brier_score_loss  # here: seconds to import

    confidence, correct = _data()
    assert brier_score(confidence, correct) == pytest.approx(
        brier_score_loss(correct, confidence), abs=1e-12
    )


def test_auroc_matches_sklearn_with_ties():
    from sklearn.metrics import roc_auc_score

    confidence, correct = _data()
    confidence = np.round(confidence, 1)  # many ties: counted as one half
    assert auroc(confidence, correct) == pytest.approx(roc_auc_score(correct, confidence), 1e-12)


def test_auroc_hand_example():
    # pairs (correct, wrong): (0.9, 0.4) win, (0.9, 0.6) win, (0.5, 0.4) win, (0.5, 0.6) loss
    assert auroc([0.9, 0.5, 0.4, 0.6], [1, 1, 0, 0]) == pytest.approx(0.75)
    assert auroc([0.5, 0.5], [1, 0]) == pytest.approx(0.5)
    assert auroc([0.2, 0.9], [1, 0]) == pytest.approx(0.0)


# -- ECE -----------------------------------------------------------------------------------


def test_ece_hand_example_uniform():
    confidence = [0.05, 0.15, 0.15, 0.55, 0.95, 0.95, 1.0, 0.3, 0.7]
    correct = [0, 0, 1, 1, 1, 1, 0, 0, 1]
    # bins: [0,.1): {.05:0} gap .05 | [.1,.2): {.15:0,.15:1} gap .35 | [.3,.4): {.3:0} gap .3
    # [.5,.6): {.55:1} gap .45 | [.7,.8): {.7:1} gap .3 | [.9,1]: {.95:1,.95:1,1.0:0} gap .30
    expected = (0.05 + 2 * 0.35 + 0.3 + 0.45 + 0.3 + 3 * abs(2 / 3 - (0.95 + 0.95 + 1.0) / 3)) / 9
    assert expected_calibration_error(confidence, correct) == pytest.approx(expected, abs=1e-12)
    bins = reliability_bins(confidence, correct)
    np.testing.assert_array_equal(bins.counts, [1, 2, 0, 1, 0, 1, 0, 1, 0, 3])
    assert bins.mean_confidence[2] == 0.0 and bins.accuracy[2] == 0.0
    assert bins.edges.shape == (11,)


def test_ece_edges_go_to_upper_bin_and_one_to_last():
    bins = reliability_bins([0.1, 0.3, 0.7, 1.0], [1, 1, 1, 1])
    np.testing.assert_array_equal(np.nonzero(bins.counts)[0], [1, 3, 7, 9])


def test_ece_quantile_hand_example():
    confidence = [0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9]
    correct = [0, 0, 1, 1, 1, 1, 0, 1]
    bins = reliability_bins(confidence, correct, n_bins=2, strategy="quantile")
    np.testing.assert_array_equal(bins.counts, [4, 4])
    np.testing.assert_allclose(bins.edges, [0.1, 0.5, 0.9])
    expected = 0.5 * abs(0.5 - 0.25) + 0.5 * abs(0.75 - 0.75)
    assert expected_calibration_error(confidence, correct, 2, "quantile") == pytest.approx(expected)
    np.testing.assert_allclose(bins.mean_confidence, [0.25, 0.75])


def test_ece_perfect_and_worst():
    assert expected_calibration_error([1.0, 1.0], [1, 1]) == 0.0
    assert expected_calibration_error([1.0, 0.0], [0, 1]) == 1.0


@settings(max_examples=30, deadline=None)
@given(documents(), st.integers(1, 15), st.sampled_from(["uniform", "quantile"]))
def test_ece_equals_weighted_bin_gaps(docs, n_bins, strategy):
    confidence, correct = docs
    bins = reliability_bins(confidence, correct, n_bins=n_bins, strategy=strategy)
    assert bins.counts.sum() == len(confidence)
    assert bins.edges.shape == (n_bins + 1,)
    manual = np.sum(bins.counts / len(confidence) * np.abs(bins.accuracy - bins.mean_confidence))
    ece = expected_calibration_error(confidence, correct, n_bins=n_bins, strategy=strategy)
    assert ece == pytest.approx(manual, abs=1e-12)
    # every document lies inside its bin's edges
    full = bins.counts > 0
    assert np.all(bins.mean_confidence[full] >= bins.edges[:-1][full] - 1e-12)
    assert np.all(bins.mean_confidence[full] <= bins.edges[1:][full] + 1e-12)


@settings(max_examples=30, deadline=None)
@given(documents())
def test_scores_in_range(docs):
    from sklearn.metrics import roc_auc_score

    confidence, correct = docs
    for value in (
        expected_calibration_error(confidence, correct),
        expected_calibration_error(confidence, correct, strategy="quantile"),
        brier_score(confidence, correct),
    ):
        assert 0.0 <= value <= 1.0
    if 0 < correct.sum() < len(correct):
        assert 0.0 <= auroc(confidence, correct) <= 1.0
        assert auroc(confidence, correct) == pytest.approx(roc_auc_score(correct, confidence))
    assert brier_score(confidence, correct) >= 0


# -- MCE, one-bin ECE -----------------------------------------------------------------------


def test_mce_hand_example():
    confidence = [0.05, 0.15, 0.15, 0.55, 0.95, 0.95, 1.0, 0.3, 0.7]
    correct = [0, 0, 1, 1, 1, 1, 0, 0, 1]
    # bin gaps (see test_ece_hand_example_uniform): .05, .35, .3, .45, .3, |2/3 - 2.9/3| = .3
    assert maximum_calibration_error(confidence, correct) == pytest.approx(0.45)
    assert maximum_calibration_error([1.0, 1.0], [1, 1]) == 0.0
    assert maximum_calibration_error([1.0, 0.0], [0, 1]) == 1.0
    # equal-mass bins: [.1, .2, .3, .4] acc .5 conf .25; [.6, .7, .8, .9] acc .75 conf .75
    assert maximum_calibration_error([0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9],
                                     [0, 0, 1, 1, 1, 1, 0, 1], 2, "quantile") == pytest.approx(0.25)


def test_one_bin_ece_is_helms_mean_gap():
    # HELM's ece_1_bin: |mean confidence - accuracy|
    assert expected_calibration_error([0.9, 0.8, 0.4], [1, 0, 0], n_bins=1) == pytest.approx(
        0.7 - 1 / 3)


@settings(max_examples=30, deadline=None)
@given(documents(), st.integers(1, 15))
def test_mce_bounds_ece(docs, n_bins):
    confidence, correct = docs
    ece = expected_calibration_error(confidence, correct, n_bins=n_bins)
    mce = maximum_calibration_error(confidence, correct, n_bins=n_bins)
    assert ece - 1e-12 <= mce <= 1.0
    bins = reliability_bins(confidence, correct, n_bins=n_bins)
    assert mce == pytest.approx(bins.gaps[bins.counts > 0].max())


# -- smooth ECE ----------------------------------------------------------------------------


def smece_by_definition(confidence, correct, sigma, points=8001):
    """The paper's smECE_sigma by direct integration: (1/n) sum_i K(t, f_i) (y_i - f_i) with K
    the Gaussian reflected at 0 and 1 (every mirror image), integrated over t in [0, 1]."""
    f, y = np.asarray(confidence, float), np.asarray(correct, float)
    t = np.linspace(0.0, 1.0, points)
    density = np.zeros_like(t)
    for shift in range(-6, 7):
        for image in (f + 2 * shift, 2 * shift - f):
            # the normal density N(t; image, sigma), written out (scipy's norm.pdf was most of
            # the time)
            gauss = np.exp(-0.5 * ((t[:, None] - image[None, :]) / sigma) ** 2)
            density += gauss / (sigma * math.sqrt(2 * math.pi)) @ (y - f)
    return float(np.trapezoid(np.abs(density / f.size), t))


@pytest.mark.parametrize("sigma", [0.02, 0.1, 0.35, 1.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_smooth_ece_matches_its_definition(sigma, seed):
    rng = np.random.default_rng(seed)
    confidence = np.r_[rng.uniform(0, 1, 40), [0.0, 1.0, 0.001, 0.999]]  # the edges too
    correct = (rng.uniform(size=confidence.size) < confidence ** 2).astype(int)
    assert smooth_ece(confidence, correct, bandwidth=sigma) == pytest.approx(
        smece_by_definition(confidence, correct, sigma), abs=2e-4)


def test_smooth_ece_bandwidth_is_the_fixed_point():
    confidence, correct = _data(300, seed=2)
    correct = np.where(confidence > 0.7, correct, 0)  # miscalibrated below 0.7
    sigma = smooth_ece_bandwidth(confidence, correct)
    value = smooth_ece(confidence, correct)
    assert 1e-3 < sigma < 1.0
    assert value == pytest.approx(sigma, abs=1e-4)
    assert value == pytest.approx(smooth_ece(confidence, correct, bandwidth=sigma), abs=1e-9)
    # smECE_sigma does not grow with sigma (the fixed point is unique)
    values = [smooth_ece(confidence, correct, bandwidth=s) for s in np.linspace(0.001, 1, 40)]
    assert np.all(np.diff(values) <= 1e-9)


def test_smooth_ece_zero_when_calibrated():
    # the residuals cancel at every confidence: 0 (the paper: 0 iff perfectly calibrated)
    assert smooth_ece([0.7] * 10, [1] * 7 + [0] * 3) == pytest.approx(0.0, abs=1e-12)
    assert smooth_ece([0.25] * 4 + [0.5] * 2, [1, 0, 0, 0, 1, 0]) == pytest.approx(0.0, abs=1e-12)
    assert smooth_ece([1.0, 0.0, 1.0], [1, 0, 1]) == 0.0
    assert smooth_ece_bandwidth([0.7] * 10, [1] * 7 + [0] * 3) == 1e-3
    # sampled from a calibrated model: small, shrinking with n
    rng = np.random.default_rng(0)
    confidence = rng.uniform(0, 1, 20000)
    correct = (rng.uniform(size=confidence.size) < confidence).astype(int)
    assert smooth_ece(confidence, correct) < 0.02
    assert smooth_ece(confidence[:500], correct[:500]) > smooth_ece(confidence, correct)


def test_smooth_ece_worst_case_is_one():
    assert smooth_ece([1.0] * 5, [0] * 5) == pytest.approx(1.0, abs=1e-9)
    assert smooth_ece([0.0, 0.0], [1, 1]) == pytest.approx(1.0, abs=1e-9)


def test_smooth_ece_close_to_ece_on_well_populated_data():
    # overconfident by 0.1 everywhere, 20000 documents: binned and smooth ECE both ~0.1
    rng = np.random.default_rng(1)
    confidence = rng.uniform(0.4, 1.0, 20000)
    correct = (rng.uniform(size=confidence.size) < confidence - 0.1).astype(int)
    ece = expected_calibration_error(confidence, correct)
    assert ece == pytest.approx(0.1, abs=0.01)
    assert smooth_ece(confidence, correct) == pytest.approx(ece, abs=0.01)


def test_smooth_ece_is_continuous_where_binned_ece_jumps():
    # wrong documents just below a bin edge, right ones just above: binned ECE jumps when a
    # shift of 0.002 puts them in one bin; smooth ECE moves by about that shift
    confidence = np.array([0.599] * 50 + [0.601] * 50)
    correct = np.array([0] * 50 + [1] * 50)
    moved = confidence + 0.002  # 0.601 and 0.603: now in one bin
    jump = expected_calibration_error(confidence, correct) - expected_calibration_error(moved,
                                                                                        correct)
    assert jump == pytest.approx((0.599 + 0.399) / 2 - 0.102, abs=1e-9)  # 0.499 -> 0.102
    assert abs(smooth_ece(confidence, correct) - smooth_ece(moved, correct)) < 0.005
    # and continuous in the bandwidth
    assert abs(smooth_ece(confidence, correct, bandwidth=0.1)
               - smooth_ece(confidence, correct, bandwidth=0.101)) < 0.005


def test_smooth_ece_matches_relplot():
    relplot = pytest.importorskip("relplot")  # the authors' package, when installed
    rng = np.random.default_rng(3)
    for n, shift in ((50, 0.15), (1000, 0.0), (3000, -0.1)):
        confidence = rng.uniform(0.3, 1.0, n)
        correct = (rng.uniform(size=n) < np.clip(confidence - shift, 0, 1)).astype(float)
        assert smooth_ece(confidence, correct) == pytest.approx(
            relplot.smECE(confidence, correct), abs=2e-3)


def test_smooth_ece_bad_bandwidth():
    for bandwidth in (0.0, 1.5, True, "0.1"):
        with pytest.raises(ValueError, match="bandwidth"):
            smooth_ece([0.5], [1], bandwidth=bandwidth)


# -- selective prediction ------------------------------------------------------------------


def test_risk_coverage_and_aurc_hand_example():
    coverage, risk = risk_coverage_curve([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0])
    np.testing.assert_allclose(coverage, [0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(risk, [0, 1 / 2, 1 / 3, 1 / 2])
    assert aurc([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0]) == pytest.approx((1 / 2 + 1 / 3 + 1 / 2) / 4)
    # input order does not matter
    assert aurc([0.6, 0.9, 0.7, 0.8], [0, 1, 1, 0]) == pytest.approx((1 / 2 + 1 / 3 + 1 / 2) / 4)


def test_risk_coverage_ties_count_at_their_average_rate():
    # 0.9 twice (one wrong), then 0.5 right: k=1 and k=2 keep half an error per document
    _, risk = risk_coverage_curve([0.9, 0.5, 0.9], [1, 1, 0])
    np.testing.assert_allclose(risk, [0.5, 0.5, 1 / 3])
    assert aurc([0.9, 0.9, 0.5], [1, 0, 1]) == pytest.approx(4 / 9)
    assert aurc([0.9, 0.9, 0.5], [0, 1, 1]) == pytest.approx(4 / 9)
    # one confidence for all: the ranking says nothing, AURC = error rate
    assert aurc([0.5] * 4, [1, 1, 0, 1]) == pytest.approx(0.25)


def test_aurc_perfect_and_worst_ranking():
    assert aurc([0.9, 0.8, 0.2, 0.1], [1, 1, 0, 0]) == pytest.approx((0 + 0 + 1 / 3 + 1 / 2) / 4)
    assert aurc([0.1, 0.2, 0.8, 0.9], [1, 1, 0, 0]) == pytest.approx((1 + 1 + 2 / 3 + 1 / 2) / 4)
    assert aurc([0.3, 0.6], [1, 1]) == 0.0 and aurc([0.3, 0.6], [0, 0]) == 1.0


def test_accuracy_at_coverage_hand_example():
    confidence, correct = [0.9, 0.8, 0.7, 0.6, 0.5], [1, 1, 0, 1, 0]
    assert accuracy_at_coverage(confidence, correct) == pytest.approx(0.75)  # top 4 of 5
    assert accuracy_at_coverage(confidence, correct, coverage=1.0) == pytest.approx(0.6)
    assert accuracy_at_coverage(confidence, correct, coverage=0.3) == pytest.approx(1.0)  # 2
    # 6 documents: ceil(4.8) = 5 kept; the tie at 0.65 counts at its average (one of two right)
    assert accuracy_at_coverage([0.95, 0.95, 0.85, 0.85, 0.65, 0.65],
                                [1, 1, 1, 0, 0, 1]) == pytest.approx(1 - 1.5 / 5)
    for coverage in (0, 1.5, -0.1, True):
        with pytest.raises(ValueError, match="coverage"):
            accuracy_at_coverage(confidence, correct, coverage=coverage)


@settings(max_examples=30, deadline=None)
@given(documents())
def test_selective_scores_in_range(docs):
    confidence, correct = docs
    coverage, risk = risk_coverage_curve(confidence, correct)
    assert coverage[-1] == 1.0 and risk[-1] == pytest.approx(1 - np.mean(correct))
    assert np.all((risk >= -1e-12) & (risk <= 1 + 1e-12))
    assert 0.0 <= aurc(confidence, correct) <= 1.0
    assert 0.0 <= accuracy_at_coverage(confidence, correct) <= 1.0
    value = smooth_ece(confidence, correct)
    assert 0.0 <= value <= 1.0 and math.isfinite(value)


# -- degenerate and bad input --------------------------------------------------------------


def test_auroc_one_class_warns_and_returns_half():
    with pytest.warns(CalibrationWarning, match="one class"):
        assert auroc([0.2, 0.9, 0.5], [1, 1, 1]) == 0.5
    with pytest.warns(CalibrationWarning):
        assert auroc([0.2], [0]) == 0.5


@pytest.mark.parametrize("score", SCORES)
@pytest.mark.parametrize(
    ("confidence", "correct", "name"),
    [
        ([], [], "confidence is empty"),
        ([0.5, 0.6], [1], "length mismatch"),
        ([0.5, np.nan], [1, 0], "confidence contains NaN"),
        ([0.5, np.inf], [1, 0], "confidence contains NaN or inf"),
        ([0.5, 1.2], [1, 0], r"confidence must lie in \[0, 1\]"),
        ([-0.1, 0.5], [1, 0], r"confidence must lie in \[0, 1\]"),
        ([0.5, 0.6], [1, 2], "correct must contain only 0/1"),
        ([0.5, 0.6], [1, np.nan], "correct contains NaN"),
        ([[0.5, 0.6]], [[1, 0]], "confidence must be 1-dimensional"),
    ],
)
def test_bad_inputs_raise_naming_argument(score, confidence, correct, name):
    with pytest.raises(ValueError, match=name):
        score(confidence, correct)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"n_bins": 0}, "n_bins"), ({"n_bins": 2.5}, "n_bins"), ({"strategy": "equal"}, "strategy")],
)
def test_bad_binning_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        expected_calibration_error([0.5], [1], **kwargs)


def test_correct_accepts_booleans():
    assert brier_score([1.0, 0.0], [True, False]) == 0.0


# -- bootstrap -----------------------------------------------------------------------------


@pytest.mark.parametrize("metric", [brier_score, auroc, expected_calibration_error])
def test_bootstrap_deterministic_per_seed(metric):
    confidence, correct = _data(200)
    first = bootstrap_interval(metric, confidence, correct, n_resamples=200, seed=3)
    again = bootstrap_interval(metric, confidence, correct, n_resamples=200, seed=3)
    other = bootstrap_interval(metric, confidence, correct, n_resamples=200, seed=4)
    assert first == again
    assert first[0] == other[0] and first[1:] != other[1:]
    assert first[0] == pytest.approx(metric(confidence, correct))
    assert first[1] < first[2]


@pytest.mark.parametrize("metric", [brier_score, auroc])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bootstrap_interval_contains_point(metric, seed):
    confidence, correct = _data(300, seed=seed)
    point, low, high = bootstrap_interval(metric, confidence, correct, n_resamples=300, seed=seed)
    assert low <= point <= high
    narrow = bootstrap_interval(metric, confidence, correct, 300, level=0.5, seed=seed)
    assert low <= narrow[1] <= narrow[2] <= high


def test_bootstrap_with_partial_metric():
    confidence, correct = _data(200)
    metric = partial(expected_calibration_error, strategy="quantile")
    point, _, _ = bootstrap_interval(metric, confidence, correct, n_resamples=50)
    assert point == pytest.approx(expected_calibration_error(confidence, correct, 10, "quantile"))


def test_bootstrap_degenerate_resamples_warn_once():
    # 1 wrong among 3: many resamples hold one class only
    with pytest.warns(CalibrationWarning, match="resamples") as record:
        point, low, high = bootstrap_interval(auroc, [0.9, 0.8, 0.1], [1, 1, 0], n_resamples=100)
    assert len([w for w in record if "resamples" in str(w.message)]) == 1
    assert point == 1.0 and 0.5 <= low <= high <= 1.0


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"n_resamples": 0}, "n_resamples"), ({"level": 1.0}, "level"), ({"level": 0}, "level")],
)
def test_bootstrap_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        bootstrap_interval(brier_score, [0.5, 0.6], [1, 0], **kwargs)


def test_paired_bootstrap_identical_confidences():
    confidence, correct = _data(100)
    result = paired_bootstrap_test(brier_score, confidence, confidence, correct, n_resamples=100)
    assert result == {"difference": 0.0, "low": 0.0, "high": 0.0, "p_value": 1.0}


def test_paired_bootstrap_detects_clear_difference():
    confidence, correct = _data(400)
    worse = np.where(correct == 1, confidence * 0.5, np.minimum(1.0, confidence + 0.3))
    result = paired_bootstrap_test(brier_score, worse, confidence, correct, n_resamples=300)
    assert result["difference"] == pytest.approx(
        brier_score(worse, correct) - brier_score(confidence, correct)
    )
    assert 0 < result["low"] <= result["difference"] <= result["high"]
    assert result["p_value"] == 0.0
    swapped = paired_bootstrap_test(brier_score, confidence, worse, correct, n_resamples=300)
    assert swapped["difference"] == pytest.approx(-result["difference"])
    assert swapped["p_value"] == 0.0
    again = paired_bootstrap_test(brier_score, worse, confidence, correct, n_resamples=300)
    assert again == result


def test_paired_bootstrap_no_difference_has_large_p_value():
    rng = np.random.default_rng(5)
    correct = rng.integers(0, 2, 300)
    a, b = rng.uniform(0, 1, 300), rng.uniform(0, 1, 300)
    result = paired_bootstrap_test(brier_score, a, b, correct, n_resamples=500)
    assert result["low"] < 0 < result["high"]
    assert 0.05 < result["p_value"] <= 1.0


@pytest.mark.parametrize("metric", [expected_calibration_error, brier_score, auroc,
                                    partial(expected_calibration_error, n_bins=15)])
def test_bootstrap_one_pass_equals_one_call_per_resample(metric):
    """ECE (equal-width bins), Brier and AUROC are computed on every resample at once; a wrapper
    the bootstrap does not recognise is called once per resample: the same numbers, bit for
    bit, from the same seeded index matrix (ties and one-class resamples included)."""
    rng = np.random.default_rng(11)
    confidence = np.round(rng.uniform(0, 1, 40) * 20) / 20  # 5% steps: ties, 1.0 included
    correct = (rng.random(40) < 0.8).astype(float)

    def wrapped(c, y):
        return metric(c, y)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        assert bootstrap_interval(metric, confidence, correct, 300, seed=2) == \
            bootstrap_interval(wrapped, confidence, correct, 300, seed=2)
        other = np.clip(confidence + rng.normal(0, 0.1, 40), 0, 1)
        assert paired_bootstrap_test(metric, confidence, other, correct, 300, seed=2) == \
            paired_bootstrap_test(wrapped, confidence, other, correct, 300, seed=2)
    few = ([0.9, 0.8, 0.1], [1, 1, 0])  # many one-class resamples: counted alike in both paths
    with pytest.warns(CalibrationWarning) as fast:
        bootstrap_interval(auroc, *few, n_resamples=100)
    with pytest.warns(CalibrationWarning) as slow:
        bootstrap_interval(lambda c, y: auroc(c, y), *few, n_resamples=100)
    assert [str(w.message) for w in fast] == [str(w.message) for w in slow]


def test_paired_bootstrap_scores_each_method_on_its_own_correctness():
    """Two methods that predict differently: both resampled with the same indices, each scored
    on its own correctness."""
    confidence, correct = _data(200)
    other = np.clip(confidence[::-1] + 0.05, 0, 1)
    flipped = correct.copy()
    flipped[:30] = 1 - flipped[:30]
    result = paired_bootstrap_test(brier_score, confidence, other, correct, 200, seed=4,
                                   correct_b=flipped)
    indices = np.random.default_rng(4).integers(0, 200, size=(200, 200))
    values = [brier_score(confidence[i], correct[i]) - brier_score(other[i], flipped[i])
              for i in indices]
    low, high = np.quantile(values, [0.025, 0.975])
    assert result["difference"] == pytest.approx(brier_score(confidence, correct)
                                                 - brier_score(other, flipped))
    assert (result["low"], result["high"]) == pytest.approx((low, high), rel=1e-12)
    with pytest.raises(ValueError, match="correct_b"):
        paired_bootstrap_test(brier_score, confidence, other, correct, correct_b=flipped[:10])


def test_paired_bootstrap_length_mismatch():
    with pytest.raises(ValueError, match="confidence_b"):
        paired_bootstrap_test(brier_score, [0.5, 0.6], [0.5], [1, 0])


def test_library_imports_only_numpy_and_scipy():
    code = (
        "import sys, calidist_metrics\n"
        "bad = [m for m in ('torch', 'lm_eval', 'sklearn', 'transformers') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_reliability_bins_is_frozen():
    bins = reliability_bins([0.5], [1])
    with pytest.raises(dataclasses.FrozenInstanceError):
        bins.counts = np.zeros(10)


def test_public_functions_and_estimators_have_numpydoc_sections():
    """Every public function of calidist_metrics, and every estimator with its public methods,
    documents its parameters or returns in numpydoc sections."""
    import inspect

    import calidist_metrics

    lacking = []
    for name in calidist_metrics.__all__:
        obj = getattr(calidist_metrics, name)
        if inspect.isclass(obj) and (issubclass(obj, Exception) or name in (
                "Calibrator", "ReliabilityBins")):
            continue  # a warning, an error, the protocol, a result record
        owners = [(name, obj)]
        if inspect.isclass(obj):
            owners += [(f"{name}.{k}", v) for k, v in vars(obj).items()
                       if not k.startswith("_") and inspect.isfunction(v)]
        for label, member in owners:
            if not callable(member):
                continue
            doc = inspect.getdoc(member) or ""
            if not any(f"{section}\n{'-' * len(section)}" in doc
                       for section in ("Parameters", "Returns", "Attributes")):
                lacking.append(label)
    assert not lacking, lacking
