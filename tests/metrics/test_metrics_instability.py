"""Per-document instability measures: hand examples, batch use, input checks."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calidist_metrics import confidence_instability, prediction_instability, reliability_score


def test_prediction_instability_hand_example():
    # flips at j = 1 (p' = 0.8) and j = 3 (p' = 0.6): (0.8 + 0.6) / 4
    mu = prediction_instability(2, [2, 0, 2, 1], [0.9, 0.8, 0.7, 0.6])
    assert mu == pytest.approx(0.35)
    assert isinstance(mu, float)
    assert prediction_instability(1, [1, 1], [0.9, 0.2]) == 0.0
    assert prediction_instability(1, [0, 2], [1.0, 1.0]) == 1.0


def test_prediction_instability_letters_and_numeric_answers():
    assert prediction_instability("A", ["A", "B", "C"], [0.5, 0.6, 0.7]) == pytest.approx(1.3 / 3)
    # open-ended answers (GSM8K): numeric equality, 42 == 42.0
    assert prediction_instability(42.0, [42, 41.5], [0.5, 0.6]) == pytest.approx(0.3)


def test_confidence_instability_modes():
    assert confidence_instability(0.9, [0.4, 0.6]) == pytest.approx(0.4)
    assert confidence_instability(0.3, [0.4, 0.6]) == pytest.approx(0.2)  # absolute value
    assert confidence_instability(0.9, [0.4, 0.6], mode="worst_case") == pytest.approx(0.5)
    assert confidence_instability(0.3, [0.4, 0.6], mode="worst_case") == 0.0  # no drop


def test_reliability_score_formula():
    assert reliability_score(0.1, 0.5) == pytest.approx(0.9 / (0.5 + 1e-10))
    assert reliability_score(0.0, 0.0) == pytest.approx(1e10)
    assert reliability_score(1.0, 0.3) == 0.0
    assert reliability_score(0.5, 0.0, epsilon=0.5) == pytest.approx(1.0)


def test_batch_matches_per_document():
    rng = np.random.default_rng(0)
    n, k = 20, 6
    original_pred = rng.integers(0, 3, n)
    original_conf = rng.uniform(0.3, 1, n)
    preds = rng.integers(0, 3, (n, k))
    confs = rng.uniform(0.3, 1, (n, k))
    mu = prediction_instability(original_pred, preds, confs)
    delta = confidence_instability(original_conf, confs)
    worst = confidence_instability(original_conf, confs, mode="worst_case")
    lam = reliability_score(mu, delta)
    assert mu.shape == delta.shape == lam.shape == (n,)
    for i in range(n):
        assert mu[i] == pytest.approx(prediction_instability(original_pred[i], preds[i], confs[i]))
        assert delta[i] == pytest.approx(confidence_instability(original_conf[i], confs[i]))
        assert worst[i] == pytest.approx(
            confidence_instability(original_conf[i], confs[i], mode="worst_case")
        )
        assert lam[i] == pytest.approx(reliability_score(mu[i], delta[i]))


# original prediction, (prediction, confidence) per distracted prompt, original confidence
ONE_DOCUMENT = (
    st.integers(0, 3),
    st.lists(st.tuples(st.integers(0, 3), st.floats(0, 1)), min_size=1, max_size=12),
    st.floats(0, 1),
)


@settings(max_examples=30, deadline=None)
@given(*ONE_DOCUMENT)
def test_ranges(original_pred, distracted, original_conf):
    preds = [d[0] for d in distracted]
    confs = [d[1] for d in distracted]
    mu = prediction_instability(original_pred, preds, confs)
    delta = confidence_instability(original_conf, confs)
    worst = confidence_instability(original_conf, confs, mode="worst_case")
    assert 0.0 <= mu <= 1.0
    assert 0.0 <= delta <= 1.0
    assert 0.0 <= worst <= 1.0
    assert worst >= max(0.0, original_conf - np.mean(confs)) - 1e-12
    lam = reliability_score(mu, delta)
    assert np.isfinite(lam) and lam >= 0.0


@settings(max_examples=40, deadline=None)
@given(*ONE_DOCUMENT)
def test_plain_python_path_equals_numpy_path(original_pred, distracted, original_conf):
    # lists of Python numbers take the pure-Python per-document path, arrays take numpy's
    preds = [d[0] for d in distracted]
    confs = [d[1] for d in distracted]
    arrays = np.array(preds), np.array(confs)
    mu = prediction_instability(original_pred, preds, confs)
    assert mu == pytest.approx(prediction_instability(np.int64(original_pred), *arrays), abs=1e-15)
    for mode in ("mean", "worst_case"):
        assert confidence_instability(original_conf, confs, mode=mode) == pytest.approx(
            confidence_instability(np.float64(original_conf), arrays[1], mode=mode), abs=1e-15)
    delta = confidence_instability(original_conf, confs)
    assert reliability_score(mu, delta) == pytest.approx(
        reliability_score(np.float64(mu), np.float64(delta)), rel=1e-12)
    assert all(isinstance(v, float) for v in (mu, delta, reliability_score(mu, delta)))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: prediction_instability(0, [], []), "k == 0"),
        (lambda: confidence_instability(0.5, []), "k == 0"),
        (lambda: prediction_instability(0, [1, 2], [0.5]), "length mismatch"),
        (lambda: prediction_instability(0, [1], [1.5]), "distracted_confidences"),
        (lambda: prediction_instability(0, [1], [np.nan]), "distracted_confidences"),
        (lambda: prediction_instability(0, [1], [float("nan")]), "distracted_confidences"),
        (lambda: prediction_instability(0, [1, 2], [0.5, -0.1]), "distracted_confidences"),
        (lambda: confidence_instability(float("nan"), [0.5]), "original_confidence"),
        (lambda: confidence_instability(0.5, [0.5, 1.5]), "distracted_confidences"),
        (lambda: reliability_score(0.5, float("nan")), "confidence_instability"),
        (lambda: prediction_instability(np.nan, [1], [0.5]), "original_prediction"),
        (lambda: prediction_instability(0, 1, 0.5), "distracted_predictions"),
        (lambda: confidence_instability(1.2, [0.5]), "original_confidence"),
        (lambda: confidence_instability(0.5, [0.5], mode="max"), "mode"),
        (lambda: confidence_instability([0.5, 0.6, 0.7], [[0.5], [0.4]]), "original_confidence"),
        (lambda: prediction_instability([0, 1, 2], [[0], [1]], [[0.5], [0.4]]),
         "original_prediction of shape"),
        (lambda: prediction_instability([0, 1], [1, 2], [0.5, 0.4]), "original_prediction"),
        (lambda: confidence_instability([0.5, 0.6], [0.5, 0.4]), "original_confidence"),
        (lambda: reliability_score(1.5, 0.1), "prediction_instability"),
        (lambda: reliability_score(0.5, -0.1), "confidence_instability"),
        (lambda: reliability_score(0.5, np.inf), "confidence_instability"),
        (lambda: reliability_score(0.5, 0.1, epsilon=0), "epsilon"),
        (lambda: reliability_score([0.5, 0.2], [0.1, 0.2, 0.3]), "broadcast"),
    ],
)
def test_bad_inputs_raise(call, message):
    with pytest.raises(ValueError, match=message):
        call()
