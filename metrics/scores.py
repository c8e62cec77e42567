"""Calibration scores of a top-label confidence against correctness.

Every function takes ``confidence`` (the probability the model gives its own prediction, in
[0, 1]) and ``correct`` (1 when that prediction is right, else 0), one entry per document.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache, partial

import numpy as np
from numpy.typing import ArrayLike

# scipy is imported in the functions that use it: importing it takes seconds of CPU that a
# command listing tasks or printing help never needs
from ._validation import (
    CalibrationWarning,
    check_confidence,
    check_correct,
    check_positive_int,
    check_same_length,
)

__all__ = [
    "ReliabilityBins",
    "accuracy_at_coverage",
    "aurc",
    "auroc",
    "bootstrap_interval",
    "brier_score",
    "expected_calibration_error",
    "maximum_calibration_error",
    "negative_log_likelihood",
    "paired_bootstrap_test",
    "prediction_rejection_ratio",
    "reliability_bins",
    "reused_resamples",
    "rms_calibration_error",
    "risk_coverage_curve",
    "smooth_ece",
    "smooth_ece_bandwidth",
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

    Parameters
    ----------
    confidence : array-like of shape (n,)
        Top-label confidence in [0, 1].
    correct : array-like of shape (n,)
        1 where the prediction is right, else 0.
    n_bins : int, default 10
        Number of bins.
    strategy : {"uniform", "quantile"}, default "uniform"
        Equal-width or equal-mass bins (:func:`reliability_bins`).

    Returns
    -------
    ReliabilityBins
        Edges, counts, mean confidence and accuracy per bin.
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

    Parameters
    ----------
    confidence : array-like of shape (n,)
        Top-label confidence in [0, 1].
    correct : array-like of shape (n,)
        1 where the prediction is right, else 0.
    n_bins : int, default 10
        Number of bins.
    strategy : {"uniform", "quantile"}, default "uniform"
        Equal-width or equal-mass bins (:func:`reliability_bins`).

    Returns
    -------
    float
        ECE in [0, 1]; lower is better.
    """
    bins = reliability_bins(confidence, correct, n_bins=n_bins, strategy=strategy)
    weights = bins.counts / bins.counts.sum()
    return float(np.clip(np.sum(weights * bins.gaps), 0.0, 1.0))


def maximum_calibration_error(
    confidence: ArrayLike, correct: ArrayLike, n_bins: int = 10, strategy: str = "uniform"
) -> float:
    """MCE: the largest |accuracy - mean confidence| over the non-empty bins of
    :func:`reliability_bins` (Naeini et al. 2015), a fraction in [0, 1].

    Parameters
    ----------
    confidence : array-like of shape (n,)
        Top-label confidence in [0, 1].
    correct : array-like of shape (n,)
        1 where the prediction is right, else 0.
    n_bins : int, default 10
        Number of bins.
    strategy : {"uniform", "quantile"}, default "uniform"
        Equal-width or equal-mass bins (:func:`reliability_bins`).

    Returns
    -------
    float
        MCE in [0, 1]; lower is better.
    """
    bins = reliability_bins(confidence, correct, n_bins=n_bins, strategy=strategy)
    return float(np.max(bins.gaps[bins.counts > 0]))


def rms_calibration_error(
    confidence: ArrayLike, correct: ArrayLike, n_bins: int = 10, strategy: str = "uniform"
) -> float:
    """Root-mean-square calibration error: the count-weighted l2 norm of the bins' gaps.

    Parameters
    ----------
    confidence : array-like of shape (n,)
        Top-label confidence in [0, 1].
    correct : array-like of shape (n,)
        1 where the prediction is right, else 0.
    n_bins : int, default 10
        Number of bins.
    strategy : {"uniform", "quantile"}, default "uniform"
        Binning of :func:`reliability_bins`.

    Returns
    -------
    float
        sqrt(sum over bins of (count / n) * (accuracy - mean confidence)^2), in [0, 1]; the
        ``norm="l2"`` calibration error of torchmetrics, whose bins are closed on the left as
        these are (a confidence of exactly 1.0 is in the last bin here, in a bin of its own
        there).
    """
    bins = reliability_bins(confidence, correct, n_bins=n_bins, strategy=strategy)
    weights = bins.counts / bins.counts.sum()
    return float(np.clip(np.sqrt(np.sum(weights * bins.gaps ** 2)), 0.0, 1.0))


# the smallest and largest confidence a log is taken of: scikit-learn's log_loss clips at the
# float64 machine epsilon too, so that one confident wrong answer costs -log(eps) ~ 36, not inf
_NLL_CLIP = float(np.finfo(np.float64).eps)


def negative_log_likelihood(confidence: ArrayLike, correct: ArrayLike) -> float:
    """Negative log-likelihood of the top label's correctness under its confidence.

    Parameters
    ----------
    confidence : array-like of shape (n,)
        Top-label confidence in [0, 1].
    correct : array-like of shape (n,)
        1 where the prediction is right, else 0.

    Returns
    -------
    float
        -mean(y log c + (1 - y) log(1 - c)), c clipped to [eps, 1 - eps] (float64 machine
        epsilon), as ``sklearn.metrics.log_loss(correct, confidence)``; >= 0, lower is better.
    """
    confidence, correct = _check_pair(confidence, correct)
    clipped = np.clip(confidence, _NLL_CLIP, 1.0 - _NLL_CLIP)
    return float(-np.mean(correct * np.log(clipped) + (1.0 - correct) * np.log1p(-clipped)))


# Smooth ECE (Blasiok & Nakkiran 2023, "Smooth ECE: principled reliability diagrams via kernel
# smoothing"). The residuals y - f are smoothed with the reflected Gaussian kernel (every mirror
# image of a point in 0 and 1 counted, so no mass leaves [0, 1]); smECE_sigma is the integral
# over [0, 1] of |smoothed residual density|. The reflected Gaussian is the heat kernel of [0, 1]
# with reflecting ends, so it acts on cosine coefficients as a factor exp(-(pi k sigma)^2 / 2):
# the residuals are put on a fine grid and smoothed exactly there with a discrete cosine
# transform. smECE_sigma does not grow with sigma, and smECE is its value at the fixed point
# sigma* = smECE_sigma* (found by root search on [SMECE_MIN_BANDWIDTH, 1]).
SMECE_MIN_BANDWIDTH = 1e-3  # as relplot's eps
_SMECE_GRID = 4096  # cells on [0, 1]: 4 per SMECE_MIN_BANDWIDTH


def _residual_cosines(confidence: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """Cosine coefficients of (1/n) sum_i (y_i - f_i) delta(f_i) on a grid of cell centres."""
    from scipy.fft import dct
    position = np.clip(confidence * _SMECE_GRID - 0.5, 0.0, _SMECE_GRID - 1.0)
    low = np.minimum(np.floor(position).astype(int), _SMECE_GRID - 2)
    upper = position - low  # linear split between the two nearest cell centres
    residual = (correct - confidence) / confidence.size
    mass = np.bincount(low, weights=residual * (1.0 - upper), minlength=_SMECE_GRID)
    mass += np.bincount(low + 1, weights=residual * upper, minlength=_SMECE_GRID)
    return dct(mass, type=2)  # 2 sum_j mass_j cos(pi k x_j)


def _smece_at(cosines: np.ndarray, bandwidth: float) -> float:
    # the smoothed density holds no frequency above ~3 / bandwidth: read it at 16+ points per
    # bandwidth (the cell centres of a coarser grid), not at all 4096
    from scipy.fft import dct
    points = min(cosines.size, 2 ** int(np.ceil(np.log2(16.0 / bandwidth))))
    k = np.arange(points)
    smoothed = cosines[:points] * np.exp(-0.5 * (np.pi * k * bandwidth) ** 2) / 2.0
    density = dct(smoothed, type=3)  # the smoothed residual density at the cell centres
    return float(np.mean(np.abs(density)))


def _check_bandwidth(bandwidth) -> float:
    if isinstance(bandwidth, bool) or not isinstance(bandwidth, (int, float)) or not (
            SMECE_MIN_BANDWIDTH <= bandwidth <= 1.0):
        raise ValueError(f"bandwidth must be a number in [{SMECE_MIN_BANDWIDTH}, 1], "
                         f"got {bandwidth!r}")
    return float(bandwidth)


def smooth_ece_bandwidth(confidence: ArrayLike, correct: ArrayLike) -> float:
    """The bandwidth sigma* of :func:`smooth_ece`: the fixed point sigma = smECE_sigma, kept in
    [1e-3, 1] (1e-3 when smECE_sigma < sigma already there, as for perfectly calibrated data).

    Parameters
    ----------
    confidence : array-like of shape (n,)
        Top-label confidence in [0, 1].
    correct : array-like of shape (n,)
        1 where the prediction is right, else 0.

    Returns
    -------
    float
        sigma* in [1e-3, 1].
    """
    confidence, correct = _check_pair(confidence, correct)
    cosines = _residual_cosines(confidence, correct)
    return _fixed_point(cosines)


def _fixed_point(cosines: np.ndarray) -> float:
    from scipy.optimize import brentq
    def excess(bandwidth: float) -> float:
        return _smece_at(cosines, bandwidth) - bandwidth

    if excess(SMECE_MIN_BANDWIDTH) <= 0.0:
        return SMECE_MIN_BANDWIDTH
    if excess(1.0) >= 0.0:
        return 1.0
    return float(brentq(excess, SMECE_MIN_BANDWIDTH, 1.0, xtol=1e-5))


def smooth_ece(confidence: ArrayLike, correct: ArrayLike, bandwidth: float | None = None) -> float:
    """Smooth ECE (Blasiok & Nakkiran 2023; relplot's ``smECE``), a fraction in [0, 1].

    smECE_sigma = integral over t in [0, 1] of |(1/n) sum_i K_sigma(t, f_i) (y_i - f_i)| dt,
    with K_sigma the Gaussian kernel of width sigma reflected at 0 and 1. With ``bandwidth``
    None (default) sigma is the fixed point sigma* = smECE_sigma* (:func:`smooth_ece_bandwidth`);
    otherwise the given sigma in [1e-3, 1]. 0 when the residuals cancel wherever documents
    share a confidence; unlike binned ECE it moves continuously with the confidences.

    Parameters
    ----------
    confidence : array-like of shape (n,)
        Top-label confidence in [0, 1].
    correct : array-like of shape (n,)
        1 where the prediction is right, else 0.
    bandwidth : float or None, default None
        The kernel width sigma in [1e-3, 1]; None: the fixed point sigma*.

    Returns
    -------
    float
        smECE in [0, 1]; lower is better.
    """
    confidence, correct = _check_pair(confidence, correct)
    cosines = _residual_cosines(confidence, correct)
    sigma = _fixed_point(cosines) if bandwidth is None else _check_bandwidth(bandwidth)
    return float(np.clip(_smece_at(cosines, sigma), 0.0, 1.0))


def risk_coverage_curve(confidence: ArrayLike, correct: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Selective prediction: (coverage, risk), one point per k = 1..n documents kept.

    The k most confident documents are kept (coverage k/n) and risk is their error rate. Tied
    confidences are admitted together: inside a tie the errors are counted at the tie's average
    rate (the mean over every order of the tied documents), so the curve does not depend on the
    input order.

    Parameters
    ----------
    confidence : array-like of shape (n,)
        Top-label confidence in [0, 1].
    correct : array-like of shape (n,)
        1 where the prediction is right, else 0.

    Returns
    -------
    coverage : ndarray of shape (n,)
        k / n for k = 1..n.
    risk : ndarray of shape (n,)
        The error rate of the k most confident documents.
    """
    confidence, correct = _check_pair(confidence, correct)
    order = np.argsort(-confidence, kind="stable")
    ranked, errors = confidence[order], 1.0 - correct[order]
    starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])
    sizes = np.diff(np.r_[starts, ranked.size])
    group_errors = np.add.reduceat(errors, starts)
    before = np.cumsum(group_errors) - group_errors  # errors of the more confident ties
    group = np.repeat(np.arange(starts.size), sizes)
    kept = np.arange(1, ranked.size + 1)
    wrong = before[group] + (kept - starts[group]) * group_errors[group] / sizes[group]
    return kept / ranked.size, wrong / kept


def aurc(confidence: ArrayLike, correct: ArrayLike) -> float:
    """Area under the risk-coverage curve (Geifman & El-Yaniv 2017): the mean risk over the
    coverages 1/n, ..., n/n of :func:`risk_coverage_curve`; lower is better, in [0, 1].

    Parameters
    ----------
    confidence : array-like of shape (n,)
        Top-label confidence in [0, 1].
    correct : array-like of shape (n,)
        1 where the prediction is right, else 0.

    Returns
    -------
    float
        AURC in [0, 1]; lower is better.
    """
    _, risk = risk_coverage_curve(confidence, correct)
    return float(np.mean(risk))


def prediction_rejection_ratio(confidence: ArrayLike, correct: ArrayLike) -> float:
    """Prediction rejection ratio (PRR, LM-Polygraph's headline score).

    The rejection curve keeps the k most confident documents, k = n..1, and reads their
    accuracy; PRR is the area between that curve and random rejection's (accuracy constant),
    over the area between the oracle's (every correct document kept first) and random's.

    Parameters
    ----------
    confidence : array-like of shape (n,)
        Top-label confidence in [0, 1].
    correct : array-like of shape (n,)
        1 where the prediction is right, else 0.

    Returns
    -------
    float
        (AURC_random - AURC) / (AURC_random - AURC_oracle), with :func:`aurc` (ties as in
        :func:`risk_coverage_curve`) and AURC_random the error rate: 1 for the oracle's order,
        0 for a random one, negative below chance; higher is better. When only correct or
        only wrong documents are present no order beats another: a CalibrationWarning is
        issued and 0.0 (chance) is returned.
    """
    confidence, correct = _check_pair(confidence, correct)
    n_correct = int(correct.sum())
    if n_correct in (0, correct.size):
        warnings.warn("prediction_rejection_ratio: only one class in `correct` (all correct or "
                      "all wrong); returning 0.0", CalibrationWarning, stacklevel=2)
        return 0.0
    kept = np.arange(1, correct.size + 1)
    oracle = np.mean(1.0 - np.minimum(kept, n_correct) / kept)
    random = 1.0 - n_correct / correct.size
    return float((random - aurc(confidence, correct)) / (random - oracle))


def accuracy_at_coverage(confidence: ArrayLike, correct: ArrayLike, coverage: float = 0.8) -> float:
    """Accuracy of the ceil(coverage * n) most confident documents (ties as in
    :func:`risk_coverage_curve`); ``coverage`` in (0, 1].

    Parameters
    ----------
    confidence : array-like of shape (n,)
        Top-label confidence in [0, 1].
    correct : array-like of shape (n,)
        1 where the prediction is right, else 0.
    coverage : float, default 0.8
        The share of documents kept, in (0, 1].

    Returns
    -------
    float
        Accuracy of the kept documents, in [0, 1].
    """
    if isinstance(coverage, bool) or not isinstance(coverage, (int, float)) or not (
            0.0 < coverage <= 1.0):
        raise ValueError(f"coverage must be a number in (0, 1], got {coverage!r}")
    _, risk = risk_coverage_curve(confidence, correct)
    kept = max(1, int(np.ceil(coverage * risk.size - 1e-9)))
    return float(1.0 - risk[kept - 1])


def brier_score(confidence: ArrayLike, correct: ArrayLike) -> float:
    """Binary top-label Brier score: mean of (confidence - 1[correct])^2, in [0, 1].

    Parameters
    ----------
    confidence : array-like of shape (n,)
        Top-label confidence in [0, 1].
    correct : array-like of shape (n,)
        1 where the prediction is right, else 0.

    Returns
    -------
    float
        Brier score in [0, 1]; lower is better.
    """
    confidence, correct = _check_pair(confidence, correct)
    return float(np.mean((confidence - correct) ** 2))


def auroc(confidence: ArrayLike, correct: ArrayLike) -> float:
    """Area under the ROC curve of confidence as a detector of correct predictions.

    Computed as the Mann-Whitney statistic (ties count one half). When only correct or only
    wrong documents are present the area is undefined: a CalibrationWarning is issued and 0.5
    (chance) is returned.

    Parameters
    ----------
    confidence : array-like of shape (n,)
        Top-label confidence in [0, 1].
    correct : array-like of shape (n,)
        1 where the prediction is right, else 0.

    Returns
    -------
    float
        AUROC in [0, 1]; higher is better, 0.5 is chance.
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
    # the rank sum of the correct documents less its least value, by tie groups (no scipy.stats
    # import, seconds of CPU): each correct document counts the wrong ones of lower confidence
    # and half of those of its own; whole and half numbers, summed exactly
    distinct, group = np.unique(confidence, return_inverse=True)
    right = np.bincount(group[correct == 1], minlength=distinct.size)
    wrong = np.bincount(group[correct == 0], minlength=distinct.size)
    u_stat = np.sum(right * (np.cumsum(wrong) - wrong + 0.5 * wrong))
    return float(u_stat / (n_pos * n_neg))


def _check_bootstrap_args(n_resamples, level) -> tuple[int, float]:
    n_resamples = check_positive_int(n_resamples, "n_resamples")
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0.0 < level < 1.0:
        raise ValueError(f"level must be a number strictly between 0 and 1, got {level!r}")
    return n_resamples, float(level)


# The bootstrap draws every resample at once, an (n_resamples, n) matrix of document indices from
# numpy.random.default_rng(seed). ECE (equal-width bins), Brier, AUROC and the coverage at a target
# accuracy are then computed on all resamples in one numpy pass (``_rowwise``); any other metric is
# called once per resample. Both give the same numbers for the same indices (tests/metrics check
# it). Within ``reused_resamples`` the one-pass values are computed once per data and score.


# The one-pass forms take the documents' ``confidence`` and ``correct`` and the (rows, n) index
# matrix of the resamples, and return (value per row, number of degenerate rows).


def _uniform_ece_rows(confidence: np.ndarray, correct: np.ndarray, indices: np.ndarray,
                      n_bins: int):
    confidence, correct = confidence[indices], correct[indices]
    rows, n = confidence.shape
    # one bincount over every resample: bin b of row r is r * n_bins + b
    ids = np.minimum(np.floor(confidence * n_bins).astype(int), n_bins - 1)
    ids += np.arange(rows)[:, None] * n_bins
    flat, size = ids.ravel(), rows * n_bins
    counts = np.bincount(flat, minlength=size).reshape(rows, n_bins)
    conf_sum = np.bincount(flat, weights=confidence.ravel(), minlength=size).reshape(rows, n_bins)
    correct_sum = np.bincount(flat, weights=correct.ravel(), minlength=size).reshape(rows, n_bins)
    safe = np.maximum(counts, 1)
    gaps = np.abs(np.where(counts > 0, correct_sum / safe, 0.0)
                  - np.where(counts > 0, conf_sum / safe, 0.0))
    weights = counts / n
    return np.clip(np.sum(weights * gaps, axis=1), 0.0, 1.0), 0


def _brier_rows(confidence: np.ndarray, correct: np.ndarray, indices: np.ndarray):
    return np.mean((confidence[indices] - correct[indices]) ** 2, axis=1), 0


def _tie_counts(confidence: np.ndarray, correct: np.ndarray, indices: np.ndarray,
                descending: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Per resample (row) and distinct confidence (ascending, or ``descending``): how many of
    the resampled documents hold it, and how many of those are correct (integer counts: no
    sort per resample; what ranks and running sums need, exactly)."""
    distinct, group = np.unique(confidence, return_inverse=True)
    size = distinct.size
    if descending:
        group = size - 1 - group
    rows = indices.shape[0]
    flat = (group[indices] + size * np.arange(rows)[:, None]).ravel()
    counts = np.bincount(flat, minlength=rows * size).reshape(rows, size)
    right = np.bincount(flat[correct[indices].ravel() == 1.0],
                        minlength=rows * size).reshape(rows, size)
    return counts, right


def _auroc_rows(confidence: np.ndarray, correct: np.ndarray, indices: np.ndarray):
    # the Mann-Whitney statistic by tie groups: each correct document counts the wrong ones of
    # lower confidence, and half of those of its own (the rank sum's value: every term is a
    # whole or half number, summed exactly)
    counts, n_pos_per = _tie_counts(confidence, correct, indices)
    n_neg_per = counts - n_pos_per
    n_pos = n_pos_per.sum(axis=1)
    n_neg = indices.shape[1] - n_pos
    below = np.cumsum(n_neg_per, axis=1) - n_neg_per
    u_stat = np.sum(n_pos_per * (below + 0.5 * n_neg_per), axis=1)
    one_class = (n_pos == 0) | (n_neg == 0)  # undefined: 0.5, as auroc warns and returns
    values = np.where(one_class, 0.5, u_stat / np.where(one_class, 1, n_pos * n_neg))
    return values, int(one_class.sum())


def _rowwise(metric: Callable[..., float]):
    """The one-pass form of ``metric`` over the resamples of an index matrix (rows), returning
    (values, number of degenerate rows), or None where this module has none.
    ``functools.partial`` of a score with keyword settings is recognised, also behind a wrapper
    that names it as ``__wrapped__`` (``inspect.unwrap``)."""
    metric = inspect.unwrap(metric)
    func, keywords = metric, {}
    if isinstance(metric, partial) and not metric.args:
        func, keywords = metric.func, dict(metric.keywords)
    if func is expected_calibration_error and keywords.get("strategy", "uniform") == "uniform":
        n_bins = check_positive_int(keywords.get("n_bins", 10), "n_bins")
        if set(keywords) <= {"n_bins", "strategy"}:
            return partial(_uniform_ece_rows, n_bins=n_bins)
    if func is brier_score and not keywords:
        return _brier_rows
    if func is auroc and not keywords:
        return _auroc_rows
    from .selective import _coverage_rows, coverage_at_accuracy  # selective imports this module
    if func is coverage_at_accuracy and set(keywords) <= {"target_accuracy"}:
        return partial(_coverage_rows, target_accuracy=keywords.get("target_accuracy", 0.9))
    return None


@lru_cache(maxsize=16)
def _resample_indices(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """The bootstrap's ``(n_resamples, n)`` matrix of document indices, drawn from
    ``numpy.random.default_rng(seed)`` (the same matrix for the same arguments, hence kept:
    read-only)."""
    indices = np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))
    indices.flags.writeable = False
    return indices


# resampled values kept by ``reused_resamples``: None outside it
_KEPT: dict[tuple, tuple[np.ndarray, int]] | None = None


@contextmanager
def reused_resamples() -> Iterator[None]:
    """Within the block, a score's values on the resamples of the same documents (the same
    confidences and correctness, the same index matrix) are computed once and reused by every
    :func:`bootstrap_interval` and :func:`paired_bootstrap_test` that needs them (a report
    resamples each method's scores for its interval, its paired test against vanilla and the
    leaderboard's tests, and vanilla's for every method). Only the one-pass scores are kept
    (their values depend on the data alone); the numbers are those computed without it, and each
    call warns about degenerate resamples as it would have.

    Returns
    -------
    context manager
        Nothing is bound by ``with``; the kept values are dropped at the block's end (an outer
        block's, when nested, are kept until its end).

    Examples
    --------
    >>> import numpy as np
    >>> confidence, correct = np.array([0.9, 0.6, 0.8]), np.array([1.0, 0.0, 1.0])
    >>> with reused_resamples():
    ...     first = bootstrap_interval(brier_score, confidence, correct, 50)
    ...     again = bootstrap_interval(brier_score, confidence, correct, 50)
    >>> first == again == bootstrap_interval(brier_score, confidence, correct, 50)
    True
    """
    global _KEPT
    outer, _KEPT = _KEPT, {} if _KEPT is None else _KEPT
    try:
        yield
    finally:
        _KEPT = outer


def _rowwise_key(rowwise) -> tuple:
    if isinstance(rowwise, partial):
        return (rowwise.func, rowwise.args, tuple(sorted(rowwise.keywords.items())))
    return (rowwise,)


def _resampled(metric, confidence: np.ndarray, correct: np.ndarray, n_resamples: int,
               seed: int) -> tuple[np.ndarray, int]:
    """(``metric`` on each resample, number of metric warnings), one resample per row of
    ``_resample_indices(n, n_resamples, seed)``."""
    indices = _resample_indices(confidence.size, n_resamples, seed)
    rowwise = _rowwise(metric)
    if rowwise is not None:
        if _KEPT is None:
            return rowwise(confidence, correct, indices)
        key = (_rowwise_key(rowwise), n_resamples, seed, confidence.tobytes(), correct.tobytes())
        if key not in _KEPT:
            values, degenerate = rowwise(confidence, correct, indices)
            values.flags.writeable = False
            _KEPT[key] = values, degenerate
        return _KEPT[key]
    values = np.empty(len(indices))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CalibrationWarning)
        for row, idx in enumerate(indices):
            values[row] = metric(confidence[idx], correct[idx])
    for w in caught:
        if not issubclass(w.category, CalibrationWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return values, sum(issubclass(w.category, CalibrationWarning) for w in caught)


def _warn_degenerate(caller: str, degenerate: int, n_resamples: int) -> None:
    if degenerate:
        warnings.warn(
            f"{caller}: {degenerate} metric warnings over {n_resamples} resamples "
            "(e.g. resamples holding one class only); their defined fallback values were used",
            CalibrationWarning,
            stacklevel=3,
        )


def bootstrap_interval(
    metric: Callable[..., float],
    confidence: ArrayLike,
    correct: ArrayLike,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Percentile bootstrap over documents: (point estimate, low, high).

    Parameters
    ----------
    metric : callable
        ``metric(confidence, correct)``, one of this module's scores (use functools.partial to
        fix ``n_bins`` or ``strategy``). ECE with equal-width bins, Brier and AUROC are computed
        on all resamples in one vectorised pass; other metrics once per resample.
    confidence, correct : array-like of shape (n,)
    n_resamples : int
        Resamples of n documents drawn with replacement, all at once as one
        ``(n_resamples, n)`` index matrix from ``numpy.random.default_rng(seed)``: a seed gives
        identical results.
    level : float
        Coverage of the interval, strictly between 0 and 1.
    seed : int

    Returns
    -------
    (point, low, high) : tuple of float
        For a biased statistic such as ECE the percentile interval need not contain the point.
        Resamples where the metric warns (AUROC of one class: 0.5) are counted in one
        CalibrationWarning.
    """
    confidence, correct = _check_pair(confidence, correct)
    n_resamples, level = _check_bootstrap_args(n_resamples, level)
    point = float(metric(confidence, correct))
    values, degenerate = _resampled(metric, confidence, correct, n_resamples, seed)
    _warn_degenerate("bootstrap_interval", degenerate, n_resamples)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return point, float(low), float(high)


def bootstrap_p_value(observed: float, resampled: ArrayLike) -> float:
    """Two-sided bootstrap p-value of a paired difference: twice the share of resampled
    differences on the other side of 0 from the observed one (1 when it is 0), at most 1.

    Parameters
    ----------
    observed : float
        The observed difference.
    resampled : array-like
        The resampled differences.

    Returns
    -------
    float
        The two-sided p-value, in [0, 1].
    """
    values = np.asarray(resampled, dtype=float)
    if observed > 0:
        return float(min(1.0, 2.0 * np.mean(values <= 0)))
    if observed < 0:
        return float(min(1.0, 2.0 * np.mean(values >= 0)))
    return 1.0


def paired_bootstrap_test(
    metric: Callable[..., float],
    confidence_a: ArrayLike,
    confidence_b: ArrayLike,
    correct: ArrayLike,
    n_resamples: int = 1000,
    seed: int = 0,
    correct_b: ArrayLike | None = None,
) -> dict:
    """Paired bootstrap comparison of two confidences for the same documents.

    Parameters
    ----------
    metric : callable
        ``metric(confidence, correct)``, as for :func:`bootstrap_interval`.
    confidence_a, confidence_b : array-like of shape (n,)
    correct : array-like of shape (n,)
        Correctness of a's predictions, and of b's unless ``correct_b`` is given.
    n_resamples : int
        One ``(n_resamples, n)`` index matrix from ``numpy.random.default_rng(seed)`` resamples
        the documents of both a and b alike.
    seed : int
    correct_b : array-like of shape (n,), optional
        Correctness of b's predictions where b predicts differently (e.g. vector scaling, a
        stated answer): each method is scored on its own correctness in the same resamples.

    Returns
    -------
    dict
        ``difference`` = metric(a) - metric(b); ``low``, ``high`` = 95% percentile interval of
        the resampled difference; ``p_value`` = two-sided bootstrap p-value: twice the share of
        resamples whose difference is zero or has the sign opposite to the observed one, capped
        at 1 (1.0 when the observed difference is exactly zero).
    """
    confidence_a = check_confidence(confidence_a, "confidence_a")
    confidence_b = check_confidence(confidence_b, "confidence_b")
    correct = check_correct(correct, "correct")
    correct_b = correct if correct_b is None else check_correct(correct_b, "correct_b")
    check_same_length(confidence_a=confidence_a, confidence_b=confidence_b, correct=correct,
                      correct_b=correct_b)
    n_resamples, _ = _check_bootstrap_args(n_resamples, 0.95)
    observed = float(metric(confidence_a, correct) - metric(confidence_b, correct_b))
    values_a, degenerate_a = _resampled(metric, confidence_a, correct, n_resamples, seed)
    values_b, degenerate_b = _resampled(metric, confidence_b, correct_b, n_resamples, seed)
    _warn_degenerate("paired_bootstrap_test", degenerate_a + degenerate_b, n_resamples)
    values = values_a - values_b
    low, high = np.quantile(values, [0.025, 0.975])
    return {
        "difference": observed,
        "low": float(low),
        "high": float(high),
        "p_value": bootstrap_p_value(observed, values),
    }
