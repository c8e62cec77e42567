"""CaliDist's alpha and beta are the paper's grid search alone by default (Appendix I).

Every check compares with the search written out here, independently of the calibrator: lambda by
min-max over the calibration documents (Eq. 4), the 100 x 100 grid, the lowest calibration Brier;
ties go to the smallest beta, then the smallest alpha (np.argmin over brier[beta, alpha]).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calidist_metrics import (
    CALIDIST_COLUMNS,
    CalibrationWarning,
    CaliDistCalibrator,
    load_calibrator,
    stack_columns,
)
from calidist_metrics.calibrators import FIT_METHODS
from calidist_tasks.scoring.aggregation import summarize_calidist
from calidist_tasks.settings import RunSettings

ALPHAS, BETAS = np.linspace(-5, 5, 100), np.linspace(0.1, 5, 100)


def paper_search(raw, p, y) -> tuple[float, float]:
    raw, p, y = (np.asarray(v, dtype=float) for v in (raw, p, y))
    span = raw.max() - raw.min()
    lam = (raw - raw.min()) / span * 10 if span > 0 else np.full(raw.size, 5.0)
    sigmoid = 1 / (1 + np.exp(-BETAS[:, None, None] * (lam - ALPHAS[:, None])))
    brier = np.mean((sigmoid * p - y) ** 2, axis=-1)  # brier[beta, alpha]
    b, a = np.unravel_index(np.argmin(brier), brier.shape)
    return float(ALPHAS[a]), float(BETAS[b])


def fit(raw, p, y, **kwargs) -> CaliDistCalibrator:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        return CaliDistCalibrator(**kwargs).fit(
            stack_columns(CALIDIST_COLUMNS, lambda_raw=raw, confidence=p), y)


def realistic(n: int, seed: int):
    """Correctness follows stability; lambda_raw is heavy-tailed (delta near 0)."""
    rng = np.random.default_rng(seed)
    stable = rng.uniform(size=n)
    raw = (1 - (1 - stable) * rng.uniform(0, 0.6, n)) / ((1 - stable) * rng.uniform(0, 0.5, n)
                                                         + 1e-4)
    p = rng.uniform(0.4, 1.0, n)
    y = (rng.uniform(size=n) < 0.2 + 0.75 * stable).astype(int)
    return raw, p, y


def adversarial():
    rng = np.random.default_rng(7)
    raw, p = rng.exponential(1.0, 40), rng.uniform(0.3, 1.0, 40)
    alternate = np.arange(40) % 2
    return {
        "all_correct": (raw, p, np.ones(40)),
        "all_wrong": (raw, p, np.zeros(40)),
        "constant_lambda": (np.full(40, 3.0), p, alternate),
        "zero_confidence": (raw, np.zeros(40), alternate),  # every grid point ties
        "one_outlier": (np.append(rng.uniform(0, 1, 39), 1e10), p, alternate),
        "lambda_0_or_10": (alternate * 7.0, np.ones(40), 1 - alternate),
        "one_document": ([2.0], [0.9], [1]),
        "two_documents": ([0.0, 1.0], [0.6, 0.8], [0, 1]),
        "realistic": realistic(200, 0),
    }


def test_settings_accept_exactly_the_calibrator_fits():
    for fit in FIT_METHODS:
        assert RunSettings.from_metadata({"fit": fit}).fit == fit
    with pytest.raises(ValueError, match="fit must be one of .*'default_sigmoid'"):
        RunSettings.from_metadata({"fit": "newton"})
    assert RunSettings().fit == "grid" and CaliDistCalibrator().method == "grid"


@pytest.mark.parametrize("case", sorted(adversarial()))
def test_default_fit_is_exactly_the_paper_grid_search(case):
    raw, p, y = adversarial()[case]
    calibrator = fit(raw, p, y)
    assert (calibrator.alpha_, calibrator.beta_) == paper_search(raw, p, y)
    assert calibrator.alpha_ in ALPHAS and calibrator.beta_ in BETAS


def test_ties_go_to_the_smallest_beta_then_alpha():
    raw, p, y = adversarial()["zero_confidence"]
    calibrator = fit(raw, p, y)
    assert (calibrator.alpha_, calibrator.beta_) == (-5.0, 0.1)


@st.composite
def calibration_sets(draw):
    n = draw(st.integers(1, 40))
    raw = draw(st.lists(st.one_of(st.floats(0, 100), st.floats(0, 1e-6), st.just(1e10),
                                  st.just(0.0)), min_size=n, max_size=n))
    p = draw(st.lists(st.floats(0, 1), min_size=n, max_size=n))
    y = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    return np.array(raw), np.array(p), np.array(y)


@settings(max_examples=30, deadline=None)
@given(calibration_sets())
def test_default_fit_matches_the_paper_grid_search_on_random_inputs(data):
    raw, p, y = data
    calibrator = fit(raw, p, y)
    assert (calibrator.alpha_, calibrator.beta_) == paper_search(raw, p, y)
    assert calibrator.alpha_ in ALPHAS and calibrator.beta_ in BETAS


def test_refine_leaves_the_grid_and_is_never_worse():
    left = 0
    for seed in range(10):
        data = realistic(100, seed)
        grid, refined = fit(*data), fit(*data, method="refine")
        assert refined.calibration_brier_ <= grid.calibration_brier_
        left += refined.alpha_ not in ALPHAS or refined.beta_ not in BETAS
    assert left > 0


@pytest.mark.parametrize("case", sorted(adversarial()))
def test_default_sigmoid_is_exactly_zero_one(case):
    raw, p, y = adversarial()[case]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        calibrator = CaliDistCalibrator(method="default_sigmoid").fit(
            stack_columns(CALIDIST_COLUMNS, lambda_raw=raw, confidence=p), y)
    assert (calibrator.alpha_, calibrator.beta_) == (0.0, 1.0)
    assert not calibrator.grid_edge_
    assert not any("grid edge" in str(w.message) for w in caught)
    assert calibrator.lambda_min_ == np.min(raw) and calibrator.lambda_max_ == np.max(raw)


# ----------------------------------------------------------------- through lm-eval's aggregation


def records(raw, p, y, n_eval: int = 3) -> list[dict]:
    """Aggregation records: the given calibration documents, then a few evaluation documents."""
    docs = [(r, c, int(k), "calibration") for r, c, k in zip(raw, p, y, strict=True)]
    docs += [(1.0 + i, 0.7, i % 2, "evaluation") for i in range(n_eval)]
    return [{"index": i, "split": split, "label": 0, "prediction": 1 - k, "confidence": float(c),
             "correct": k, "mu": 0.1, "delta": 0.1, "lambda_raw": float(r), "flipped": 0,
             "requests": 2} for i, (r, c, k, split) in enumerate(docs)]


def summarize(data, fit_name: str | None = None) -> dict[str, float]:
    run = RunSettings() if fit_name is None else RunSettings(fit=fit_name)
    context = {"task": "calidist_x_assertion", "labels": ["yes", "no"], "model": None}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        return summarize_calidist(records(*data), run, context)


@pytest.mark.parametrize("case", sorted(adversarial()))
def test_aggregation_reports_the_paper_grid_search(case):
    data = adversarial()[case]
    out = summarize(data)
    assert (out["alpha"], out["beta"]) == paper_search(*data)
    assert summarize(data, "grid") == out
    assert (summarize(data, "default_sigmoid")["alpha"],
            summarize(data, "default_sigmoid")["beta"]) == (0.0, 1.0)


@settings(max_examples=15, deadline=None)
@given(calibration_sets())
def test_aggregation_matches_the_paper_grid_search_on_random_inputs(data):
    out = summarize(data)
    assert (out["alpha"], out["beta"]) == paper_search(*data)


# ----------------------------------------------------------------------------- saved files


@pytest.mark.parametrize(("refine", "method"), [(True, "refine"), (False, "grid")])
def test_calibrator_saved_with_refine_still_loads(tmp_path, refine, method):
    old = {"kind": "calidist", "lambda_scale": "minmax", "alpha": 0.37, "beta": 2.5,
           "lambda_min": 0.5, "lambda_max": 40.0, "rank_reference": None, "n_calibration": 200,
           "calibration_brier": 0.18, "grid_edge": False, "refine": refine,
           "alpha_grid": None, "beta_grid": None}
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"calibrator": old, "context": {"task": "t"}}))
    calibrator, context = load_calibrator(path)
    assert calibrator.method == method and context == {"task": "t"}
    lam = (np.array([0.5, 10.0, 40.0]) - 0.5) / 39.5 * 10
    expected = 0.8 / (1 + np.exp(-2.5 * (lam - 0.37)))
    X = stack_columns(CALIDIST_COLUMNS, lambda_raw=[0.5, 10.0, 40.0], confidence=[0.8] * 3)
    np.testing.assert_allclose(calibrator.predict(X), expected)
    assert calibrator.to_dict()["method"] == method


def test_calibrator_with_unknown_method_is_refused(tmp_path):
    saved = fit(*realistic(50, 1)).to_dict()
    path = tmp_path / "future.json"
    path.write_text(json.dumps({"calibrator": {**saved, "method": "bayes"}, "context": {}}))
    with pytest.raises(ValueError, match=r"future\.json: .*invalid field 'method': 'bayes'"):
        load_calibrator(path)
