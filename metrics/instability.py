"""CaliDist per-document instability measures (paper section 3; docs/method.md).

For one document: the original prompt gives prediction y_hat with confidence p; the k distracted
prompts give predictions y_j with confidences p'_j. Each function also accepts a batch: pass the
distracted values as an (n, k) array and the original values as an (n,) array (the original's
shape must equal the distracted shape without its last axis); the result is then an array of
n values. Documents with different k need one call each.

One document's call with plain Python values (integer labels, a list of float confidences) takes
a pure-Python path: lm-eval calls these once per document, and for a handful of values numpy's
per-call overhead was most of the per-document cost. Inputs that path does not accept go
through numpy, which gives the same numbers or the error messages.
"""

from __future__ import annotations

import itertools
import math
import operator

import numpy as np
from numpy.typing import ArrayLike

from ._validation import as_float_array, check_confidence, check_finite_number

__all__ = [
    "DELTA_MODES", "STABILITY_EPSILON", "confidence_instability", "prediction_instability",
    "reliability_score",
]

# epsilon of lambda_raw = (1 - mu) / (delta + epsilon) (paper section 3): keeps a document whose
# confidence did not move (delta = 0) finite; such a document's lambda_raw is set by it
# (1 / STABILITY_EPSILON = 1e10 when mu = 0 too), not measured.
STABILITY_EPSILON = 1e-10

# how the confidence moves of one document are pooled: their mean, or the largest one
DELTA_MODES = ("mean", "worst_case")


def _check_distracted(values, name: str, *, probability: bool) -> np.ndarray:
    if probability:
        array = as_float_array(values, name, ndim=None, allow_empty=True)
    else:
        array = _check_labels(values, name)
    if array.ndim == 0:
        raise ValueError(f"{name} must be a sequence (one entry per distracted prompt)")
    if array.shape[-1] == 0:
        raise ValueError(f"{name} is empty: k == 0 distracted prompts")
    if probability and (np.any(array < 0.0) or np.any(array > 1.0)):
        raise ValueError(f"{name} must lie in [0, 1]")
    return array


def _check_labels(values, name: str) -> np.ndarray:
    """Labels may be integers, numbers (open-ended answers) or strings; numbers must be finite."""
    array = np.asarray(values)
    if array.dtype.kind in "biuf":
        return as_float_array(array, name, ndim=None, allow_empty=True)
    if array.dtype.kind not in "UO":
        raise ValueError(f"{name} must hold integer, numeric or string labels")
    return array


def _check_leading_shape(original, name, distracted, distracted_name) -> None:
    if original.shape != distracted.shape[:-1]:
        raise ValueError(
            f"{name} of shape {original.shape} does not match {distracted_name} of shape "
            f"{distracted.shape} (expected {name} of shape {distracted.shape[:-1]})"
        )


def _scalar_or_array(value: np.ndarray) -> float | np.ndarray:
    return float(value) if np.ndim(value) == 0 else value


def _plain_probabilities(values) -> bool:
    """A non-empty list or tuple of Python floats in [0, 1] (NaN fails the range test)."""
    return (type(values) in (list, tuple) and len(values) > 0
            and all(type(v) is float and 0.0 <= v <= 1.0 for v in values))


def _plain_labels(original, predictions) -> bool:
    """An integer label and a list or tuple of integer labels (booleans excluded)."""
    return (type(original) is int and type(predictions) in (list, tuple)
            and all(type(v) is int for v in predictions))


def prediction_instability(
    original_prediction: int | ArrayLike,
    distracted_predictions: ArrayLike,
    distracted_confidences: ArrayLike,
) -> float | np.ndarray:
    """mu = (1/k) * sum_j 1[y_j != y_hat] * p'_j, in [0, 1].

    The share of distracted prompts that flipped the prediction, each flip weighted by the
    confidence of the distracted answer. Predictions are compared with ``!=``: integer label
    indices (the contract), numbers (open-ended answers) or strings all work. Raises ValueError
    when k == 0.

    Parameters
    ----------
    original_prediction : int or array-like of shape (n,)
        The prediction on the original prompt.
    distracted_predictions : array-like of shape (k,) or (n, k)
        The predictions on the k hinted prompts.
    distracted_confidences : array-like of shape (k,) or (n, k)
        Their confidences, in [0, 1].

    Returns
    -------
    float or ndarray
        mu in [0, 1] per document.
    """
    if (_plain_labels(original_prediction, distracted_predictions)
            and _plain_probabilities(distracted_confidences)
            and len(distracted_predictions) == len(distracted_confidences)):
        flips = map(operator.ne, distracted_predictions, itertools.repeat(original_prediction))
        return sum(itertools.compress(distracted_confidences, flips)) / len(distracted_confidences)
    predictions = _check_distracted(
        distracted_predictions, "distracted_predictions", probability=False
    )
    confidences = _check_distracted(
        distracted_confidences, "distracted_confidences", probability=True
    )
    if predictions.shape != confidences.shape:
        raise ValueError(
            "length mismatch: distracted_predictions has shape "
            f"{predictions.shape}, distracted_confidences has shape {confidences.shape}"
        )
    original = _check_labels(original_prediction, "original_prediction")
    if original.size == 0:
        raise ValueError("original_prediction is empty")
    _check_leading_shape(original, "original_prediction", predictions, "distracted_predictions")
    flipped = predictions != np.expand_dims(original, -1)
    return _scalar_or_array(np.mean(flipped * confidences, axis=-1))


def confidence_instability(
    original_confidence: float | ArrayLike, distracted_confidences: ArrayLike, mode: str = "mean"
) -> float | np.ndarray:
    """Confidence instability delta.

    ``mode="mean"`` (paper): delta = |p - mean_j p'_j|. ``mode="worst_case"`` (the paper's
    ablation): delta = max(0, p - min_j p'_j), the largest confidence drop. Raises ValueError
    when k == 0.

    Parameters
    ----------
    original_confidence : float or array-like of shape (n,)
        p, the original prompt's confidence in [0, 1].
    distracted_confidences : array-like of shape (k,) or (n, k)
        The hinted prompts' confidences, in [0, 1].
    mode : {"mean", "worst_case"}, default "mean"
        ``DELTA_MODES``: |p - mean p'_j|, or the largest drop max(0, p - min p'_j).

    Returns
    -------
    float or ndarray
        delta >= 0 per document.
    """
    if mode not in DELTA_MODES:
        raise ValueError(f"mode must be one of {DELTA_MODES}, got {mode!r}")
    if (type(original_confidence) is float and 0.0 <= original_confidence <= 1.0
            and _plain_probabilities(distracted_confidences)):
        if mode == "mean":
            mean = sum(distracted_confidences) / len(distracted_confidences)
            return abs(original_confidence - mean)
        return max(0.0, original_confidence - min(distracted_confidences))
    confidences = _check_distracted(
        distracted_confidences, "distracted_confidences", probability=True
    )
    original = check_confidence(original_confidence, "original_confidence", ndim=None)
    _check_leading_shape(original, "original_confidence", confidences, "distracted_confidences")
    if mode == "mean":
        delta = np.abs(original - np.mean(confidences, axis=-1))
    else:
        delta = np.maximum(0.0, original - np.min(confidences, axis=-1))
    return _scalar_or_array(delta)


def reliability_score(
    prediction_instability: float | ArrayLike,
    confidence_instability: float | ArrayLike,
    epsilon: float = STABILITY_EPSILON,
) -> float | np.ndarray:
    """The reliability score lambda_raw = (1 - mu) / (delta + epsilon), >= 0.

    Parameters
    ----------
    prediction_instability : float or array-like
        mu in [0, 1] (:func:`prediction_instability`), one per document.
    confidence_instability : float or array-like
        delta >= 0 (:func:`confidence_instability`), broadcastable with mu.
    epsilon : float, default STABILITY_EPSILON (1e-10)
        Keeps lambda_raw finite when delta = 0: a fully stable document (mu = delta = 0)
        scores 1 / epsilon = 1e10.

    Returns
    -------
    float or ndarray
        lambda_raw per document (a float for scalar inputs).
    """
    if (type(prediction_instability) is float and 0.0 <= prediction_instability <= 1.0
            and type(confidence_instability) is float and 0.0 <= confidence_instability < math.inf
            and type(epsilon) is float and 0.0 < epsilon < math.inf):
        return (1.0 - prediction_instability) / (confidence_instability + epsilon)
    mu = as_float_array(prediction_instability, "prediction_instability", ndim=None)
    delta = as_float_array(confidence_instability, "confidence_instability", ndim=None)
    if np.any(mu < 0.0) or np.any(mu > 1.0):
        raise ValueError("prediction_instability must lie in [0, 1]")
    if np.any(delta < 0.0):
        raise ValueError("confidence_instability must be >= 0")
    epsilon = check_finite_number(epsilon, "epsilon")
    if epsilon <= 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon!r}")
    try:
        return _scalar_or_array((1.0 - mu) / (delta + epsilon))
    except ValueError:
        raise ValueError(
            f"prediction_instability of shape {mu.shape} does not broadcast with "
            f"confidence_instability of shape {delta.shape}"
        ) from None
