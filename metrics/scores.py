"""Calibration scores of a top-label confidence against correctness.

Every function takes ``confidence`` (the probability the model gives its own prediction, in
[0, 1]) and ``correct`` (1 when that prediction is right, else 0), one entry per document.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import rankdata

from ._validation import (
    CalibrationWarning,
    check_confidence,
    check_correct,
    check_positive_int,
    check_same_length,
)

__all__ = [
    "ReliabilityBins",
    "auroc",
    "bootstrap_interval",
    "brier_score",
    "expected_calibration_error",
    "paired_bootstrap_test",
    "reliability_bins",
]

_STRATEGIES = ("uniform", "quantile")


def _check_pair(confidence, correct) -> tuple[np.ndarray, np.ndarray]:
    confidence = check_confidence(confidence, "confidence")
    correct = check_correct(correct, "correct")
    check_same_length(confidence=confidence, correct=correct)
    return confidence, correct


@dataclass(frozen=True)
class ReliabilityBins:
    """Per-bin statistics of a reliability diagram.

    ``edges`` has ``n_bins + 1`` entries; ``counts``, ``mean_confidence`` and ``accuracy`` have
    ``n_bins``. An empty bin has count 0 and mean confidence and accuracy 0.0.
    """

    edges: np.ndarray
    counts: np.ndarray
    mean_confidence: np.ndarray
    accuracy: np.ndarray

    @property
    def gaps(self) -> np.ndarray:
        """|accuracy - mean confidence| per bin (0.0 for empty bins)."""
        return np.abs(self.accuracy - self.mean_confidence)


def reliability_bins(
    confidence: ArrayLike, correct: ArrayLike, n_bins: int = 10, strategy: str = "uniform"
) -> ReliabilityBins:
    """Bin documents by confidence.

    ``strategy="uniform"``: bin i holds i/n <= conf < (i+1)/n, and conf == 1.0 goes in the
    last bin. ``strategy="quantile"``: edges are the 0, 1/n, ..., 1 quantiles of the
    confidences (equal-mass bins); bin i holds edges[i] <= conf < edges[i+1], the last bin is
    closed. Tied confidences always share a bin, so quantile bins may hold unequal counts or be
    empty when many documents tie.
    """
    confidence, correct = _check_pair(confidence, correct)
    n_bins = check_positive_int(n_bins, "n_bins")
    if strategy == "uniform":
        edges = np.linspace(0.0, 1.0, n_bins + 1)
        ids = np.minimum(np.floor(confidence * n_bins).astype(int), n_bins - 1)
    elif strategy == "quantile":
        edges = np.quantile(confidence, np.linspace(0.0, 1.0, n_bins + 1))
        ids = np.searchsorted(edges[1:-1], confidence, side="right")
    else:
        raise ValueError(f"strategy must be one of {_STRATEGIES}, got {strategy!r}")
    counts = np.bincount(ids, minlength=n_bins)
    conf_sum = np.bincount(ids, weights=confidence, minlength=n_bins)
    correct_sum = np.bincount(ids, weights=correct, minlength=n_bins)
    safe = np.maximum(counts, 1)
    return ReliabilityBins(
        edges=edges,
        counts=counts,
        mean_confidence=np.where(counts > 0, conf_sum / safe, 0.0),
        accuracy=np.where(counts > 0, correct_sum / safe, 0.0),
    )


def expected_calibration_error(
    confidence: ArrayLike, correct: ArrayLike, n_bins: int = 10, strategy: str = "uniform"
) -> float:
    """Top-label ECE: sum over bins of (count / n) * |accuracy - mean confidence|.

    Bins come from :func:`reliability_bins`. The result is a fraction in [0, 1] (not x100).
    """
    bins = reliability_bins(confidence, correct, n_bins=n_bins, strategy=strategy)
    weights = bins.counts / bins.counts.sum()
    return float(np.clip(np.sum(weights * bins.gaps), 0.0, 1.0))


def brier_score(confidence: ArrayLike, correct: ArrayLike) -> float:
    """Binary top-label Brier score: mean of (confidence - 1[correct])^2, in [0, 1]."""
    confidence, correct = _check_pair(confidence, correct)
    return float(np.mean((confidence - correct) ** 2))


def auroc(confidence: ArrayLike, correct: ArrayLike) -> float:
    """Area under the ROC curve of confidence as a detector of correct predictions.

    Computed as the Mann-Whitney statistic (ties count one half). When only correct or only
    wrong documents are present the area is undefined: a CalibrationWarning is issued and 0.5
    (chance) is returned.
    """
    confidence, correct = _check_pair(confidence, correct)
    n_pos = int(correct.sum())
    n_neg = correct.size - n_pos
    if n_pos == 0 or n_neg == 0:
        warnings.warn(
            "auroc: only one class in `correct` (all correct or all wrong); returning 0.5",
            CalibrationWarning,
            stacklevel=2,
        )
        return 0.5
    ranks = rankdata(confidence)
    u_stat = ranks[correct == 1].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u_stat / (n_pos * n_neg))


def _check_bootstrap_args(n_resamples, level) -> tuple[int, float]:
    n_resamples = check_positive_int(n_resamples, "n_resamples")
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0.0 < level < 1.0:
        raise ValueError(f"level must be a number strictly between 0 and 1, got {level!r}")
    return n_resamples, float(level)


def _resample(metric, arrays, indices, caller: str) -> np.ndarray:
    """Apply ``metric`` to each resample; degenerate resamples are counted and warned once."""
    values = np.empty(len(indices))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CalibrationWarning)
        for row, idx in enumerate(indices):
            values[row] = metric(*(array[idx] for array in arrays))
    degenerate = sum(issubclass(w.category, CalibrationWarning) for w in caught)
    for w in caught:
        if not issubclass(w.category, CalibrationWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if degenerate:
        warnings.warn(
            f"{caller}: {degenerate} metric warnings over {len(indices)} resamples "
            "(e.g. resamples holding one class only); their defined fallback values were used",
            CalibrationWarning,
            stacklevel=3,
        )
    return values


def bootstrap_interval(
    metric: Callable[..., float],
    confidence: ArrayLike,
    correct: ArrayLike,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Percentile bootstrap over documents: (point estimate, low, high).

    ``metric(confidence, correct)`` is one of this module's scores (use functools.partial to
    fix ``n_bins`` or ``strategy``). Resamples draw n documents with replacement from
    ``numpy.random.default_rng(seed)``, so a seed gives identical results. Note that for a
    biased statistic such as ECE the percentile interval need not contain the point estimate.
    """
    confidence, correct = _check_pair(confidence, correct)
    n_resamples, level = _check_bootstrap_args(n_resamples, level)
    point = float(metric(confidence, correct))
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, confidence.size, size=(n_resamples, confidence.size))
    values = _resample(metric, (confidence, correct), indices, "bootstrap_interval")
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return point, float(low), float(high)


def paired_bootstrap_test(
    metric: Callable[..., float],
    confidence_a: ArrayLike,
    confidence_b: ArrayLike,
    correct: ArrayLike,
    n_resamples: int = 1000,
    seed: int = 0,
) -> dict:
    """Paired bootstrap comparison of two confidences for the same documents.

    Returns ``difference`` = metric(a) - metric(b); ``low``, ``high`` = 95% percentile interval
    of the resampled difference; ``p_value`` = two-sided bootstrap p-value: twice the share of
    resamples whose difference is zero or has the sign opposite to the observed one, capped
    at 1 (1.0 when the observed difference is exactly zero).
    """
    confidence_a = check_confidence(confidence_a, "confidence_a")
    confidence_b = check_confidence(confidence_b, "confidence_b")
    correct = check_correct(correct, "correct")
    check_same_length(confidence_a=confidence_a, confidence_b=confidence_b, correct=correct)
    n_resamples, _ = _check_bootstrap_args(n_resamples, 0.95)

    def difference(conf_a, conf_b, corr):
        return metric(conf_a, corr) - metric(conf_b, corr)

    observed = float(difference(confidence_a, confidence_b, correct))
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, correct.size, size=(n_resamples, correct.size))
    values = _resample(
        difference, (confidence_a, confidence_b, correct), indices, "paired_bootstrap_test"
    )
    low, high = np.quantile(values, [0.025, 0.975])
    if observed > 0:
        p_value = 2.0 * np.mean(values <= 0)
    elif observed < 0:
        p_value = 2.0 * np.mean(values >= 0)
    else:
        p_value = 1.0
    return {
        "difference": observed,
        "low": float(low),
        "high": float(high),
        "p_value": float(min(1.0, p_value)),
    }
