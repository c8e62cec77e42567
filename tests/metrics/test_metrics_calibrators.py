"""Calibrators: the paper's worked cases, CaliDist properties, baselines vs scikit-learn, JSON."""

import inspect
import json
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import calidist_metrics
from calidist_metrics import (
    BEHAVIOUR_COLUMNS,
    CALIDIST_COLUMNS,
    CalibrationWarning,
    CaliDistCalibrator,
    IsotonicCalibration,
    NotFittedError,
    PlattScaling,
    TemperatureScaling,
    VectorScaling,
    brier_score,
    calibrator_from_dict,
    confidence_instability,
    load_calibrator,
    prediction_instability,
    reliability_score,
    reliability_sigmoid,
    save_calibrator,
    stack_columns,
)


def _calidist_data(n=200, seed=0):
    """Documents whose correctness depends on a reliability signal (lambda_raw heavy-tailed)."""
    rng = np.random.default_rng(seed)
    confidence = rng.uniform(0.4, 1.0, n)
    stable = rng.uniform(size=n)
    mu = (1 - stable) * rng.uniform(0, 0.6, n)
    delta = (1 - stable) * rng.uniform(0, 0.5, n) + 1e-4
    raw = reliability_score(mu, delta)
    correct = (rng.uniform(size=n) < 0.2 + 0.75 * stable).astype(int)
    return raw, confidence, correct


def _x(raw, confidence):
    """CaliDistCalibrator's X of these lambda_raw and confidences."""
    return stack_columns(CALIDIST_COLUMNS, lambda_raw=raw, confidence=confidence)


def _fit_quietly(calibrator, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        return calibrator.fit(X, y)


# -- paper Appendix C: three worked cases with alpha = 2, beta = 1 ------------------------------

# Each case is built from distracted predictions, so mu and delta come from our functions.
# (p, original prediction, distracted predictions, distracted confidences, expected conf)
APPENDIX_C = {
    # overconfident but unstable: mu = 0.95, mean p' = 0.95 -> lambda ~ 1.0, conf ~ 0.24
    "case1": (0.9, 0, [1, 2, 1, 2], [0.95] * 4, 0.24),
    # robust and stable: mu = 0.05 (one flip of 18 at p' = 0.9), delta = 0 -> conf ~ 0.90
    "case2": (0.9, 0, [1] + [0] * 17, [0.9] * 18, 0.90),
    # shaken but stubborn: mu = 0.1 (one flip of 4 at p' = 0.4), delta = 0.5 -> conf ~ 0.41
    "case3": (0.9, 0, [1, 0, 0, 0], [0.4] * 4, 0.41),
}


@pytest.mark.parametrize("case", sorted(APPENDIX_C))
def test_appendix_c_cases_through_sigmoid(case):
    p, pred, preds, confs, expected = APPENDIX_C[case]
    mu = prediction_instability(pred, preds, confs)
    delta = confidence_instability(p, confs)
    raw = reliability_score(mu, delta)
    # The appendix plugs lambda_raw into the sigmoid directly, without min-max scaling.
    assert round(reliability_sigmoid(raw, 2.0, 1.0) * p, 2) == expected


@pytest.mark.parametrize("case", sorted(APPENDIX_C))
def test_appendix_c_cases_through_calibrator(case):
    p, pred, preds, confs, expected = APPENDIX_C[case]
    raw = reliability_score(prediction_instability(pred, preds, confs),
                            confidence_instability(p, confs))
    # Bounds [0, 10] make lambda = clip(lambda_raw, 0, 10): equal to lambda_raw for cases 1
    # and 3, and 10 for case 2 (lambda_raw -> infinity), where sigmoid(8) ~ 1 as in the paper.
    calibrator = CaliDistCalibrator.from_dict({
        "kind": "calidist", "lambda_scale": "minmax", "alpha": 2.0, "beta": 1.0,
        "lambda_min": 0.0, "lambda_max": 10.0,
    })
    assert round(float(calibrator.predict(_x([raw], [p]))[0]), 2) == expected


def test_appendix_c_intermediate_values():
    assert reliability_score(0.95, confidence_instability(0.9, [0.95])) == pytest.approx(1.0)
    assert reliability_sigmoid(1.0, 2.0, 1.0) == pytest.approx(0.27, abs=0.005)
    assert reliability_sigmoid(1.8, 2.0, 1.0) == pytest.approx(0.45, abs=0.005)


# -- CaliDist fit ----------------------------------------------------------------------------


@pytest.mark.parametrize("scale", ["minmax", "log", "rank"])
def test_calidist_fit_improves_brier_and_keeps_bounds(scale):
    raw, confidence, correct = _calidist_data()
    calibrator = _fit_quietly(CaliDistCalibrator(lambda_scale=scale), _x(raw, confidence),
                              correct)
    calibrated = calibrator.predict(_x(raw, confidence))
    assert calibrator.calibration_brier_ == pytest.approx(brier_score(calibrated, correct))
    assert calibrator.calibration_brier_ < brier_score(confidence, correct) - 0.01
    assert calibrator.lambda_min_ == raw.min() and calibrator.lambda_max_ == raw.max()
    assert calibrator.n_calibration_ == 200
    assert -5 <= calibrator.alpha_ <= 5 and 0.1 <= calibrator.beta_ <= 5
    lam = calibrator.scaled_reliability(raw)
    assert lam.min() >= 0 and lam.max() <= 10
    if scale == "rank":
        np.testing.assert_array_equal(calibrator.rank_reference_, np.sort(raw))
        assert lam.max() == 10.0
    else:
        assert lam.min() == 0.0 and lam.max() == 10.0


def test_calidist_minmax_squeezes_heavy_tail_log_and_rank_spread():
    raw, confidence, correct = _calidist_data()
    lam = {
        scale: _fit_quietly(CaliDistCalibrator(lambda_scale=scale), _x(raw, confidence),
                            correct).scaled_reliability(raw)
        for scale in ("minmax", "log", "rank")
    }
    assert np.median(lam["minmax"]) < 1.0  # the paper's Eq. 4: most documents below 1 of 10
    assert np.median(lam["log"]) > 2.0
    assert np.median(lam["rank"]) == pytest.approx(5.0, abs=0.1)


def test_calidist_new_documents_are_clipped():
    raw, confidence, correct = _calidist_data()
    calibrator = _fit_quietly(CaliDistCalibrator(), _x(raw, confidence), correct)
    lam = calibrator.scaled_reliability([raw.min() - 5, raw.max() * 10, 0.0])
    np.testing.assert_array_equal(lam, [0.0, 10.0, 0.0])
    rank = _fit_quietly(CaliDistCalibrator(lambda_scale="rank"), _x(raw, confidence), correct)
    np.testing.assert_array_equal(rank.scaled_reliability([-1.0, 1e12]), [0.0, 10.0])


def test_calidist_refine_never_worse_than_grid():
    raw, confidence, correct = _calidist_data(seed=1)
    grid = _fit_quietly(CaliDistCalibrator(), _x(raw, confidence), correct)
    refined = _fit_quietly(CaliDistCalibrator(method="refine"), _x(raw, confidence), correct)
    assert grid.method == "grid"  # the paper's search alone by default
    assert refined.calibration_brier_ <= grid.calibration_brier_
    alphas, betas = np.linspace(-5, 5, 100), np.linspace(0.1, 5, 100)
    assert grid.alpha_ in alphas and grid.beta_ in betas


def test_calidist_grid_matches_brute_force():
    raw, confidence, correct = _calidist_data(n=60, seed=2)
    alphas, betas = np.linspace(-5, 5, 11), np.linspace(0.5, 3, 6)
    calibrator = _fit_quietly(
        CaliDistCalibrator(alpha_grid=alphas, beta_grid=betas, method="grid"),
        _x(raw, confidence), correct,
    )
    lam = calibrator.scaled_reliability(raw)
    losses = {
        (a, b): brier_score(reliability_sigmoid(lam, a, b) * confidence, correct)
        for a in alphas for b in betas
    }
    best = min(losses, key=losses.get)
    assert (calibrator.alpha_, calibrator.beta_) == pytest.approx(best)
    assert calibrator.calibration_brier_ == pytest.approx(losses[best])


@st.composite
def calibration_sets(draw):
    n = draw(st.integers(1, 30))
    confidence = np.array(draw(st.lists(st.floats(0, 1), min_size=n, max_size=n)))
    correct = np.array(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    raw = np.array(draw(st.lists(
        st.one_of(st.floats(0, 100), st.just(1e10), st.just(0.0)), min_size=n, max_size=n,
    )))
    return raw, confidence, correct


@settings(max_examples=20, deadline=None)
@given(calibration_sets(), st.sampled_from(["minmax", "log", "rank"]),
       st.sampled_from(["grid", "refine", "default_sigmoid"]))
def test_calidist_properties(data, scale, method):
    raw, confidence, correct = data
    calibrator = _fit_quietly(CaliDistCalibrator(lambda_scale=scale, method=method),
                              _x(raw, confidence), correct)
    calibrated = calibrator.predict(_x(raw, confidence))
    # calibrated confidence lies in [0, p] for every document
    assert np.all(np.isfinite(calibrated))
    assert np.all(calibrated >= 0) and np.all(calibrated <= confidence)
    lam = calibrator.scaled_reliability(raw)
    untuned = brier_score(reliability_sigmoid(lam, 0.0, 1.0) * confidence, correct)
    if method == "default_sigmoid":
        assert (calibrator.alpha_, calibrator.beta_) == (0.0, 1.0)
        assert not calibrator.grid_edge_
    else:
        # never higher (up to sigmoid(25) ~ 1 - 1e-11 at alpha = -5, beta = 5) than the
        # uncalibrated p; refine is also never worse than alpha = 0, beta = 1 at the same bounds
        assert calibrator.calibration_brier_ <= brier_score(confidence, correct) + 1e-9
    if method == "refine":
        assert calibrator.calibration_brier_ <= untuned + 1e-12
    if method == "grid":
        assert calibrator.alpha_ in np.linspace(-5, 5, 100)
        assert calibrator.beta_ in np.linspace(0.1, 5, 100)
    assert calibrator.calibration_brier_ == pytest.approx(brier_score(calibrated, correct))
    # JSON round trip gives identical predictions
    restored = calibrator_from_dict(json.loads(json.dumps(calibrator.to_dict())))
    assert restored.method == method
    np.testing.assert_array_equal(restored.predict(_x(raw, confidence)), calibrated)
    new_raw = np.array([0.0, 0.5, 3.0, 1e3, 1e10])
    new = _x(new_raw, np.full(5, 0.8))
    np.testing.assert_array_equal(restored.predict(new), calibrator.predict(new))


# -- CaliDist degenerate cases -------------------------------------------------------------


def test_calidist_constant_reliability_sets_lambda_to_midpoint():
    raw, confidence, correct = np.full(20, 3.0), np.linspace(0.5, 1, 20), np.arange(20) % 2
    with pytest.warns(CalibrationWarning, match="5.0"):
        calibrator = CaliDistCalibrator().fit(_x(raw, confidence), correct)
    np.testing.assert_array_equal(calibrator.scaled_reliability([0.0, 3.0, 100.0]), [5.0] * 3)
    factor = calibrator.predict(_x(raw, confidence)) / confidence
    assert np.all(np.isfinite(factor)) and np.ptp(factor) < 1e-12
    # the best constant factor s minimises sum (s p - y)^2: s = sum(p y) / sum(p^2)
    best = np.sum(confidence * correct) / np.sum(confidence**2)
    assert factor[0] == pytest.approx(best, abs=1e-4)


@pytest.mark.parametrize("label", [0, 1])
def test_calidist_one_class_warns_and_fits(label):
    raw, confidence, _ = _calidist_data(n=50)
    correct = np.full(50, label)
    with pytest.warns(CalibrationWarning) as record:
        calibrator = CaliDistCalibrator().fit(_x(raw, confidence), correct)
    messages = " ".join(str(w.message) for w in record)
    assert ("all-correct" if label else "all-wrong") in messages
    # all correct: the identity (alpha -5, beta 5); all wrong: the smallest factor (alpha 5)
    assert ("alpha=-5 at the lower edge" if label else "alpha=5 at the upper edge") in messages
    calibrated = calibrator.predict(_x(raw, confidence))
    assert np.all(np.isfinite(calibrated))
    if label == 1:  # all correct: keep confidences as high as the grid allows
        assert calibrator.calibration_brier_ <= brier_score(confidence, correct) + 1e-9
        assert np.all(calibrated > 0.99 * confidence)
    else:  # all wrong: shrink as much as the grid allows
        assert calibrator.calibration_brier_ < 0.5 * brier_score(confidence, correct)


def test_calidist_tiny_calibration_set_warns():
    with pytest.warns(CalibrationWarning) as record:
        calibrator = CaliDistCalibrator().fit(_x([1.0, 2.0, 3.0], [0.9, 0.8, 0.7]), [1, 0, 1])
    assert any("only 3 calibration documents" in str(w.message) for w in record)
    assert np.all(np.isfinite(calibrator.predict(_x([1.5], [0.9]))))


def test_calidist_single_document():
    with pytest.warns(CalibrationWarning) as record:
        calibrator = CaliDistCalibrator().fit(_x([2.0], [0.9]), [1])
    messages = " ".join(str(w.message) for w in record)
    assert "only 1 calibration" in messages and "5.0" in messages and "all-correct" in messages
    assert 0 <= calibrator.predict(_x([2.0], [0.9]))[0] <= 0.9


def test_calidist_grid_edge_warns_with_edge_name():
    raw, confidence, _ = _calidist_data(n=80)
    correct = np.zeros(80, dtype=int)  # all wrong: smallest factor needs alpha at its top edge
    with pytest.warns(CalibrationWarning) as record:
        calibrator = CaliDistCalibrator().fit(_x(raw, confidence), correct)
    edge = [str(w.message) for w in record if "grid edge" in str(w.message)]
    assert len(edge) == 1 and "alpha=5 at the upper edge 5" in edge[0]
    assert calibrator.grid_edge_ is True
    assert calibrator.to_dict()["grid_edge"] is True


def test_calidist_interior_fit_has_no_edge_warning():
    rng = np.random.default_rng(3)
    lam_true = rng.uniform(0, 10, 400)
    raw = lam_true.copy()
    raw[0], raw[1] = 0.0, 10.0  # min-max bounds [0, 10]: lambda = raw
    confidence = np.full(400, 0.9)
    correct = (rng.uniform(size=400) < 0.9 / (1 + np.exp(-1.5 * (raw - 4)))).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CalibrationWarning)
        calibrator = CaliDistCalibrator().fit(_x(raw, confidence), correct)
    assert calibrator.grid_edge_ is False
    assert calibrator.alpha_ == pytest.approx(4, abs=1.0)
    assert calibrator.beta_ == pytest.approx(1.5, abs=1.0)


GOOD_X = [[1.0, 0.5], [2.0, 0.5]]


@pytest.mark.parametrize(
    ("X", "y", "kwargs", "message"),
    [
        (np.empty((0, 2)), [], {}, r"X\[:, 0\] \(lambda_raw\) is empty"),
        ([[1.0, 0.5, 0.1], [2.0, 0.5, 0.1]], [1, 0], {}, r"X must have shape \(n, 2\)"),
        (GOOD_X, [1], {}, "length mismatch: X=2, y=1"),
        ([[1.0, 0.5], [np.nan, 0.5]], [1, 0], {},
         r"X\[:, 0\] \(lambda_raw\) contains NaN"),
        ([[1.0, 0.5], [np.inf, 0.5]], [1, 0], {}, r"X\[:, 0\] \(lambda_raw\)"),
        ([[1.0, 0.5], [2.0, 1.5]], [1, 0], {}, r"X\[:, 1\] \(confidence\) must lie in"),
        ([["a", 0.5], [2.0, 0.5]], [1, 0], {}, "X must be numeric"),
        (GOOD_X, [1, 3], {}, r"y \(correct\) must contain only 0/1"),
        (GOOD_X, [1, 0], {"lambda_scale": "sqrt"}, "lambda_scale"),
        (GOOD_X, [1, 0], {"beta_grid": [0.0, 1.0]}, "beta_grid"),
        (GOOD_X, [1, 0], {"alpha_grid": []}, "alpha_grid is empty"),
        (GOOD_X, [1, 0], {"method": "lbfgs"}, "method must be one of"),
    ],
)
def test_calidist_bad_inputs(X, y, kwargs, message):
    with pytest.raises(ValueError, match=message):
        CaliDistCalibrator(**kwargs).fit(X, y)


def test_calidist_predict_checks_inputs():
    raw, confidence, correct = _calidist_data(n=30)
    calibrator = _fit_quietly(CaliDistCalibrator(), _x(raw, confidence), correct)
    with pytest.raises(ValueError, match=r"X must have shape \(n, 2\)"):
        calibrator.predict([1.0, 2.0])
    with pytest.raises(ValueError, match=r"X\[:, 1\] \(confidence\) must lie in"):
        calibrator.predict(_x([1.0], [2.0]))


# -- unfitted and JSON -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("calibrator", "call"),
    [
        (CaliDistCalibrator(), lambda c: c.predict(_x([1.0], [0.5]))),
        (TemperatureScaling(), lambda c: c.predict_proba([[1.0, 0.0]])),
        (VectorScaling(), lambda c: c.predict_proba([[1.0, 0.0]])),
        (PlattScaling(), lambda c: c.predict([0.5])),
        (IsotonicCalibration(), lambda c: c.predict([0.5])),
        (IsotonicCalibration(), lambda c: c.to_dict()),
    ],
)
def test_unfitted_raises(calibrator, call):
    with pytest.raises(NotFittedError, match="not fitted"):
        call(calibrator)


def _fitted_calibrators():
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 2, (100, 3))
    labels = np.array([rng.choice(3, p=row) for row in _softmax(logits)])
    confidence = rng.uniform(0.3, 1, 100)
    correct = (rng.uniform(size=100) < confidence).astype(int)
    raw = np.exp(rng.normal(0, 2, 100))
    return [
        (_fit_quietly(CaliDistCalibrator(lambda_scale="rank"), _x(raw, confidence), correct),
         lambda c: c.predict(_x(raw, confidence))),
        (_fit_quietly(CaliDistCalibrator(lambda_scale="log"), _x(raw, confidence), correct),
         lambda c: c.predict(_x(raw, confidence))),
        (TemperatureScaling().fit(logits, labels), lambda c: c.predict_proba(logits)),
        (VectorScaling().fit(logits, labels), lambda c: c.predict_proba(logits)),
        (PlattScaling().fit(confidence, correct), lambda c: c.predict(confidence)),
        (IsotonicCalibration().fit(confidence, correct), lambda c: c.predict(confidence)),
    ]


@pytest.mark.parametrize("index", range(6))
def test_json_round_trip_via_file(tmp_path, index):
    calibrator, predict = _fitted_calibrators()[index]
    path = save_calibrator(calibrator, tmp_path / "cal.json", task="calidist_mnli_assertion",
                           labels=["A", "B", "C"], model="tiny")
    payload = json.loads(path.read_text())
    assert payload["calibrator"]["kind"] == calibrator.kind
    loaded, context = load_calibrator(path)
    assert type(loaded) is type(calibrator)
    assert context == {"task": "calidist_mnli_assertion", "labels": ["A", "B", "C"],
                       "model": "tiny"}
    np.testing.assert_array_equal(predict(loaded), predict(calibrator))
    assert loaded.to_dict() == calibrator.to_dict()


def test_calidist_to_dict_fields():
    calibrator = _fitted_calibrators()[0][0]
    d = calibrator.to_dict()
    assert d["kind"] == "calidist" and d["lambda_scale"] == "rank"
    assert len(d["rank_reference"]) == d["n_calibration"] == 100
    for key in ("alpha", "beta", "lambda_min", "lambda_max", "calibration_brier", "grid_edge"):
        assert key in d
    assert d["method"] == "grid" and "refine" not in d
    json.dumps(d, allow_nan=False)


@pytest.mark.parametrize(
    ("d", "message"),
    [
        ({"lambda_scale": "minmax"}, "missing field 'kind'"),
        ({"kind": "platt", "coef": 1.0}, "missing field 'intercept'"),
        ({"kind": "platt", "coef": "x", "intercept": 0.0}, "invalid field 'coef'"),
        ({"kind": "mystery"}, "invalid field 'kind'"),
        ({"kind": "calidist", "lambda_scale": "minmax", "alpha": 0.0, "beta": 1.0,
          "lambda_min": 0.0}, "missing field 'lambda_max'"),
        ({"kind": "calidist", "lambda_scale": "rank", "alpha": 0.0, "beta": 1.0,
          "lambda_min": 0.0, "lambda_max": 1.0}, "missing field 'rank_reference'"),
        ({"kind": "calidist", "lambda_scale": "minmax", "alpha": 0.0, "beta": 1.0,
          "lambda_min": 2.0, "lambda_max": 1.0}, "invalid field 'lambda_max'"),
        ({"kind": "calidist", "lambda_scale": "cube", "alpha": 0.0, "beta": 1.0,
          "lambda_min": 0.0, "lambda_max": 1.0}, "invalid field 'lambda_scale'"),
        ({"kind": "calidist", "lambda_scale": "minmax", "alpha": float("nan"), "beta": 1.0,
          "lambda_min": 0.0, "lambda_max": 1.0}, "invalid field 'alpha'"),
        ({"kind": "calidist", "lambda_scale": "minmax", "alpha": 0.0, "beta": 1.0,
          "lambda_min": 0.0, "lambda_max": 1.0, "method": "lbfgs"}, "invalid field 'method'"),
        ({"kind": "calidist", "lambda_scale": "minmax", "alpha": 0.0, "beta": 1.0,
          "lambda_min": 0.0, "lambda_max": 1.0, "refine": "yes"}, "invalid field 'refine'"),
        ({"kind": "temperature", "temperature": -1.0}, "invalid field 'temperature'"),
        ({"kind": "vector", "weights": [1.0, 1.0], "bias": [0.0]}, "invalid field 'bias'"),
        ({"kind": "isotonic", "x": [0.2, 0.1], "y": [0.0, 1.0]}, "invalid field 'x'"),
        ({"kind": "isotonic", "x": [0.1, 0.2], "y": [1.0, 0.0]}, "invalid field 'y'"),
    ],
)
def test_from_dict_names_bad_field(d, message):
    with pytest.raises(ValueError, match=message):
        calibrator_from_dict(d)


def test_from_dict_rejects_wrong_kind_for_class():
    with pytest.raises(ValueError, match="kind"):
        PlattScaling.from_dict({"kind": "isotonic", "x": [0.5], "y": [0.5]})


def test_load_calibrator_errors_name_the_file(tmp_path):
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json.*malformed"):
        load_calibrator(bad_json)
    no_field = tmp_path / "nofield.json"
    no_field.write_text(json.dumps({"context": {}}))
    with pytest.raises(ValueError, match="nofield.json.*missing field 'calibrator'"):
        load_calibrator(no_field)
    bad_cal = tmp_path / "badcal.json"
    bad_cal.write_text(json.dumps({"calibrator": {"kind": "temperature"}, "context": {}}))
    with pytest.raises(ValueError, match="badcal.json.*missing field 'temperature'"):
        load_calibrator(bad_cal)


def test_save_rejects_unserialisable_context(tmp_path):
    calibrator = PlattScaling.from_dict({"kind": "platt", "coef": 1.0, "intercept": 0.0})
    with pytest.raises(ValueError, match="context"):
        save_calibrator(calibrator, tmp_path / "x.json", model=object())


# -- baselines ---------------------------------------------------------------------------------


def test_isotonic_matches_sklearn():
    from sklearn.isotonic import IsotonicRegression  # here: seconds to import

    rng = np.random.default_rng(4)
    confidence = np.round(rng.uniform(0.2, 1, 300), 2)  # ties pooled like sklearn
    correct = (rng.uniform(size=300) < confidence**2).astype(int)
    ours = IsotonicCalibration().fit(confidence, correct)
    reference = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(confidence, correct)
    grid = np.linspace(0, 1, 501)
    np.testing.assert_allclose(ours.predict(grid), reference.predict(grid), atol=1e-12)
    np.testing.assert_allclose(ours.predict(confidence), reference.predict(confidence), atol=1e-12)
    assert np.all(np.diff(ours.predict(grid)) >= 0)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1)), min_size=1, max_size=40))
def test_isotonic_matches_sklearn_property(pairs):
    from sklearn.isotonic import IsotonicRegression

    # confidences on a 1e-3 grid: sklearn merges x values closer than ~1e-15, we do not
    confidence = np.array([p[0] / 1000 for p in pairs])
    correct = np.array([p[1] for p in pairs])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        ours = IsotonicCalibration().fit(confidence, correct)
    reference = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(confidence, correct)
    grid = np.linspace(0, 1, 101)
    np.testing.assert_allclose(ours.predict(grid), reference.predict(grid), atol=1e-9)


def test_platt_matches_sklearn_logistic_regression():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(5)
    confidence = rng.uniform(0.3, 0.999, 2000)
    correct = (rng.uniform(size=2000) < confidence**3).astype(int)
    ours = PlattScaling().fit(confidence, correct)
    x = np.log(confidence / (1 - confidence))[:, None]
    reference = LogisticRegression(C=1e6).fit(x, correct)
    assert ours.coef_ == pytest.approx(reference.coef_[0, 0], rel=0.02)
    assert ours.intercept_ == pytest.approx(reference.intercept_[0], abs=0.05)
    grid = np.linspace(0.3, 0.99, 50)
    np.testing.assert_allclose(
        ours.predict(grid),
        reference.predict_proba(np.log(grid / (1 - grid))[:, None])[:, 1],
        atol=0.01,
    )


def test_platt_one_class_warns_and_stays_finite():
    with pytest.warns(CalibrationWarning, match="all-correct"):
        platt = PlattScaling().fit([0.6, 0.7, 0.9, 1.0], [1, 1, 1, 1])
    predicted = platt.predict([0.0, 0.5, 1.0])
    assert np.all(np.isfinite(predicted)) and np.all(predicted > 0.5)


def test_isotonic_one_class_warns():
    with pytest.warns(CalibrationWarning, match="all-wrong"):
        iso = IsotonicCalibration().fit([0.6, 0.7, 0.9], [0, 0, 0])
    np.testing.assert_array_equal(iso.predict([0.0, 0.8, 1.0]), [0.0, 0.0, 0.0])


def _softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    return np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)


def test_temperature_scaling_recovers_temperature():
    rng = np.random.default_rng(6)
    true_logits = rng.normal(0, 2, (3000, 4))
    labels = np.array([rng.choice(4, p=row) for row in _softmax(true_logits)])
    overconfident = true_logits * 3.0  # temperature 3 undoes it
    ts = TemperatureScaling().fit(overconfident, labels)
    assert ts.temperature_ == pytest.approx(3.0, rel=0.1)
    proba = ts.predict_proba(overconfident)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(proba.argmax(axis=1), overconfident.argmax(axis=1))
    # the fitted T minimises the NLL: nearby temperatures are not better
    def nll(t):
        return -np.mean(np.log(_softmax(overconfident / t)[np.arange(3000), labels]))
    assert nll(ts.temperature_) <= min(nll(ts.temperature_ * 0.95), nll(ts.temperature_ * 1.05))


def test_temperature_all_correct_hits_bound_and_warns():
    logits = np.array([[3.0, 0.0], [0.0, 2.0], [4.0, 1.0]])
    with pytest.warns(CalibrationWarning, match="bound"):
        ts = TemperatureScaling().fit(logits, [0, 1, 0])
    assert ts.temperature_ < 0.01
    assert np.all(np.isfinite(ts.predict_proba(logits)))


def test_vector_scaling_fits_per_class_bias():
    rng = np.random.default_rng(7)
    true_logits = rng.normal(0, 1.5, (3000, 3))
    labels = np.array([rng.choice(3, p=row) for row in _softmax(true_logits)])
    shifted = true_logits * np.array([2.0, 1.0, 0.5]) + np.array([1.0, 0.0, -1.0])
    vs = VectorScaling().fit(shifted, labels)
    recovered = vs.weights_[:, None] * shifted.T + vs.bias_[:, None]
    # w * shifted + b recovers true_logits up to a shared constant per document
    centred = recovered - recovered.mean(axis=0)
    truth = true_logits.T - true_logits.T.mean(axis=0)
    assert np.mean(np.abs(centred - truth)) < 0.15
    ts = TemperatureScaling().fit(shifted, labels)
    def nll(proba):
        return -np.mean(np.log(proba[np.arange(3000), labels]))
    assert nll(vs.predict_proba(shifted)) < nll(ts.predict_proba(shifted))


def test_vector_scaling_missing_class_stays_finite():
    logits = np.array([[2.0, 0.0, 0.5], [0.0, 1.0, 0.2], [1.0, 0.5, 0.0]])
    vs = VectorScaling().fit(logits, [0, 1, 0])  # class 2 never occurs
    assert np.all(np.isfinite(vs.weights_)) and np.all(np.isfinite(vs.bias_))
    np.testing.assert_allclose(vs.predict_proba(logits).sum(axis=1), 1.0)
    with pytest.raises(ValueError, match="columns"):
        vs.predict_proba([[1.0, 2.0]])


@pytest.mark.parametrize(
    ("logits", "labels", "message"),
    [
        ([[1.0], [2.0]], [0, 0], r"X \(logits\) must have at least 2 columns"),
        ([1.0, 2.0], [0, 1], r"X \(logits\) must be 2-dimensional"),
        ([[1.0, np.nan]], [0], r"X \(logits\) contains NaN"),
        ([[1.0, 0.0]], [0, 1], "length mismatch: X=1, y=2"),
        ([[1.0, 0.0]], [2], r"y \(labels\) must be integers"),
        ([[1.0, 0.0]], [0.5], r"y \(labels\) must be integers"),
    ],
)
@pytest.mark.parametrize("cls", [TemperatureScaling, VectorScaling])
def test_logit_calibrators_bad_inputs(cls, logits, labels, message):
    with pytest.raises(ValueError, match=message):
        cls().fit(logits, labels)


@pytest.mark.parametrize("cls", [PlattScaling, IsotonicCalibration])
def test_confidence_calibrators_bad_inputs(cls):
    with pytest.raises(ValueError, match=r"X\[:, 0\] \(confidence\) is empty"):
        cls().fit([], [])
    with pytest.raises(ValueError, match="length mismatch: X=2, y=1"):
        cls().fit([0.5, 0.6], [1])
    with pytest.raises(ValueError, match=r"X\[:, 0\] \(confidence\) must lie"):
        cls().fit([0.5, 1.6], [1, 0])
    with pytest.raises(ValueError, match=r"X must have shape \(n, 1\), columns confidence"):
        cls().fit([[0.5, 0.6], [0.7, 0.8]], [1, 0])


@pytest.mark.parametrize("cls", [PlattScaling, IsotonicCalibration])
def test_confidence_calibrators_take_a_column_or_a_vector(cls):
    confidence = np.linspace(0.3, 1.0, 12)
    correct = np.arange(12) % 3 > 0
    column = cls().fit(confidence[:, None], correct).predict(confidence[:, None])
    np.testing.assert_array_equal(column, cls().fit(confidence, correct).predict(confidence))


# Every estimator calidist_metrics exports: a class with fit (the Protocol itself aside).
ESTIMATORS = [obj for name in calidist_metrics.__all__
              if isinstance(obj := getattr(calidist_metrics, name), type)
              and hasattr(obj, "fit") and obj is not calidist_metrics.Calibrator]


def test_the_public_estimators_are_all_found():
    assert {cls.__name__ for cls in ESTIMATORS} == {
        "BehaviourCalibrator", "CaliDistCalibrator", "IsotonicCalibration", "PlattScaling",
        "TemperatureScaling", "VectorScaling"}


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda cls: cls.__name__)
def test_every_public_estimator_has_one_call_shape(cls):
    """One shape (``Calibrator``): ``fit(X, y)`` on calibration data returns the estimator,
    ``predict(X)`` gives one calibrated confidence per new document, in [0, 1], and so does
    the estimator rebuilt from its saved state; X is the logits, or the columns the estimator
    names (``columns``) stacked by name. The logit scalers' confidence is the largest class
    probability of ``predict_proba``."""
    for method, arguments in (("fit", ["self", "X", "y"]), ("predict", ["self", "X"])):
        assert list(inspect.signature(getattr(cls, method)).parameters) == arguments
    rng = np.random.default_rng(0)
    n = 40
    logits = rng.normal(size=(n, 3))
    labels = rng.integers(0, 3, n)
    mu, delta = rng.uniform(size=n), rng.uniform(size=n)
    named = {"confidence": rng.uniform(0.3, 1.0, n), "mu": mu, "delta": delta,
             "lambda_raw": reliability_score(mu, delta)}
    correct = (rng.uniform(size=n) < named["confidence"]).astype(int)
    estimator = cls()
    assert isinstance(estimator, calidist_metrics.Calibrator)
    if cls.columns is None:
        X, y = logits, labels
    else:
        X, y = stack_columns(cls.columns, **{name: named[name] for name in cls.columns}), correct
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        assert estimator.fit(X, y) is estimator
    predicted = estimator.predict(X)
    assert predicted.shape == (n,) and np.all((0 <= predicted) & (predicted <= 1))
    np.testing.assert_array_equal(calibrator_from_dict(estimator.to_dict()).predict(X), predicted)
    if hasattr(estimator, "predict_proba"):
        np.testing.assert_allclose(predicted, estimator.predict_proba(X).max(axis=1))
    assert not isinstance(object(), calidist_metrics.Calibrator)


def test_stack_columns_orders_by_name_and_names_what_is_wrong():
    X = stack_columns(BEHAVIOUR_COLUMNS, delta=[0.0, 0.5], confidence=[0.9, 0.6], mu=[0.1, 1.0])
    np.testing.assert_array_equal(X, [[0.9, 0.1, 0.0], [0.6, 1.0, 0.5]])
    with pytest.raises(ValueError, match="expected the columns lambda_raw, confidence; "
                                         "got confidence"):
        stack_columns(CALIDIST_COLUMNS, confidence=[0.9])
    with pytest.raises(ValueError, match="length mismatch: lambda_raw=2, confidence=1"):
        stack_columns(CALIDIST_COLUMNS, lambda_raw=[1.0, 2.0], confidence=[0.9])


def test_stack_columns_reads_a_columns_earlier_name():
    """``reliability_raw``, CALIDIST_COLUMNS' earlier name of lambda_raw, is read as it."""
    X = stack_columns(CALIDIST_COLUMNS, lambda_raw=[1.0, 2.0], confidence=[0.9, 0.8])
    np.testing.assert_array_equal(
        stack_columns(CALIDIST_COLUMNS, reliability_raw=[1.0, 2.0], confidence=[0.9, 0.8]), X)
    np.testing.assert_array_equal(
        stack_columns(("reliability_raw", "confidence"), reliability_raw=[1.0, 2.0],
                      confidence=[0.9, 0.8]), X)
