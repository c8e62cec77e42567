"""BehaviourCalibrator: logistic regression of correctness on logit(p), mu and delta."""

import warnings

import numpy as np
import pytest

from calidist_metrics import (
    BEHAVIOUR_COLUMNS,
    BehaviourCalibrator,
    CalibrationWarning,
    NotFittedError,
    brier_score,
    calibrator_from_dict,
    load_calibrator,
    save_calibrator,
    stack_columns,
)


def _x(confidence, mu, delta):
    """BehaviourCalibrator's X of these confidences, mu and delta."""
    return stack_columns(BEHAVIOUR_COLUMNS, confidence=confidence, mu=mu, delta=delta)


def _documents(n, seed):
    """Correctness driven by stability under distractors, not by the (overconfident) p."""
    rng = np.random.default_rng(seed)
    confidence = rng.uniform(0.6, 1.0, n)
    stable = rng.uniform(size=n)
    mu = (1 - stable) * rng.uniform(0, 0.8, n)
    delta = (1 - stable) * rng.uniform(0, 0.5, n)
    correct = (rng.uniform(size=n) < 0.1 + 0.85 * stable).astype(int)
    return confidence, mu, delta, correct


def test_fit_beats_vanilla_on_held_out_documents_and_weights_instability_negatively():
    p, mu, delta, y = _documents(400, seed=0)
    p_test, mu_test, delta_test, y_test = _documents(400, seed=1)
    calibrator = BehaviourCalibrator().fit(_x(p, mu, delta), y)
    calibrated = calibrator.predict(_x(p_test, mu_test, delta_test))
    assert brier_score(calibrated, y_test) < brier_score(p_test, y_test) - 0.05
    assert calibrator.coef_[1] < 0 and calibrator.coef_[2] < 0  # unstable -> less confident
    assert np.all((calibrated > 0) & (calibrated < 1))


def test_intercept_first_order_condition_mean_confidence_equals_smoothed_accuracy():
    # The intercept is not penalised, so at the optimum the mean calibrated confidence on the
    # calibration set equals the mean of Platt's smoothed targets.
    p, mu, delta, y = _documents(300, seed=2)
    calibrator = BehaviourCalibrator(l2=0.1).fit(_x(p, mu, delta), y)
    n_pos, n_neg = y.sum(), y.size - y.sum()
    target = np.where(y == 1, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    assert calibrator.predict(_x(p, mu, delta)).mean() == pytest.approx(target.mean(), abs=1e-4)


def test_stronger_l2_shrinks_the_weights():
    p, mu, delta, y = _documents(300, seed=3)
    weak = BehaviourCalibrator(l2=1e-4).fit(_x(p, mu, delta), y)
    strong = BehaviourCalibrator(l2=10.0).fit(_x(p, mu, delta), y)
    assert np.linalg.norm(strong.coef_) < 0.2 * np.linalg.norm(weak.coef_)


def test_json_round_trip_gives_identical_predictions(tmp_path):
    p, mu, delta, y = _documents(100, seed=4)
    calibrator = BehaviourCalibrator().fit(_x(p, mu, delta), y)
    path = save_calibrator(calibrator, tmp_path / "fit.json", task="t")
    loaded, context = load_calibrator(path)
    assert isinstance(loaded, BehaviourCalibrator) and context == {"task": "t"}
    X = _x(p, mu, delta)
    np.testing.assert_array_equal(loaded.predict(X), calibrator.predict(X))
    again = calibrator_from_dict(calibrator.to_dict())
    np.testing.assert_array_equal(again.coef_, calibrator.coef_)


@pytest.mark.parametrize(
    ("change", "message"),
    [({"coef": [1.0, 2.0]}, "'coef'"), ({"scale": [1.0, 0.0, 1.0]}, "'scale'"),
     ({"kind": "platt"}, "'kind'"), ({"intercept": None}, "'intercept'")],
)
def test_from_dict_names_the_bad_field(change, message):
    p, mu, delta, y = _documents(50, seed=5)
    state = {**BehaviourCalibrator().fit(_x(p, mu, delta), y).to_dict(), **change}
    with pytest.raises(ValueError, match=message):
        BehaviourCalibrator.from_dict(state)


def test_all_correct_set_warns_and_stays_finite_and_confident():
    p, mu, delta, _ = _documents(40, seed=6)
    with pytest.warns(CalibrationWarning, match="all-correct"):
        calibrator = BehaviourCalibrator().fit(_x(p, mu, delta), np.ones(40))
    calibrated = calibrator.predict(_x(p, mu, delta))
    assert np.all(np.isfinite(calibrated)) and calibrated.min() > 0.9


def test_constant_feature_and_tiny_set():
    # delta == 0 everywhere: the feature keeps scale 1 and carries no weight.
    p = np.array([0.9, 0.8, 0.7, 0.95])
    with pytest.warns(CalibrationWarning, match="only 4"):
        calibrator = BehaviourCalibrator().fit(_x(p, [0, 0.5, 0.2, 0], np.zeros(4)),
                                               [1, 0, 0, 1])
    assert calibrator.scale_[2] == 1.0 and calibrator.coef_[2] == pytest.approx(0.0, abs=1e-8)


def test_invalid_inputs_and_unfitted_use():
    with pytest.raises(NotFittedError):
        BehaviourCalibrator().predict(_x([0.9], [0.1], [0.1]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        with pytest.raises(ValueError, match=r"X\[:, 1\] \(mu\) must lie in"):
            BehaviourCalibrator().fit(_x([0.9, 0.8], [1.5, 0.0], [0.1, 0.1]), [1, 0])
        with pytest.raises(ValueError, match=r"X\[:, 2\] \(delta\) must be >= 0"):
            BehaviourCalibrator().fit(_x([0.9, 0.8], [0.1, 0.0], [-0.1, 0.1]), [1, 0])
        with pytest.raises(ValueError, match="length mismatch: X=2, y=1"):
            BehaviourCalibrator().fit(_x([0.9, 0.8], [0.1, 0.0], [0.1, 0.1]), [1])
        with pytest.raises(ValueError, match=r"X must have shape \(n, 3\), columns confidence, "
                                             "mu, delta"):
            BehaviourCalibrator().fit([[0.9, 0.1], [0.8, 0.0]], [1, 0])
