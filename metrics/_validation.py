"""Input checks shared by the calibration library (numpy only)."""

from __future__ import annotations

import numbers

import numpy as np


class CalibrationWarning(UserWarning):
    """A result is defined but degenerate (one class only, tiny or constant calibration set...)."""


def as_float_array(values, name: str, *, ndim: int | None = 1, allow_empty: bool = False):
    """Return ``values`` as a float array; raise ValueError naming ``name`` if unusable."""
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric: {exc}") from None
    if ndim is not None and array.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {array.shape}")
    if array.size == 0 and not allow_empty:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return array


def check_confidence(values, name: str = "confidence", *, ndim: int | None = 1):
    """Return ``values`` as a float array of probabilities in [0, 1]."""
    array = as_float_array(values, name, ndim=ndim)
    if np.any(array < 0.0) or np.any(array > 1.0):
        raise ValueError(f"{name} must lie in [0, 1], got values in [{array.min()}, {array.max()}]")
    return array


def check_correct(values, name: str = "correct"):
    """Return a 1-D float array of 0/1 outcomes (booleans or 0/1 numbers accepted)."""
    array = as_float_array(values, name)
    if not np.all((array == 0.0) | (array == 1.0)):
        raise ValueError(f"{name} must contain only 0/1 or booleans")
    return array


def check_same_length(**arrays) -> int:
    """Raise ValueError when the given 1-D arrays differ in length; return the common length."""
    lengths = {name: len(array) for name, array in arrays.items()}
    if len(set(lengths.values())) > 1:
        detail = ", ".join(f"{name}={length}" for name, length in lengths.items())
        raise ValueError(f"length mismatch: {detail}")
    return next(iter(lengths.values()))


def check_positive_int(value, name: str) -> int:
    """Return ``value`` as an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_finite_number(value, name: str) -> float:
    """Return ``value`` as a finite float (booleans and strings are rejected)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return value
