"""Post-hoc calibrators: CaliDist and the logit / confidence baselines.

Each estimator is a :class:`Calibrator` (scikit-learn's shape: ``fit(X, y)`` on the calibration
data returns the estimator, ``predict(X)`` gives the calibrated confidence of new data), the
logit scalers also ``predict_proba``; each has ``to_dict`` / ``from_dict`` with a ``"kind"``
field and is saved as JSON (never pickle) by :func:`save_calibrator`.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike

# scipy is imported in the functions that use it: importing it takes seconds of CPU that a
# command listing tasks or printing help never needs
from ._validation import (
    CalibrationWarning,
    as_float_array,
    check_confidence,
    check_correct,
    check_finite_number,
    check_same_length,
)
from .instability import confidence_instability, prediction_instability, reliability_score

__all__ = [
    "BEHAVIOUR_COLUMNS",
    "BehaviourCalibrator",
    "CALIDIST_COLUMNS",
    "CONFIDENCE_COLUMNS",
    "CaliDistCalibrator",
    "Calibrator",
    "FIT_METHODS",
    "IsotonicCalibration",
    "LAMBDA_SCALES",
    "NotFittedError",
    "PlattScaling",
    "TemperatureScaling",
    "VectorScaling",
    "calibrate_answers",
    "calibrator_from_dict",
    "load_calibrator",
    "reliability_sigmoid",
    "save_calibrator",
    "stack_columns",
]

LAMBDA_SCALES = ("minmax", "log", "rank")
# How CaliDist's alpha and beta are chosen: "grid" is the paper's search alone (Appendix I),
# "refine" adds a bounded L-BFGS-B step kept only when it is not worse on the calibration set,
# "default_sigmoid" fixes alpha=0, beta=1 (the paper's "Default Sigmoid" ablation).
FIT_METHODS = ("grid", "refine", "default_sigmoid")
LAMBDA_RANGE = 10.0
_MISSING = object()


# The columns of X, in order, of the estimators whose inputs are named per document
# (``stack_columns`` builds X from named arrays).
CONFIDENCE_COLUMNS = ("confidence",)  # Platt scaling, isotonic regression
# lambda_raw: a document's raw reliability score (1 - mu) / (delta + eps), ``reliability_score``
CALIDIST_COLUMNS = ("lambda_raw", "confidence")
BEHAVIOUR_COLUMNS = ("confidence", "mu", "delta")
# Earlier names of a column, still read by ``stack_columns``
COLUMN_ALIASES = {"reliability_raw": "lambda_raw"}


@runtime_checkable
class Calibrator(Protocol):
    """What every estimator here is, in scikit-learn's shape: ``fit(X, y)`` learns from the
    calibration documents and returns the fitted estimator; ``predict(X)`` takes X of new
    documents and returns each one's calibrated confidence, shape (n,).

    X is one array of the estimator's inputs: where ``columns`` is None the logits (n, c), else
    (n, len(columns)) with those columns in that order (a single column may be given as (n,)):
    ``CONFIDENCE_COLUMNS``, ``CALIDIST_COLUMNS`` or ``BEHAVIOUR_COLUMNS``. y is the labels (the
    logit scalers) or the 0/1 correctness."""

    columns: tuple[str, ...] | None

    def fit(self, X: ArrayLike, y: ArrayLike) -> Calibrator: ...

    def predict(self, X: ArrayLike) -> np.ndarray: ...


def stack_columns(columns: Sequence[str], **values: ArrayLike) -> np.ndarray:
    """X for an estimator whose ``columns`` are these: the named 1-D arrays side by side in
    that order, e.g. ``stack_columns(CALIDIST_COLUMNS, lambda_raw=raw, confidence=p)``. A
    column's earlier name (``COLUMN_ALIASES``: ``reliability_raw``) is read as its name.

    Parameters
    ----------
    columns : sequence of str
        The column names, in order (a ``*_COLUMNS`` constant).
    **values : array-like of shape (n,)
        One array per column name.

    Returns
    -------
    ndarray of shape (n, len(columns))
        The estimator's X.
    """
    columns = [COLUMN_ALIASES.get(name, name) for name in columns]
    values = {COLUMN_ALIASES.get(name, name): value for name, value in values.items()}
    if set(values) != set(columns):
        raise ValueError(f"expected the columns {', '.join(columns)}; got "
                         f"{', '.join(values) or 'none'}")
    arrays = [as_float_array(values[name], name, allow_empty=True) for name in columns]
    check_same_length(**dict(zip(columns, arrays, strict=True)))
    return np.column_stack(arrays)


def _nonnegative(values, name: str) -> np.ndarray:
    array = as_float_array(values, name)
    if np.any(array < 0):
        raise ValueError(f"{name} must be >= 0")
    return array


# How each named column of X is checked: mu is a confidence-weighted share, in [0, 1] too.
_COLUMN_CHECKS = {"lambda_raw": as_float_array, "confidence": check_confidence,
                  "mu": check_confidence, "delta": _nonnegative}


def _columns(X: ArrayLike, columns: tuple[str, ...]) -> list[np.ndarray]:
    """X's columns, each checked as ``_COLUMN_CHECKS`` says; an error names the column
    ("X[:, 1] (confidence) must lie in [0, 1]")."""
    try:
        array = np.asarray(X, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"X must be numeric: {exc}") from None
    if array.ndim == 1 and len(columns) == 1:
        array = array[:, None]
    if array.ndim != 2 or array.shape[1] != len(columns):
        raise ValueError(f"X must have shape (n, {len(columns)}), columns "
                         f"{', '.join(columns)}; got shape {array.shape}")
    return [_COLUMN_CHECKS[name](array[:, i], f"X[:, {i}] ({name})")
            for i, name in enumerate(columns)]


class NotFittedError(ValueError, AttributeError):
    """Raised when an unfitted calibrator is used for prediction or serialisation."""


def _check_fitted(estimator, attribute: str) -> None:
    if getattr(estimator, attribute, None) is None:
        raise NotFittedError(
            f"this {type(estimator).__name__} is not fitted yet: call fit() first "
            "(or build one with from_dict())"
        )


def _check_correct(y: ArrayLike, X: np.ndarray) -> np.ndarray:
    """y as 0/1 correctness, one per row of X."""
    correct = check_correct(y, "y (correct)")
    check_same_length(X=X, y=correct)
    return correct


def _warn_degenerate_labels(correct: np.ndarray, owner: str) -> None:
    if correct.min() == correct.max():
        which = "all-correct" if correct[0] == 1 else "all-wrong"
        warnings.warn(
            f"{owner}: the calibration set is {which}; the fit is defined but degenerate "
            "(it can only shift every confidence towards the single observed outcome)",
            CalibrationWarning,
            stacklevel=3,
        )


# ---------------------------------------------------------------------------------------------
# JSON field helpers


def _field(d: dict, key: str, owner: str, default=_MISSING):
    if key not in d:
        if default is _MISSING:
            raise ValueError(f"{owner}.from_dict: missing field {key!r}")
        return default
    return d[key]


def _number_field(d: dict, key: str, owner: str, default=_MISSING) -> float | None:
    value = _field(d, key, owner, default)
    if value is None and default is None:
        return None
    try:
        return check_finite_number(value, key)
    except ValueError as exc:
        raise ValueError(f"{owner}.from_dict: invalid field {key!r}: {exc}") from None


def _array_field(d: dict, key: str, owner: str, ndim: int = 1) -> np.ndarray:
    value = _field(d, key, owner)
    if isinstance(value, (str, bytes, dict)) or value is None:
        raise ValueError(f"{owner}.from_dict: invalid field {key!r}: expected a list of numbers")
    try:
        return as_float_array(value, key, ndim=ndim)
    except ValueError as exc:
        raise ValueError(f"{owner}.from_dict: invalid field {key!r}: {exc}") from None


def _method_field(d: dict, owner: str) -> str:
    """CaliDist's ``method``, or the older boolean ``refine`` (true: "refine", false: "grid")."""
    if "method" in d:
        method = d["method"]
        if method not in FIT_METHODS:
            raise ValueError(f"{owner}.from_dict: invalid field 'method': {method!r} "
                             f"(known: {', '.join(FIT_METHODS)})")
        return method
    refine = d.get("refine", False)
    if not isinstance(refine, bool):
        raise ValueError(f"{owner}.from_dict: invalid field 'refine': expected true or false, "
                         f"got {refine!r}")
    return "refine" if refine else "grid"


def _check_kind(d, kind: str, owner: str) -> None:
    if not isinstance(d, dict):
        raise ValueError(f"{owner}.from_dict: expected a dict, got {type(d).__name__}")
    if _field(d, "kind", owner) != kind:
        raise ValueError(f"{owner}.from_dict: invalid field 'kind': expected {kind!r}, "
                         f"got {d['kind']!r}")


# ---------------------------------------------------------------------------------------------
# CaliDist


def reliability_sigmoid(reliability: ArrayLike, alpha: float, beta: float) -> float | np.ndarray:
    """CaliDist scaling factor sigma(beta * (lambda - alpha)), sigma(x) = 1 / (1 + exp(-x)).

    ``reliability`` is the scaled lambda (the paper's Appendix C plugs lambda_raw in directly).

    Parameters
    ----------
    reliability : float or array-like
        lambda in [0, 10].
    alpha, beta : float
        The sigmoid's shift and slope.

    Returns
    -------
    float or ndarray
        sigmoid(beta * (lambda - alpha)), in (0, 1).
    """
    from scipy.special import expit
    value = expit(beta * (np.asarray(reliability, dtype=float) - alpha))
    return float(value) if np.ndim(value) == 0 else value


def _brier_loss_and_grad(params, lam, confidence, correct):
    from scipy.special import expit
    alpha, beta = params
    s = expit(beta * (lam - alpha))
    residual = s * confidence - correct
    loss = np.mean(residual**2)
    common = 2.0 * residual * confidence * s * (1.0 - s)
    grad = np.array([np.mean(common * -beta), np.mean(common * (lam - alpha))])
    return loss, grad


def _brier(params: np.ndarray, lam: np.ndarray, confidence: np.ndarray,
           correct: np.ndarray) -> float:
    return float(_brier_loss_and_grad(params, lam, confidence, correct)[0])


def _grid_search(alphas: np.ndarray, betas: np.ndarray, lam: np.ndarray,
                 confidence: np.ndarray, correct: np.ndarray) -> tuple[np.ndarray, float]:
    """(alpha, beta) of the grid with the lowest Brier, and that Brier.

    Ties go to the smallest beta, then the smallest alpha: np.argmin's first minimum of the
    table brier[beta, alpha] (both grids ascending).
    """
    from scipy.special import expit
    brier = np.empty((betas.size, alphas.size))
    block = max(1, int(4e6 // (alphas.size * lam.size)))
    for start in range(0, betas.size, block):
        b = betas[start:start + block, None, None]
        s = expit(b * (lam[None, None, :] - alphas[None, :, None]))
        brier[start:start + block] = np.mean((s * confidence - correct) ** 2, axis=-1)
    b_idx, a_idx = np.unravel_index(np.argmin(brier), brier.shape)
    return np.array([alphas[a_idx], betas[b_idx]]), float(brier[b_idx, a_idx])


# The largest reliability a fit can see: (1 - mu) / (delta + epsilon) at mu = delta = 0 with
# reliability_score's default epsilon of 1e-10; a saved fit's lambda bounds lie in [0, this].
LAMBDA_RAW_MAX = 1e10
DEFAULT_ALPHA_GRID = np.linspace(-5, 5, 100)  # the paper's grids (Appendix I)
DEFAULT_BETA_GRID = np.linspace(0.1, 5, 100)


def _check_grid(values, default: np.ndarray, name: str, *, positive: bool) -> np.ndarray:
    grid = default if values is None else as_float_array(values, name)
    if positive and np.any(grid <= 0):
        raise ValueError(f"{name} must hold values > 0")
    return np.unique(grid)


class CaliDistCalibrator:
    """CaliDist: conf = sigmoid(beta * (lambda - alpha)) * p (the paper's Eq. 5).

    ``fit`` learns, on calibration documents, the bounds that map the raw reliability
    lambda_raw = (1 - mu) / (delta + eps) to lambda in [0, 10], then alpha and beta according to
    ``method``:
      - ``"grid"`` (default, the paper's Appendix I): the pair of ``alpha_grid`` x ``beta_grid``
        (defaults linspace(-5, 5, 100) and linspace(0.1, 5, 100)) with the lowest Brier score of
        the calibrated confidence against correctness, so alpha and beta are grid values. Ties
        (equal Brier) go to the smallest beta, then the smallest alpha (grids sorted ascending):
        np.argmin's first minimum of the table brier[beta, alpha];
      - ``"refine"``: the grid, then the untuned (alpha=0, beta=1) and a bounded L-BFGS-B step
        started at the best point (within the grids' ranges), each kept only if its Brier is not
        higher; alpha and beta may then lie between grid values;
      - ``"default_sigmoid"``: alpha=0, beta=1 fixed (the paper's "Default Sigmoid" ablation,
        Section 6); only the lambda bounds are fitted.
    The prediction (argmax) is never changed: only the top-label confidence is scaled, and the
    result lies in [0, p].

    ``lambda_scale``:
      - ``"minmax"`` (paper): lambda = clip((raw - min) / (max - min), 0, 1) * 10.
      - ``"log"``: the same on log1p(max(raw, 0)) (raw <= 0 is floored at 0, i.e. lambda 0).
      - ``"rank"``: lambda = 10 * #{calibration raw <= raw} / n, the empirical CDF of the
        calibration documents (their sorted raw values are stored in ``rank_reference_``).
    ``lambda_min_`` / ``lambda_max_`` are always the raw calibration bounds.

    Degenerate cases (each issues a CalibrationWarning and still gives a finite result):
      - every calibration raw reliability transforms to the same value (max == min): every
        lambda, at fit and predict time, is 5.0, so the sigmoid is one constant factor
        sigma(beta * (5 - alpha)) (in [0.5, 1) on the default grid); alpha and beta are then
        not identified separately and the grid-edge check is skipped;
      - an all-correct or all-wrong calibration set: the Brier fit proceeds (it is defined) and
        simply pushes the factor towards 1 or towards its smallest reachable value;
      - fewer than 5 calibration documents: the fit proceeds but is unreliable;
      - the fit lands on a grid edge (alpha at either end, beta at either end, within half a grid
        step; not checked for ``"default_sigmoid"``): ``grid_edge_`` is True. lambda_raw explodes
        as delta -> 0, min-max squeezes most documents near lambda = 0, and the fit degenerates
        to a flat shrink (beta at its lower edge) or the identity (beta at its upper edge with
        alpha < 0); README.md ("Metrics") and BENCHMARKS.md compare the other ``lambda_scale``.
    A grid with one value fixes that parameter; it never counts as an edge.
    No calibration documents raises ValueError.

    Parameters
    ----------
    lambda_scale : {"minmax", "log", "rank"}, default "minmax"
        How lambda_raw maps to lambda in [0, 10] (``LAMBDA_SCALES``).
    alpha_grid, beta_grid : array-like or None
        The grid searched (None: the paper's).
    method : {"grid", "refine", "default_sigmoid"}, default "grid"
        ``FIT_METHODS``, above.

    Attributes
    ----------
    alpha_, beta_ : float
        The fitted sigmoid.
    lambda_min_, lambda_max_ : float
        The raw calibration bounds.
    """

    kind = "calidist"
    columns = CALIDIST_COLUMNS

    def __init__(
        self,
        lambda_scale: str = "minmax",
        alpha_grid=None,
        beta_grid=None,
        method: str = "grid",
    ) -> None:
        self.lambda_scale = lambda_scale
        self.alpha_grid = alpha_grid
        self.beta_grid = beta_grid
        self.method = method
        self.alpha_: float | None = None
        self.beta_: float | None = None
        self.lambda_min_: float | None = None
        self.lambda_max_: float | None = None
        self.rank_reference_: np.ndarray | None = None
        self.calibration_brier_: float | None = None
        self.grid_edge_: bool = False
        self.n_calibration_: int | None = None

    # -- scaling ----------------------------------------------------------------------------

    def _transform(self, raw: np.ndarray) -> np.ndarray:
        if self.lambda_scale == "log":
            return np.log1p(np.maximum(raw, 0.0))
        return raw

    def _is_constant(self) -> bool:
        low, high = self._transform(np.array([self.lambda_min_, self.lambda_max_]))
        return bool(high <= low)

    def _scale(self, raw: np.ndarray) -> np.ndarray:
        if self._is_constant():
            return np.full(raw.shape, LAMBDA_RANGE / 2.0)
        if self.lambda_scale == "rank":
            ref = self.rank_reference_
            return LAMBDA_RANGE * np.searchsorted(ref, raw, side="right") / ref.size
        low, high = self._transform(np.array([self.lambda_min_, self.lambda_max_]))
        return np.clip((self._transform(raw) - low) / (high - low), 0.0, 1.0) * LAMBDA_RANGE

    def scaled_reliability(self, lambda_raw: ArrayLike) -> np.ndarray:
        """lambda in [0, 10] for raw reliability scores, using the fitted bounds.

        Parameters
        ----------
        lambda_raw : array-like
            The raw reliability scores (1 - mu) / (delta + eps), >= 0.

        Returns
        -------
        ndarray
            lambda in [0, 10].
        """
        _check_fitted(self, "alpha_")
        return self._scale(as_float_array(lambda_raw, "lambda_raw"))

    # -- fit / predict ----------------------------------------------------------------------

    def fit(self, X: ArrayLike, y: ArrayLike) -> CaliDistCalibrator:
        """Fit the lambda bounds, alpha and beta on calibration documents (X: columns
        ``CALIDIST_COLUMNS``, y: 0/1 correctness); return self.

        Parameters
        ----------
        X : array-like of shape (n, 2)
            Columns ``CALIDIST_COLUMNS``: lambda_raw and the confidence p.
        y : array-like of shape (n,)
            1 where the prediction is right, else 0.

        Returns
        -------
        CaliDistCalibrator
            self, fitted.
        """
        from scipy.optimize import minimize
        if self.lambda_scale not in LAMBDA_SCALES:
            raise ValueError(f"lambda_scale must be one of {LAMBDA_SCALES}, "
                             f"got {self.lambda_scale!r}")
        if self.method not in FIT_METHODS:
            raise ValueError(f"method must be one of {FIT_METHODS}, got {self.method!r}")
        raw, confidence = _columns(X, self.columns)
        correct = _check_correct(y, raw)
        n = correct.size
        alphas = _check_grid(self.alpha_grid, DEFAULT_ALPHA_GRID, "alpha_grid", positive=False)
        betas = _check_grid(self.beta_grid, DEFAULT_BETA_GRID, "beta_grid", positive=True)
        if n < 5:
            warnings.warn(f"CaliDistCalibrator: only {n} calibration documents (< 5); "
                          "the fitted alpha, beta and bounds are unreliable",
                          CalibrationWarning, stacklevel=2)
        _warn_degenerate_labels(correct, "CaliDistCalibrator")

        self.lambda_min_, self.lambda_max_ = float(raw.min()), float(raw.max())
        self.rank_reference_ = np.sort(raw) if self.lambda_scale == "rank" else None
        self.n_calibration_ = n
        if self._is_constant():
            warnings.warn("CaliDistCalibrator: every calibration reliability is the same "
                          f"({self.lambda_min_!r}); every lambda is set to 5.0",
                          CalibrationWarning, stacklevel=2)
        lam = self._scale(raw)

        if self.method == "default_sigmoid":
            best = np.array([0.0, 1.0])
            best_loss = _brier(best, lam, confidence, correct)
        else:
            best, best_loss = _grid_search(alphas, betas, lam, confidence, correct)
        if self.method == "refine":
            # The untuned sigmoid (alpha=0, beta=1) is a candidate, then L-BFGS-B from the best.
            untuned = np.array([0.0, 1.0])
            untuned_loss = _brier(untuned, lam, confidence, correct)
            if untuned_loss < best_loss:
                best, best_loss = untuned, untuned_loss
            result = minimize(_brier_loss_and_grad, best, args=(lam, confidence, correct),
                              jac=True, method="L-BFGS-B",
                              bounds=[(alphas[0], alphas[-1]), (betas[0], betas[-1])])
            if np.all(np.isfinite(result.x)):
                loss = _brier(result.x, lam, confidence, correct)
                if loss <= best_loss:
                    best, best_loss = result.x, loss

        self.alpha_, self.beta_ = float(best[0]), float(best[1])
        self.calibration_brier_ = best_loss
        edges = self._grid_edges(alphas, betas)
        if self._is_constant() or self.method == "default_sigmoid":
            edges = []  # fixed, or only the constant factor sigmoid(beta * (5 - alpha)) is known
        self.grid_edge_ = bool(edges)
        if edges:
            message = (
                "CaliDistCalibrator: the fit landed on a grid edge (" + "; ".join(edges) + "): "
                "beta at its lower edge is a flat shrink of every confidence, beta at its upper "
                "edge with alpha < 0 is nearly the identity"
            )
            if self.lambda_scale == "minmax":
                message += (". With min-max scaling lambda_raw explodes as delta -> 0 and most "
                            "documents get lambda near 0; compare lambda_scale='log' or 'rank' "
                            "on held-out data")
            warnings.warn(message, CalibrationWarning, stacklevel=2)
        return self

    def _grid_edges(self, alphas: np.ndarray, betas: np.ndarray) -> list[str]:
        edges = []
        for name, value, grid in (("alpha", self.alpha_, alphas), ("beta", self.beta_, betas)):
            if grid.size < 2:
                continue
            tol = (grid[-1] - grid[0]) / (grid.size - 1) / 2.0
            if value <= grid[0] + tol:
                edges.append(f"{name}={value:.4g} at the lower edge {grid[0]:.4g}")
            elif value >= grid[-1] - tol:
                edges.append(f"{name}={value:.4g} at the upper edge {grid[-1]:.4g}")
        return edges

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Calibrated confidence sigmoid(beta * (lambda - alpha)) * p, in [0, p] (X: columns
        ``CALIDIST_COLUMNS``).

        Parameters
        ----------
        X : array-like of shape (n, 2)
            Columns ``CALIDIST_COLUMNS``: lambda_raw and the confidence p.

        Returns
        -------
        ndarray of shape (n,)
            Calibrated confidence in [0, p].
        """
        _check_fitted(self, "alpha_")
        raw, confidence = _columns(X, self.columns)
        return reliability_sigmoid(self._scale(raw), self.alpha_, self.beta_) * confidence

    # -- JSON -------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """JSON-serialisable state (fitted parameters, bounds and diagnostics).

        Returns
        -------
        dict
            JSON-serialisable state; :func:`calibrator_from_dict` rebuilds it.
        """
        _check_fitted(self, "alpha_")

        def grid(values):
            return None if values is None else np.asarray(values, dtype=float).tolist()

        return {
            "kind": self.kind,
            "lambda_scale": self.lambda_scale,
            "alpha": self.alpha_,
            "beta": self.beta_,
            "lambda_min": self.lambda_min_,
            "lambda_max": self.lambda_max_,
            "rank_reference": None if self.rank_reference_ is None
            else self.rank_reference_.tolist(),
            "n_calibration": self.n_calibration_,
            "calibration_brier": self.calibration_brier_,
            "grid_edge": self.grid_edge_,
            "method": self.method,
            "alpha_grid": grid(self.alpha_grid),
            "beta_grid": grid(self.beta_grid),
        }

    @classmethod
    def from_dict(cls, d: dict) -> CaliDistCalibrator:
        """Rebuild a fitted calibrator; raise ValueError naming a missing or invalid field.

        Required: kind, lambda_scale, alpha, beta, lambda_min, lambda_max (and rank_reference
        when lambda_scale is "rank"). Diagnostics (n_calibration, calibration_brier, grid_edge),
        the grids and method are optional; a file written before method existed holds
        ``"refine": true`` (read as "refine") or ``false`` (read as "grid"); neither reads as
        "grid".
        """
        owner = cls.__name__
        _check_kind(d, cls.kind, owner)
        scale = _field(d, "lambda_scale", owner)
        if scale not in LAMBDA_SCALES:
            raise ValueError(f"{owner}.from_dict: invalid field 'lambda_scale': {scale!r}")
        calibrator = cls(lambda_scale=scale, method=_method_field(d, owner),
                         alpha_grid=d.get("alpha_grid"), beta_grid=d.get("beta_grid"))
        calibrator.alpha_ = _number_field(d, "alpha", owner)
        calibrator.beta_ = _number_field(d, "beta", owner)
        if calibrator.beta_ <= 0:
            raise ValueError(f"{owner}.from_dict: invalid field 'beta': must be > 0")
        calibrator.lambda_min_ = _number_field(d, "lambda_min", owner)
        calibrator.lambda_max_ = _number_field(d, "lambda_max", owner)
        for name in ("lambda_min", "lambda_max"):
            value = getattr(calibrator, f"{name}_")
            if not 0.0 <= value <= LAMBDA_RAW_MAX:
                raise ValueError(f"{owner}.from_dict: invalid field {name!r}: {value!r} is no "
                                 f"lambda_raw (0 to {LAMBDA_RAW_MAX:g})")
        if calibrator.lambda_max_ < calibrator.lambda_min_:
            raise ValueError(f"{owner}.from_dict: invalid field 'lambda_max': "
                             "smaller than lambda_min")
        if scale == "rank":
            reference = _array_field(d, "rank_reference", owner)
            if np.any(np.diff(reference) < 0):
                raise ValueError(f"{owner}.from_dict: invalid field 'rank_reference': "
                                 "must be sorted")
            calibrator.rank_reference_ = reference
        n_cal = d.get("n_calibration")
        if n_cal is not None and (isinstance(n_cal, bool) or not isinstance(n_cal, int)
                                  or n_cal < 0):
            raise ValueError(f"{owner}.from_dict: invalid field 'n_calibration': {n_cal!r}")
        calibrator.n_calibration_ = n_cal
        calibrator.calibration_brier_ = _number_field(d, "calibration_brier", owner, None)
        grid_edge = d.get("grid_edge", False)
        if not isinstance(grid_edge, bool):  # NaN or text would read as True
            raise ValueError(f"{owner}.from_dict: invalid field 'grid_edge': {grid_edge!r}")
        calibrator.grid_edge_ = grid_edge
        calibrator._check_fit_range(owner, on_grid=d.get("method") == "grid")
        return calibrator

    def _check_fit_range(self, owner: str, on_grid: bool) -> None:
        """Refuse an alpha or beta no fit of ``method`` can produce: outside the grids' ranges
        (a grid or refine fit stays within them), other than the untuned (0, 1) refine may keep,
        and other than (0, 1) for default_sigmoid; a file edited by hand (alpha = 50 scales
        every confidence to about 0). ``on_grid``: the file says a grid search made it, so
        alpha and beta must be points of its grids (a file without ``method`` may be written by
        hand, as the paper's Appendix C examples)."""
        try:
            alphas = _check_grid(self.alpha_grid, DEFAULT_ALPHA_GRID, "alpha_grid",
                                 positive=False)
            betas = _check_grid(self.beta_grid, DEFAULT_BETA_GRID, "beta_grid", positive=True)
        except ValueError as exc:
            raise ValueError(f"{owner}.from_dict: invalid field: {exc}") from None
        untuned = (self.alpha_, self.beta_) == (0.0, 1.0)
        if self.method == "default_sigmoid" or (self.method == "refine" and untuned):
            ranges = {"alpha": (0.0, 0.0), "beta": (1.0, 1.0)}
        else:
            ranges = {"alpha": (alphas[0], alphas[-1]), "beta": (betas[0], betas[-1])}
        for name, value in (("alpha", self.alpha_), ("beta", self.beta_)):
            low, high = ranges[name]
            if not low <= value <= high:
                raise ValueError(
                    f"{owner}.from_dict: invalid field {name!r}: {value!r} lies outside what a "
                    f"{self.method!r} fit can produce ([{low:g}, {high:g}], from the file's "
                    "grids or the default ones)")
        if on_grid:  # the grid search returns grid points, nothing between
            for name, value, grid in (("alpha", self.alpha_, alphas), ("beta", self.beta_, betas)):
                if not np.any(np.isclose(grid, value, rtol=1e-12, atol=0.0)):
                    raise ValueError(
                        f"{owner}.from_dict: invalid field {name!r}: {value!r} is not a point "
                        f"of the {name} grid a 'grid' fit searches (the file's {name}_grid or "
                        "the default one)")


# ---------------------------------------------------------------------------------------------
# Logit baselines


def _is_ragged(logits) -> bool:
    """A list of rows (sequences) whose lengths differ."""
    if isinstance(logits, np.ndarray) or not isinstance(logits, (list, tuple)) or not logits:
        return False
    if not all(isinstance(row, (list, tuple, np.ndarray)) for row in logits):
        return False
    return len({len(row) for row in logits}) > 1


def _check_logits(logits, name: str = "X (logits)", *, ragged: bool = False) -> np.ndarray:
    """(n, c) logits; with ``ragged``, rows of different lengths (documents whose option count
    varies) are accepted and padded with -inf, a class of probability 0."""
    if ragged and _is_ragged(logits):
        rows = [as_float_array(row, f"{name}[{i}]") for i, row in enumerate(logits)]
        if min(row.size for row in rows) < 2:
            raise ValueError(f"{name} must have at least 2 classes in every row")
        padded = np.full((len(rows), max(row.size for row in rows)), -np.inf)
        for i, row in enumerate(rows):
            padded[i, :row.size] = row
        return padded
    array = as_float_array(logits, name, ndim=2)
    if array.shape[1] < 2:
        raise ValueError(f"{name} must have at least 2 columns (classes), got {array.shape[1]}")
    return array


def _check_labels(labels, n: int, n_classes: int) -> np.ndarray:
    array = as_float_array(labels, "y (labels)")
    if array.size != n:
        raise ValueError(f"length mismatch: X={n}, y={array.size}")
    if np.any(array != np.round(array)) or np.any(array < 0) or np.any(array >= n_classes):
        raise ValueError(f"y (labels) must be integers in [0, {n_classes})")
    return array.astype(int)


def _log_softmax(z: np.ndarray) -> np.ndarray:
    from scipy.special import logsumexp
    return z - logsumexp(z, axis=1, keepdims=True)


class TemperatureScaling:
    """Temperature scaling (Guo et al. 2017): softmax(logits / T), T > 0 minimising the NLL.

    T is searched on log T within [1e-3, 1e3] (bounded Brent; the bounds and T = 1 are also
    tried and the lowest NLL kept); a CalibrationWarning is issued when T ends at a bound (an
    all-correct calibration set pushes T to 0, uninformative logits push it to infinity).
    Temperature never changes the argmax. Logits may be ragged (a list of rows whose option
    count varies, e.g. AQuA rows with 4 options beside rows with 5): a missing option is a class
    of probability 0, and ``predict_proba`` returns rows padded with zeros to the widest row.

    Attributes
    ----------
    temperature_ : float
        The fitted T.
    """

    kind = "temperature"
    columns = None  # X: the logits
    _LOG_BOUND = np.log(1e3)

    def __init__(self) -> None:
        self.temperature_: float | None = None

    def fit(self, X: ArrayLike, y: ArrayLike) -> TemperatureScaling:
        """Fit T on X, (n, c) logits (or ragged rows), and y, (n,) integer labels; return
        self.

        Parameters
        ----------
        X : array-like of shape (n, c), or a list of rows of varying length
            The option letters' logits (log-probabilities).
        y : array-like of shape (n,)
            The gold option's index.

        Returns
        -------
        TemperatureScaling
            self, fitted.
        """
        from scipy.optimize import minimize_scalar
        from scipy.special import logsumexp
        logits = _check_logits(X, ragged=True)
        labels = _check_labels(y, logits.shape[0], logits.shape[1])
        if not np.all(np.isfinite(logits[np.arange(labels.size), labels])):
            raise ValueError("y (labels) name an option that a row of ragged logits does not "
                             "have")
        rows = np.arange(labels.size)
        margins = logits - logits[rows, labels][:, None]
        margins[rows, labels] = -np.inf

        def nll(log_t):
            # -log softmax_y = log(1 + sum_{j != y} exp(z_j - z_y)), accurate near 0
            return np.mean(np.logaddexp(0.0, logsumexp(margins / np.exp(log_t), axis=1)))

        result = minimize_scalar(nll, bounds=(-self._LOG_BOUND, self._LOG_BOUND),
                                 method="bounded", options={"xatol": 1e-8})
        # ties (an NLL flat at 0) go to the bound, listed first
        candidates = [-self._LOG_BOUND, self._LOG_BOUND, 0.0, float(result.x)]
        log_t = min(candidates, key=nll)
        if abs(log_t) >= self._LOG_BOUND:
            warnings.warn(f"TemperatureScaling: T={np.exp(log_t):.4g} is at the search bound: "
                          "the calibration logits separate the labels perfectly (T -> 0) or "
                          "carry no information about them (T -> infinity)",
                          CalibrationWarning, stacklevel=2)
        self.temperature_ = float(np.exp(log_t))
        return self

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Calibrated class probabilities softmax(logits / T) of X, the logits; shape (n, c).

        Parameters
        ----------
        X : array-like of shape (n, c), or a list of rows of varying length
            The option letters' logits (log-probabilities).

        Returns
        -------
        ndarray of shape (n, c)
            Calibrated class probabilities.
        """
        _check_fitted(self, "temperature_")
        return np.exp(_log_softmax(_check_logits(X, ragged=True) / self.temperature_))

    def predict(self, X: ArrayLike) -> np.ndarray:
        """The calibrated confidence of each row's predicted option (its largest probability).

        Parameters
        ----------
        X : array-like of shape (n, c), or a list of rows of varying length
            The option letters' logits (log-probabilities).

        Returns
        -------
        ndarray of shape (n,)
            The calibrated confidence of each row's predicted option.
        """
        return self.predict_proba(X).max(axis=1)

    def to_dict(self) -> dict:
        """JSON-serialisable state.

        Returns
        -------
        dict
            JSON-serialisable state; :func:`calibrator_from_dict` rebuilds it.
        """
        _check_fitted(self, "temperature_")
        return {"kind": self.kind, "temperature": self.temperature_}

    @classmethod
    def from_dict(cls, d: dict) -> TemperatureScaling:
        """Rebuild from :meth:`to_dict` output; ValueError names a missing or invalid field."""
        _check_kind(d, cls.kind, cls.__name__)
        temperature = _number_field(d, "temperature", cls.__name__)
        if temperature <= 0:
            raise ValueError(f"{cls.__name__}.from_dict: invalid field 'temperature': must be > 0")
        calibrator = cls()
        calibrator.temperature_ = temperature
        return calibrator


class VectorScaling:
    """Vector scaling (Guo et al. 2017): softmax(w * logits + b) with per-class w and b.

    Minimises mean NLL + l2 * (||w - 1||^2 + ||b||^2) with L-BFGS-B from the identity (w = 1,
    b = 0). The small L2 pull towards the identity keeps the fit finite when a class never
    occurs or the logits separate the labels. Unlike temperature scaling it may change the
    argmax.

    Parameters
    ----------
    l2 : float, default 1e-3
        Ridge penalty on the weights' distance from 1 and the biases.

    Attributes
    ----------
    weights_, bias_ : ndarray of shape (c,)
        The fitted per-option scale and shift of the logits.
    """

    kind = "vector"
    columns = None  # X: the logits

    def __init__(self, l2: float = 1e-3) -> None:
        self.l2 = l2
        self.weights_: np.ndarray | None = None
        self.bias_: np.ndarray | None = None

    def fit(self, X: ArrayLike, y: ArrayLike) -> VectorScaling:
        """Fit w and b on X, (n, c) logits, and y, (n,) integer labels; return self.

        Parameters
        ----------
        X : array-like of shape (n, c)
            The option letters' logits.
        y : array-like of shape (n,)
            The gold option's index.

        Returns
        -------
        VectorScaling
            self, fitted.
        """
        from scipy.optimize import minimize
        logits = _check_logits(X)
        n, c = logits.shape
        labels = _check_labels(y, n, c)
        l2 = check_finite_number(self.l2, "l2")
        if l2 < 0:
            raise ValueError(f"l2 must be >= 0, got {l2!r}")
        onehot = np.eye(c)[labels]

        def objective(params):
            w, b = params[:c], params[c:]
            log_q = _log_softmax(logits * w + b)
            loss = -np.mean(np.sum(onehot * log_q, axis=1))
            loss += l2 * (np.sum((w - 1.0) ** 2) + np.sum(b**2))
            diff = np.exp(log_q) - onehot
            grad_w = np.mean(diff * logits, axis=0) + 2 * l2 * (w - 1.0)
            grad_b = np.mean(diff, axis=0) + 2 * l2 * b
            return loss, np.concatenate([grad_w, grad_b])

        start = np.concatenate([np.ones(c), np.zeros(c)])
        result = minimize(objective, start, jac=True, method="L-BFGS-B")
        params = result.x if objective(result.x)[0] <= objective(start)[0] else start
        self.weights_, self.bias_ = params[:c].copy(), params[c:].copy()
        return self

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Calibrated class probabilities softmax(w * logits + b) of X, the logits; shape
        (n, c).

        Parameters
        ----------
        X : array-like of shape (n, c)
            The option letters' logits.

        Returns
        -------
        ndarray of shape (n, c)
            Calibrated class probabilities.
        """
        _check_fitted(self, "weights_")
        logits = _check_logits(X)
        if logits.shape[1] != self.weights_.size:
            raise ValueError(f"X (logits) has {logits.shape[1]} columns, the calibrator was "
                             f"fitted on {self.weights_.size}")
        return np.exp(_log_softmax(logits * self.weights_ + self.bias_))

    def predict(self, X: ArrayLike) -> np.ndarray:
        """The calibrated confidence of each row's predicted option (its largest probability;
        vector scaling may predict another option than the logits' argmax).

        Parameters
        ----------
        X : array-like of shape (n, c)
            The option letters' logits.

        Returns
        -------
        ndarray of shape (n,)
            The calibrated confidence of each row's predicted option.
        """
        return self.predict_proba(X).max(axis=1)

    def to_dict(self) -> dict:
        """JSON-serialisable state.

        Returns
        -------
        dict
            JSON-serialisable state; :func:`calibrator_from_dict` rebuilds it.
        """
        _check_fitted(self, "weights_")
        return {"kind": self.kind, "weights": self.weights_.tolist(),
                "bias": self.bias_.tolist(), "l2": self.l2}

    @classmethod
    def from_dict(cls, d: dict) -> VectorScaling:
        """Rebuild from :meth:`to_dict` output; ValueError names a missing or invalid field."""
        owner = cls.__name__
        _check_kind(d, cls.kind, owner)
        weights = _array_field(d, "weights", owner)
        bias = _array_field(d, "bias", owner)
        if weights.size != bias.size or weights.size < 2:
            raise ValueError(f"{owner}.from_dict: invalid field 'bias': weights and bias must "
                             "have the same length >= 2")
        calibrator = cls(l2=_number_field(d, "l2", owner, 1e-3))
        calibrator.weights_, calibrator.bias_ = weights, bias
        return calibrator


# ---------------------------------------------------------------------------------------------
# Confidence baselines


def _logit(confidence: np.ndarray) -> np.ndarray:
    p = np.clip(confidence, 1e-6, 1 - 1e-6)
    return np.log(p) - np.log1p(-p)


class PlattScaling:
    """Platt scaling: calibrated = sigmoid(coef * logit(conf) + intercept).

    conf is clipped into [1e-6, 1 - 1e-6] before the logit. The log loss is minimised against
    Platt's (1999) smoothed targets (n_pos + 1) / (n_pos + 2) and 1 / (n_neg + 2), as
    scikit-learn's sigmoid calibration does, which keeps the fit finite on separable or
    one-class data (a one-class set also issues a CalibrationWarning).

    Attributes
    ----------
    coef_, intercept_ : float
        The fitted logistic map of logit(confidence).
    """

    kind = "platt"
    columns = CONFIDENCE_COLUMNS

    def __init__(self) -> None:
        self.coef_: float | None = None
        self.intercept_: float | None = None

    def fit(self, X: ArrayLike, y: ArrayLike) -> PlattScaling:
        """Fit coef and intercept on top-label confidences X, (n,) or (n, 1), and 0/1
        correctness y; return self.

        Parameters
        ----------
        X : array-like of shape (n,)
            Confidence in [0, 1].
        y : array-like of shape (n,)
            1 where the prediction is right, else 0.

        Returns
        -------
        PlattScaling
            self, fitted.
        """
        from scipy.optimize import minimize
        from scipy.special import expit
        (confidence,) = _columns(X, self.columns)
        correct = _check_correct(y, confidence)
        _warn_degenerate_labels(correct, "PlattScaling")
        x = _logit(confidence)
        n_pos = correct.sum()
        n_neg = correct.size - n_pos
        target = np.where(correct == 1, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))

        def objective(params):
            z = params[0] * x + params[1]
            loss = np.mean(np.logaddexp(0.0, z) - target * z)
            diff = expit(z) - target
            return loss, np.array([np.mean(diff * x), np.mean(diff)])

        start = np.array([0.0, np.log((n_pos + 1) / (n_neg + 1))])
        result = minimize(objective, start, jac=True, method="L-BFGS-B")
        params = result.x if objective(result.x)[0] <= objective(start)[0] else start
        self.coef_, self.intercept_ = float(params[0]), float(params[1])
        return self

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Calibrated confidence sigmoid(coef * logit(conf) + intercept) of X, the confidences.

        Parameters
        ----------
        X : array-like of shape (n,)
            Confidence in [0, 1].

        Returns
        -------
        ndarray of shape (n,)
            Calibrated confidence in (0, 1).
        """
        from scipy.special import expit
        _check_fitted(self, "coef_")
        (confidence,) = _columns(X, self.columns)
        return expit(self.coef_ * _logit(confidence) + self.intercept_)

    def to_dict(self) -> dict:
        """JSON-serialisable state.

        Returns
        -------
        dict
            JSON-serialisable state; :func:`calibrator_from_dict` rebuilds it.
        """
        _check_fitted(self, "coef_")
        return {"kind": self.kind, "coef": self.coef_, "intercept": self.intercept_}

    @classmethod
    def from_dict(cls, d: dict) -> PlattScaling:
        """Rebuild from :meth:`to_dict` output; ValueError names a missing or invalid field."""
        _check_kind(d, cls.kind, cls.__name__)
        calibrator = cls()
        calibrator.coef_ = _number_field(d, "coef", cls.__name__)
        calibrator.intercept_ = _number_field(d, "intercept", cls.__name__)
        return calibrator


def _pool_adjacent_violators(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted least-squares non-decreasing fit of y (pool adjacent violators)."""
    values, weights, sizes = [], [], []
    for value, weight in zip(y, w, strict=True):
        values.append(value)
        weights.append(weight)
        sizes.append(1)
        while len(values) > 1 and values[-2] > values[-1]:
            total = weights[-2] + weights[-1]
            values[-2] = (values[-2] * weights[-2] + values[-1] * weights[-1]) / total
            weights[-2] = total
            sizes[-2] += sizes[-1]
            del values[-1], weights[-1], sizes[-1]
    return np.repeat(values, sizes)


class IsotonicCalibration:
    """Isotonic regression of correctness on confidence (non-decreasing, values in [0, 1]).

    Tied confidences are first pooled (mean correctness, weighted by count), then fitted with
    pool-adjacent-violators. ``predict`` interpolates linearly between the fitted points and
    holds the end values outside the fitted range. A one-class set issues a
    CalibrationWarning (the fit is then constant 0 or 1).

    Attributes
    ----------
    x_, y_ : ndarray
        The fitted step function's knots.
    """

    kind = "isotonic"
    columns = CONFIDENCE_COLUMNS

    def __init__(self) -> None:
        self.x_: np.ndarray | None = None
        self.y_: np.ndarray | None = None

    def fit(self, X: ArrayLike, y: ArrayLike) -> IsotonicCalibration:
        """Fit on top-label confidences X, (n,) or (n, 1), and 0/1 correctness y; return self.

        Parameters
        ----------
        X : array-like of shape (n,)
            Confidence in [0, 1].
        y : array-like of shape (n,)
            1 where the prediction is right, else 0.

        Returns
        -------
        IsotonicCalibration
            self, fitted.
        """
        (confidence,) = _columns(X, self.columns)
        correct = _check_correct(y, confidence)
        _warn_degenerate_labels(correct, "IsotonicCalibration")
        x, inverse = np.unique(confidence, return_inverse=True)
        counts = np.bincount(inverse).astype(float)
        means = np.bincount(inverse, weights=correct) / counts
        self.x_ = x
        self.y_ = np.clip(_pool_adjacent_violators(means, counts), 0.0, 1.0)
        return self

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Calibrated confidence of X, the confidences, by linear interpolation of the fitted
        steps.

        Parameters
        ----------
        X : array-like of shape (n,)
            Confidence in [0, 1].

        Returns
        -------
        ndarray of shape (n,)
            Calibrated confidence in [0, 1].
        """
        _check_fitted(self, "x_")
        (confidence,) = _columns(X, self.columns)
        return np.interp(confidence, self.x_, self.y_)

    def to_dict(self) -> dict:
        """JSON-serialisable state.

        Returns
        -------
        dict
            JSON-serialisable state; :func:`calibrator_from_dict` rebuilds it.
        """
        _check_fitted(self, "x_")
        return {"kind": self.kind, "x": self.x_.tolist(), "y": self.y_.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> IsotonicCalibration:
        """Rebuild from :meth:`to_dict` output; ValueError names a missing or invalid field."""
        owner = cls.__name__
        _check_kind(d, cls.kind, owner)
        x = _array_field(d, "x", owner)
        y = _array_field(d, "y", owner)
        if x.size != y.size:
            raise ValueError(f"{owner}.from_dict: invalid field 'y': length differs from 'x'")
        if np.any(np.diff(x) <= 0):
            raise ValueError(f"{owner}.from_dict: invalid field 'x': must be strictly increasing")
        if np.any(np.diff(y) < 0) or np.any(y < 0) or np.any(y > 1):
            raise ValueError(f"{owner}.from_dict: invalid field 'y': must be non-decreasing "
                             "in [0, 1]")
        calibrator = cls()
        calibrator.x_, calibrator.y_ = x, y
        return calibrator


# ---------------------------------------------------------------------------------------------
# Behaviour-feature calibrator (beyond the paper)


class BehaviourCalibrator:
    """conf = sigmoid(w . z + b), z = standardised [logit(p), mu, delta] (beyond the paper).

    A small logistic regression of correctness on the original top-label confidence p and the
    two instability measures, fitted on the calibration documents by minimising the log loss (a
    proper scoring rule) plus ``l2 * ||w||^2``. It uses the behaviour under distractors directly
    instead of through lambda_raw = (1 - mu) / (delta + eps), which explodes as delta -> 0. The
    prediction is never changed (only the top-label confidence is replaced), so accuracy is
    preserved; unlike CaliDist the result may exceed p.

    Features are standardised with the calibration set's mean and standard deviation (a constant
    feature keeps scale 1 and so contributes nothing). As in :class:`PlattScaling` the targets
    are Platt's smoothed (n_pos + 1) / (n_pos + 2) and 1 / (n_neg + 2), which keeps the fit
    finite on separable data; an all-correct or all-wrong set issues a CalibrationWarning (the
    fit is then a near-constant confidence), and so do fewer than 5 calibration documents.

    Parameters
    ----------
    l2 : float, default 1e-2
        Ridge penalty of the logistic regression.

    Attributes
    ----------
    mean_, scale_ : ndarray
        The features' standardisation.
    coef_ : ndarray
        The fitted coefficients.
    """

    kind = "behaviour"
    columns = BEHAVIOUR_COLUMNS
    features = ("logit_confidence", "mu", "delta")  # what ``coef_`` weighs, saved in its file

    def __init__(self, l2: float = 1e-2) -> None:
        self.l2 = l2
        self.mean_: np.ndarray | None = None
        self.scale_: np.ndarray | None = None
        self.coef_: np.ndarray | None = None
        self.intercept_: float | None = None

    def _features(self, X: ArrayLike) -> np.ndarray:
        confidence, mu, delta = _columns(X, self.columns)
        return np.column_stack([_logit(confidence), mu, delta])

    def fit(self, X: ArrayLike, y: ArrayLike) -> BehaviourCalibrator:
        """Fit on calibration documents' p, mu, delta (X: columns ``BEHAVIOUR_COLUMNS``) and
        0/1 correctness y; return self.

        Parameters
        ----------
        X : array-like of shape (n, 3)
            Columns ``BEHAVIOUR_COLUMNS``: p, mu and delta.
        y : array-like of shape (n,)
            1 where the prediction is right, else 0.

        Returns
        -------
        BehaviourCalibrator
            self, fitted.
        """
        from scipy.optimize import minimize
        from scipy.special import expit
        x = self._features(X)
        correct = _check_correct(y, x)
        l2 = check_finite_number(self.l2, "l2")
        if l2 < 0:
            raise ValueError(f"l2 must be >= 0, got {l2!r}")
        if correct.size < 5:
            warnings.warn(f"BehaviourCalibrator: only {correct.size} calibration documents "
                          "(< 5); the fit is unreliable", CalibrationWarning, stacklevel=2)
        _warn_degenerate_labels(correct, "BehaviourCalibrator")
        self.mean_ = x.mean(axis=0)
        std = x.std(axis=0)
        self.scale_ = np.where(std > 0, std, 1.0)
        z = (x - self.mean_) / self.scale_
        n_pos = correct.sum()
        n_neg = correct.size - n_pos
        target = np.where(correct == 1, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))

        def objective(params):
            w, b = params[:-1], params[-1]
            logits = z @ w + b
            loss = np.mean(np.logaddexp(0.0, logits) - target * logits) + l2 * w @ w
            diff = expit(logits) - target
            return loss, np.append(z.T @ diff / z.shape[0] + 2 * l2 * w, np.mean(diff))

        start = np.append(np.zeros(z.shape[1]), np.log((n_pos + 1) / (n_neg + 1)))
        result = minimize(objective, start, jac=True, method="L-BFGS-B")
        params = result.x if objective(result.x)[0] <= objective(start)[0] else start
        self.coef_, self.intercept_ = params[:-1].copy(), float(params[-1])
        return self

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Calibrated top-label confidence in (0, 1) (X: columns ``BEHAVIOUR_COLUMNS``); the
        prediction itself is unchanged.

        Parameters
        ----------
        X : array-like of shape (n, 3)
            Columns ``BEHAVIOUR_COLUMNS``: p, mu and delta.

        Returns
        -------
        ndarray of shape (n,)
            Calibrated confidence in (0, 1).
        """
        from scipy.special import expit
        _check_fitted(self, "coef_")
        z = (self._features(X) - self.mean_) / self.scale_
        return expit(z @ self.coef_ + self.intercept_)

    def to_dict(self) -> dict:
        """JSON-serialisable state.

        Returns
        -------
        dict
            JSON-serialisable state; :func:`calibrator_from_dict` rebuilds it.
        """
        _check_fitted(self, "coef_")
        return {"kind": self.kind, "features": list(self.features), "l2": self.l2,
                "mean": self.mean_.tolist(), "scale": self.scale_.tolist(),
                "coef": self.coef_.tolist(), "intercept": self.intercept_}

    @classmethod
    def from_dict(cls, d: dict) -> BehaviourCalibrator:
        """Rebuild from :meth:`to_dict` output; ValueError names a missing or invalid field."""
        owner = cls.__name__
        _check_kind(d, cls.kind, owner)
        calibrator = cls(l2=_number_field(d, "l2", owner, 1e-2))
        n = len(cls.features)
        for key in ("mean", "scale", "coef"):
            value = _array_field(d, key, owner)
            if value.size != n:
                raise ValueError(f"{owner}.from_dict: invalid field {key!r}: expected {n} "
                                 f"values ({', '.join(cls.features)})")
            setattr(calibrator, f"{key}_", value)
        if np.any(calibrator.scale_ <= 0):
            raise ValueError(f"{owner}.from_dict: invalid field 'scale': must be > 0")
        calibrator.intercept_ = _number_field(d, "intercept", owner)
        return calibrator


# ---------------------------------------------------------------------------------------------
# Persistence

_KINDS = {
    cls.kind: cls
    for cls in (CaliDistCalibrator, TemperatureScaling, VectorScaling, PlattScaling,
                IsotonicCalibration, BehaviourCalibrator)
}


def calibrator_from_dict(d: dict) -> Calibrator:
    """Rebuild any calibrator from its ``to_dict`` output, dispatching on ``d["kind"]``.

    Parameters
    ----------
    d : dict
        A calibrator's ``to_dict()``.

    Returns
    -------
    Calibrator
        The fitted calibrator.
    """
    if not isinstance(d, dict):
        raise ValueError(f"calibrator_from_dict: expected a dict, got {type(d).__name__}")
    if "kind" not in d:
        raise ValueError("calibrator_from_dict: missing field 'kind'")
    if d["kind"] not in _KINDS:
        raise ValueError(f"calibrator_from_dict: invalid field 'kind': {d['kind']!r} "
                         f"(known: {sorted(_KINDS)})")
    return _KINDS[d["kind"]].from_dict(d)


def save_calibrator(calibrator: Calibrator, path: str | os.PathLike, **context) -> Path:
    """Write ``{"calibrator": calibrator.to_dict(), "context": context}`` as JSON; return path.

    ``context`` holds what callers know (task, labels, model...) and must be JSON-serialisable.

    Parameters
    ----------
    calibrator : Calibrator
        A fitted calibrator.
    path : str or os.PathLike
        The JSON file to write.
    **context
        JSON-serialisable facts stored beside it.

    Returns
    -------
    pathlib.Path
        The file written.
    """
    payload = {"calibrator": calibrator.to_dict(), "context": context}
    try:
        text = json.dumps(payload, indent=2, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"context is not JSON-serialisable: {exc}") from None
    path = Path(path)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def load_calibrator(path: str | os.PathLike) -> tuple[Calibrator, dict]:
    """Read a file written by :func:`save_calibrator`: return (calibrator, context).

    Raises ValueError naming the file on malformed JSON or a missing or invalid field.

    Parameters
    ----------
    path : str or os.PathLike
        A file of :func:`save_calibrator`.

    Returns
    -------
    (Calibrator, dict)
        The calibrator and its context.
    """
    path = Path(path)
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: malformed calibrator JSON: {exc}") from None
    if not isinstance(payload, dict) or "calibrator" not in payload:
        raise ValueError(f"{path}: missing field 'calibrator'")
    context = payload.get("context", {})
    if not isinstance(context, dict):
        raise ValueError(f"{path}: invalid field 'context': expected an object")
    try:
        calibrator = calibrator_from_dict(payload["calibrator"])
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return calibrator, context


def calibrate_answers(
    fit: str | os.PathLike | CaliDistCalibrator,
    confidence: ArrayLike,
    prediction: Sequence,
    hinted_predictions: Sequence[Sequence],
    hinted_confidences: Sequence[Sequence[float]],
    delta_mode: str | None = None,
) -> np.ndarray:
    """CaliDist's calibrated confidence of new answers under a saved fit, in one call.

    Parameters
    ----------
    fit : path or CaliDistCalibrator
        A file written by :func:`save_calibrator` (a run's ``--metadata save_calibrator``), or
        a fitted :class:`CaliDistCalibrator`.
    confidence : array-like of shape (n,)
        p: each document's confidence in its answer to the original prompt, in [0, 1].
    prediction : sequence of length n
        Each document's answer to the original prompt (a label index, a number or a string).
    hinted_predictions : sequence of n sequences
        Per document, its answers under the misleading hints that name a label other than its
        prediction (the ones CaliDist counts; documents may have different numbers of them).
    hinted_confidences : sequence of n sequences of float
        The confidences of those answers, in the same order.
    delta_mode : {"mean", "worst_case"}, optional
        How the confidence moves are pooled (:func:`confidence_instability`); default: the one
        the file records (the run's ``--metadata delta_mode``), else "mean".

    Returns
    -------
    numpy.ndarray of shape (n,)
        sigmoid(beta * (lambda - alpha)) * p per document, lambda from
        ``reliability_score(mu, delta)`` scaled by the fit's bounds: what the run's records log
        as ``calibrated["calidist"]`` for documents with these answers.

    Raises
    ------
    ValueError
        The file is not a CaliDist fit, the lengths differ (naming the document), or a document
        has no hinted answer.

    Examples
    --------
    docs/python_api.md, "Per-answer calibrated confidence", runs one end to end.
    """
    context: dict = {}
    calibrator = fit
    if not isinstance(fit, CaliDistCalibrator):
        calibrator, context = load_calibrator(fit)
        if not isinstance(calibrator, CaliDistCalibrator):
            raise ValueError(f"{fit}: holds a {type(calibrator).__name__}, not a CaliDist fit")
    mode = delta_mode or context.get("delta_mode") or "mean"
    confidence = check_confidence(confidence, "confidence")
    check_same_length(confidence=confidence, prediction=prediction,
                      hinted_predictions=hinted_predictions,
                      hinted_confidences=hinted_confidences)
    raw = np.empty(confidence.size)
    for i, (p, answer, answers, confidences) in enumerate(zip(
            confidence.tolist(), prediction, hinted_predictions, hinted_confidences,
            strict=True)):
        if len(answers) != len(confidences):
            raise ValueError(f"document {i}: {len(answers)} hinted_predictions but "
                             f"{len(confidences)} hinted_confidences")
        if not len(answers):
            raise ValueError(f"document {i}: no hinted answer (pass the answers under the hints "
                             "that name a label other than its prediction)")
        mu = prediction_instability(answer, list(answers), [float(c) for c in confidences])
        delta = confidence_instability(p, [float(c) for c in confidences], mode=mode)
        raw[i] = reliability_score(float(mu), float(delta))
    return calibrator.predict(stack_columns(CALIDIST_COLUMNS, lambda_raw=raw,
                                            confidence=confidence))
