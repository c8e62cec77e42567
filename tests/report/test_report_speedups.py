"""What makes `calidist report` fast must not change what it reports: the bootstrap's one-pass
forms equal one call per resample, resampled values reused within a report equal fresh ones, and
the report's refit cache never hands one fit to another method, other records or other settings
(``report.refits``)."""

from __future__ import annotations

import warnings
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from calidist_metrics import (
    CalibrationWarning,
    auroc,
    bootstrap_interval,
    brier_score,
    coverage_at_accuracy,
    expected_calibration_error,
    paired_bootstrap_test,
    reused_resamples,
)
from calidist_metrics.scores import _resample_indices, _resampled, _rowwise
from calidist_tasks.registry import SCORES
from calidist_tasks.report import refits
from calidist_tasks.report.runs import TaskRun
from calidist_tasks.scoring.fits import Fitted
from calidist_tasks.settings import RunSettings

ONE_PASS = [expected_calibration_error, partial(expected_calibration_error, n_bins=15),
            brier_score, auroc, SCORES["ece"], SCORES["brier"], SCORES["auroc"],
            SCORES["coverage_acc90"],
            *(partial(coverage_at_accuracy, target_accuracy=t) for t in (0.5, 0.8, 0.95, 1.0))]


def _data(rng: np.random.Generator, n: int, steps: int | None) -> tuple[np.ndarray, np.ndarray]:
    confidence = rng.uniform(0, 1, n)
    if steps:  # ties, 0 and 1 included
        confidence = np.round(confidence * steps) / steps
    return confidence, (rng.random(n) < rng.uniform(0.2, 0.95)).astype(float)


@pytest.mark.parametrize("metric", ONE_PASS)
def test_one_pass_resamples_equal_one_call_per_resample(metric) -> None:
    """Every resample's value of the one-pass form equals the score called on that resample
    (the loop the bootstrap used before), to 1e-12 and in fact exactly, on random data with
    and without ties, down to one document (one-class resamples counted alike)."""
    assert _rowwise(metric) is not None
    rng = np.random.default_rng(7)
    for n in (1, 2, 3, 10, 40, 257):
        for steps in (None, 20, 3):
            confidence, correct = _data(rng, n, steps)
            indices = _resample_indices(n, 50, 4)
            fast, degenerate = _resampled(metric, confidence, correct, 50, 4)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", CalibrationWarning)
                slow = np.array([metric(confidence[i], correct[i]) for i in indices])
            np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12)
            assert np.array_equal(fast, slow)
            assert degenerate == len(caught)


def test_the_index_matrix_is_the_seeded_draw_and_read_only() -> None:
    drawn = np.random.default_rng(3).integers(0, 17, size=(50, 17))
    assert np.array_equal(_resample_indices(17, 50, 3), drawn)
    assert not _resample_indices(17, 50, 3).flags.writeable


@pytest.mark.parametrize("metric", [SCORES["ece"], SCORES["brier"], SCORES["auroc"],
                                    SCORES["ece_adaptive"]])
def test_reused_resamples_give_the_numbers_and_warnings_of_fresh_ones(metric) -> None:
    """Within ``reused_resamples`` a score's resampled values are computed once per data and
    reused: intervals and paired tests equal those computed without it, and every call still
    warns about its degenerate resamples (the report counts the warnings)."""
    rng = np.random.default_rng(11)
    confidence, correct = _data(rng, 12, 10)
    other = np.clip(confidence + rng.normal(0, 0.2, 12), 0, 1)
    flipped = correct.copy()
    flipped[:3] = 1 - flipped[:3]

    def everything() -> tuple[list, list[str]]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CalibrationWarning)
            found = [bootstrap_interval(metric, confidence, correct, 100, seed=1),
                     bootstrap_interval(metric, other, correct, 100, seed=1),
                     paired_bootstrap_test(metric, confidence, other, correct, 100, seed=1),
                     paired_bootstrap_test(metric, other, confidence, correct, 100, seed=1,
                                           correct_b=flipped),
                     bootstrap_interval(metric, confidence, correct, 100, seed=2),
                     bootstrap_interval(metric, confidence, correct, 50, seed=1),
                     bootstrap_interval(metric, confidence, flipped, 100, seed=1)]
        return found, [str(w.message) for w in caught]

    fresh = everything()
    with reused_resamples():
        first, again = everything(), everything()
    assert first == again == fresh


def test_reused_resamples_never_mix_scores_or_data() -> None:
    """Two scores, two confidences, two seeds of the same documents: each its own values."""
    rng = np.random.default_rng(5)
    confidence, correct = _data(rng, 30, None)
    other = rng.uniform(0, 1, 30)
    with reused_resamples():
        found = {(name, which, seed): _resampled(SCORES[name], c, correct, 100, seed)[0]
                 for name in ("ece", "brier", "auroc") for which, c in (("a", confidence),
                                                                      ("b", other))
                 for seed in (0, 1)}
    for (name, which, seed), values in found.items():
        c = confidence if which == "a" else other
        assert np.array_equal(values, _resampled(SCORES[name], c, correct, 100, seed)[0])
    assert len({v.tobytes() for v in found.values()}) == len(found)


def _run(task: str, records: list[dict]) -> TaskRun:
    return TaskRun(task, "model", "2025", Path("results.json"), {}, {}, records=records)


def _counting_fit(label: str, calls: list):
    def fit(calibration, evaluation, settings, context) -> Fitted:
        calls.append(label)
        mean = np.mean([r["confidence"] for r in calibration])
        shift = {"a": 0.0, "b": 0.1}[label]
        return Fitted(np.array([min(1.0, mean + shift)] * len(evaluation)),
                      np.array([r["correct"] for r in evaluation], float))

    return fit


def _records(confidence: float) -> list[dict]:
    return [{"index": 0, "split": "calibration", "confidence": confidence, "correct": 1},
            {"index": 1, "split": "evaluation", "confidence": 0.5, "correct": 0}]


def test_a_refit_is_fitted_once_per_report_and_never_shared() -> None:
    """Within ``fitted_once`` the same fit of the same run with the same settings and context is
    computed once; another method, another run (even with equal records and name), other
    settings, another context or another target each get their own fit."""
    calls: list[str] = []
    fit_a, fit_b = _counting_fit("a", calls), _counting_fit("b", calls)
    one, two = _run("calidist_x", _records(0.6)), _run("calidist_x", _records(0.6))
    other = _run("calidist_y", _records(0.9))
    settings, context = RunSettings(), {"task": "calidist_x"}

    def fitted(fit, source, target=None, settings=settings, context=context) -> Fitted:
        target = source if target is None else target
        calibration = [r for r in source.records if r["split"] == "calibration"]
        evaluation = [r for r in target.records if r["split"] == "evaluation"]
        return refits.fitted(fit, source, target, calibration, evaluation, settings, context)

    with refits.fitted_once():
        first = fitted(fit_a, one)
        assert fitted(fit_a, one) is first and calls == ["a"]
        by_b = fitted(fit_b, one)  # another method, same records
        assert calls == ["a", "b"] and not np.array_equal(by_b.confidence, first.confidence)
        assert fitted(fit_a, two) is not first and calls == ["a", "b", "a"]  # equal, not same
        moved = fitted(fit_a, other)
        assert moved.confidence[0] == pytest.approx(0.9)
        assert fitted(fit_a, other, one) is not moved  # the same source, another target
        assert fitted(fit_a, one, settings=RunSettings(seed=1)) is not first
        assert fitted(fit_a, one, context={"task": "other"}) is not first
        assert len(calls) == 7
        with refits.fitted_once():  # nested: the outer block's fits are kept
            assert fitted(fit_a, one) is first
    assert fitted(fit_a, one) is not first  # outside: every call fits
    assert len(calls) == 8
