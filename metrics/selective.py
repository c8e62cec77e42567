"""Selective prediction: act on an answer only when its confidence reaches a threshold.

The question of someone who must act on the answers: to be right at least ``target`` of the time,
from which confidence on may I trust an answer, and what share of the answers do I keep? Every
function takes ``confidence`` and ``correct`` as the scores do (:mod:`calidist_metrics.scores`);
the risk-coverage curve behind the answer is :func:`calidist_metrics.risk_coverage_curve`.
"""

from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from ._validation import check_confidence, check_correct, check_same_length
from .scores import bootstrap_interval

__all__ = [
    "SelectiveThreshold", "coverage_at_accuracy", "selective_threshold",
    "selective_threshold_interval",
]


class SelectiveThreshold(NamedTuple):
    """The answer to "act when confidence >= threshold": what it keeps and how often it is
    right; threshold NaN, coverage 0 and accuracy NaN when no threshold reaches the target.

    Attributes
    ----------
    threshold : float
        Act on the answers whose confidence is at least this.
    coverage : float
        Share of the documents whose confidence is at least ``threshold``.
    accuracy : float
        Share of those that are correct (at least the target accuracy).
    """

    threshold: float
    coverage: float
    accuracy: float


def _check_target(target_accuracy: float) -> float:
    if isinstance(target_accuracy, bool) or not isinstance(target_accuracy, (int, float)) or not (
            0.0 < target_accuracy <= 1.0):
        raise ValueError(f"target_accuracy must be a number in (0, 1], got {target_accuracy!r}")
    return float(target_accuracy)


def selective_threshold(confidence: ArrayLike, correct: ArrayLike,
                        target_accuracy: float = 0.9) -> SelectiveThreshold:
    """The lowest confidence threshold whose kept answers reach ``target_accuracy``.

    Parameters
    ----------
    confidence : array-like of shape (n,)
        Each document's confidence in its answer, in [0, 1].
    correct : array-like of shape (n,)
        1 (or True) where that answer is right, else 0.
    target_accuracy : float, default 0.9
        The accuracy the kept answers must reach, in (0, 1].

    Returns
    -------
    SelectiveThreshold
        ``threshold``: the lowest confidence t among the documents' such that the documents with
        confidence >= t are correct at least ``target_accuracy`` of the time, hence the largest
        such ``coverage`` (their share of the n documents), and their ``accuracy``. Documents of
        equal confidence are kept or dropped together (a threshold cannot split them). When no
        threshold reaches the target: (NaN, 0.0, NaN).

    Notes
    -----
    The threshold is chosen on the same documents it is measured on, so its coverage is an
    in-sample (optimistic) estimate; :func:`selective_threshold_interval` gives its bootstrap
    interval. Accuracy among the kept answers need not fall as coverage grows, which is why the
    lowest threshold that reaches the target is searched for, not the first one from the top
    that misses it.

    Examples
    --------
    >>> selective_threshold([0.9, 0.8, 0.7, 0.6], [1, 1, 0, 1], target_accuracy=0.75)
    SelectiveThreshold(threshold=0.6, coverage=1.0, accuracy=0.75)
    """
    target = _check_target(target_accuracy)
    confidence = check_confidence(confidence, "confidence")
    correct = check_correct(correct, "correct")
    n = check_same_length(confidence=confidence, correct=correct)
    order = np.argsort(-confidence, kind="stable")
    ranked = confidence[order]
    # the last document of each run of equal confidences: where a threshold can stop
    ends = np.flatnonzero(np.r_[ranked[1:] != ranked[:-1], True])
    kept = ends + 1
    accuracy = np.cumsum(correct[order])[ends] / kept
    reached = np.flatnonzero(accuracy >= target - 1e-12)  # 1e-12: 0.9 of 10 is 9 / 10
    if not reached.size:
        return SelectiveThreshold(math.nan, 0.0, math.nan)
    last = reached[-1]
    return SelectiveThreshold(float(ranked[ends[last]]), float(kept[last] / n),
                              float(accuracy[last]))


def coverage_at_accuracy(confidence: ArrayLike, correct: ArrayLike,
                         target_accuracy: float = 0.9) -> float:
    """The coverage of :func:`selective_threshold`: the largest share of the documents that
    can be kept, most confident first, with accuracy at least ``target_accuracy`` (0 when none
    can); higher is better, in [0, 1].

    Parameters
    ----------
    confidence, correct : array-like of shape (n,)
        As for :func:`selective_threshold`.
    target_accuracy : float, default 0.9
        The accuracy the kept answers must reach, in (0, 1].

    Returns
    -------
    float
        The kept share of the documents.
    """
    return selective_threshold(confidence, correct, target_accuracy).coverage


def _coverage_rows(confidence: np.ndarray, correct: np.ndarray, indices: np.ndarray,
                   target_accuracy: float) -> tuple[np.ndarray, int]:
    """:func:`coverage_at_accuracy` of every resample (row of ``indices``) in one numpy pass
    (the bootstrap's one-pass form, ``scores._rowwise``), with the same numbers as one call per
    resample: the documents kept and the correct ones among them are counted per distinct
    confidence, most confident first (integer counts, no sort per resample); a threshold stops
    at a confidence the resample holds. No resample is degenerate."""
    from .scores import _tie_counts

    target = _check_target(target_accuracy)
    counts, right = _tie_counts(confidence, correct, indices, descending=True)
    kept, kept_right = np.cumsum(counts, axis=1), np.cumsum(right, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = kept_right / kept
    reached = (counts > 0) & (accuracy >= target - 1e-12)  # 1e-12: as selective_threshold
    most = np.max(np.where(reached, kept, 0), axis=1)  # kept grows: the lowest threshold's
    return most / indices.shape[1], 0


def selective_threshold_interval(
    confidence: ArrayLike,
    correct: ArrayLike,
    target_accuracy: float = 0.9,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[SelectiveThreshold, float, float]:
    """:func:`selective_threshold` with a percentile bootstrap interval of its coverage.

    Parameters
    ----------
    confidence, correct : array-like of shape (n,)
        As for :func:`selective_threshold`.
    target_accuracy : float, default 0.9
        The accuracy the kept answers must reach, in (0, 1].
    n_resamples : int, default 1000
        Bootstrap resamples of the n documents (with replacement), each choosing its own
        threshold, as :func:`calidist_metrics.bootstrap_interval` draws them.
    level : float, default 0.95
        Coverage probability of the interval.
    seed : int, default 0
        Seed of ``numpy.random.default_rng``: a seed gives identical results.

    Returns
    -------
    (SelectiveThreshold, float, float)
        The threshold on all documents, and the low and high ends of its coverage's interval.
    """
    found = selective_threshold(confidence, correct, target_accuracy)
    _, low, high = bootstrap_interval(
        partial(coverage_at_accuracy, target_accuracy=target_accuracy), confidence, correct,
        n_resamples=n_resamples, level=level, seed=seed)
    return found, low, high
