"""Aggregation: a task's metrics from its per-document records.

Pure functions of the records that ``joining`` builds; the task class only routes lm-eval's
aggregation calls here. Each method's confidence comes from its fit in the registry
(``methods.Method.fit``, functions in ``fits``, which also keeps the saved-fit policy), the same
call ``calidist report`` makes; the metric names and their directions are the registry's
(``methods``); a task logs the calibration warnings with ``calibration_warnings``. Numbers are
fractions in [0, 1] (the paper prints them x100).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from calidist_metrics import CalibrationWarning
from calidist_tasks.confidence import consistency
from calidist_tasks.registry import (
    LOGIT,
    SCORES,
    Method,
    fitted_methods,
    metric_names,
    unreadable_metrics,
)
from calidist_tasks.scoring.fits import (
    calidist_calibrator,
    calidist_inputs,
    column,
    reading_settings,
    save_fit,
    second_reading,
    split_records,
)
from calidist_tasks.scoring.records import (
    CONSISTENCY,
    LOGPROB,
    SAMPLING_KINDS,
    STABLE_LAMBDA_RAW,
    TEMPERATURE_SCALING,
    VANILLA,
    VECTOR_SCALING,
    metric_name,
)
from calidist_tasks.settings import RunSettings

# reliability_score's epsilon: a document whose delta is below it (0 up to rounding) did not move,
# and its lambda_raw = (1 - mu) / (delta + epsilon) is set by epsilon (STABLE_LAMBDA_RAW = 1 /
# epsilon when mu = 0 too), not measured; lambda_min / lambda_max leave such documents out.
EPSILON = 1.0 / STABLE_LAMBDA_RAW


def _scores(confidence: np.ndarray, correct: np.ndarray, evaluation: Sequence[Mapping[str, Any]],
            name: str = "") -> dict[str, float]:
    """Every score of one confidence (``name``: its metric suffix, "" for CaliDist's) on the
    ``evaluation`` records, each document whose original reply was unreadable scored as the
    unreadable rule left its record (at 1/c; an unreadable answer wrong), whatever the method
    made of it: every method scores the same documents the same way there
    (docs/paper_fidelity.md)."""
    unreadable = np.fromiter((bool(r.get("unreadable_original")) for r in evaluation),
                             dtype=bool, count=len(evaluation))
    if unreadable.any():
        confidence, correct = np.array(confidence, dtype=float), np.array(correct, dtype=float)
        confidence[unreadable] = column(evaluation, "confidence")[unreadable]
        correct[unreadable] = column(evaluation, "correct")[unreadable]
    return {metric_name(score, name): float(fn(confidence, correct))
            for score, fn in SCORES.items()}


def unreadable_counts(evaluation: Sequence[Mapping[str, Any]],
                      distracted: bool) -> dict[str, float]:
    """``unreadable_original`` (evaluation documents whose original reply was unreadable) and,
    for a task with hints, ``unreadable_hinted`` (their unreadable hinted replies)."""
    counts = {"unreadable_original": float(sum(r.get("unreadable_original", 0)
                                               for r in evaluation))}
    if distracted:
        counts["unreadable_hinted"] = float(sum(r.get("unreadable_hinted", 0) for r in evaluation))
    return counts


def reasoning_metrics(evaluation: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Does the model reason? Over the evaluation documents' replies (their ``reply_shape``):
    ``reasoned_rate``, the share with two or more step lines before their answer;
    ``cut_rate``, the share that ran on past their end and were cut there; ``readable_rate``,
    the share whose answer and confidence were read; ``output_tokens_per_reply`` (the paper's
    Table 4 reports 74 for a Vanilla reply). {} when the records carry no shapes."""
    shapes = [r["reply_shape"] for r in evaluation if r.get("reply_shape")]
    replies = sum(shape["replies"] for shape in shapes)
    if not replies:
        return {}
    total = {key: sum(shape[key] for shape in shapes)
             for key in ("reasoned", "cut", "readable", "output_tokens")}
    return {"reasoned_rate": total["reasoned"] / replies, "cut_rate": total["cut"] / replies,
            "readable_rate": total["readable"] / replies,
            "output_tokens_per_reply": total["output_tokens"] / replies}


def _common(calibration: list, evaluation: list) -> dict[str, float]:
    correct = column(evaluation, "correct")
    return {
        "acc": float(correct.mean()),
        "requests_per_doc": float(column(evaluation, "requests").mean()),
        "n_calibration": float(len(calibration)),
        "n_evaluation": float(len(evaluation)),
        **_scores(column(evaluation, "confidence"), correct, evaluation, VANILLA),
    }


def summarize_calidist(
    records: Sequence[Mapping[str, Any]], settings: RunSettings, context: Mapping[str, Any]
) -> dict[str, float]:
    """CaliDist metrics on the evaluation documents, fitted on the calibration documents."""
    calibration, evaluation = split_records(records)
    calibrator = calidist_calibrator(calibration, settings, context)
    save_fit(calibrator, settings, context)
    correct = column(evaluation, "correct")
    calibrated = calibrator.predict(calidist_inputs(evaluation))
    return {
        **_common(calibration, evaluation),
        **_scores(calibrated, correct, evaluation),
        "flip_rate": float(column(evaluation, "flipped").mean()),
        "mu_mean": float(column(evaluation, "mu").mean()),
        "delta_mean": float(column(evaluation, "delta").mean()),
        "alpha": float(calibrator.alpha_),
        "beta": float(calibrator.beta_),
        **lambda_diagnostics(calibration),
    }


def lambda_diagnostics(calibration: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """``lambda_min`` / ``lambda_max``: the smallest and largest lambda_raw of the calibration
    documents that moved under the hints, NaN when none did; and ``stable_fraction``: the share
    of calibration documents whose confidence did not move (delta < EPSILON, 0 up to rounding)
    and whose answer not every hint changed (mu < 1): their lambda_raw = (1 - mu) / EPSILON, up
    to 1 / EPSILON = 1e10, is set by EPSILON rather than measured.

    With no such document and a fit made in this run, the two bounds are exactly the fit's
    min-max bounds. With one, the fit's upper bound is a stable document's lambda_raw (1e10 when
    mu = 0 too): min-max then gives the stable documents lambda near 10 and every document that
    moved lambda <= 10 * lambda_max / 1e10, about 0 (README, "Metrics"). The fit is unchanged:
    these are diagnostics only (a saved fit's own bounds are in its file).
    """
    if not calibration:
        return dict.fromkeys(("lambda_min", "lambda_max", "stable_fraction"), math.nan)
    raw = column(calibration, "lambda_raw")
    delta = np.asarray([r.get("delta", math.nan) for r in calibration], dtype=float)
    stable = ((delta < EPSILON) & (raw > 0)) | (raw >= STABLE_LAMBDA_RAW)  # raw 0: mu = 1
    moved = raw[~stable]
    return {
        "lambda_min": float(moved.min()) if moved.size else math.nan,
        "lambda_max": float(moved.max()) if moved.size else math.nan,
        "stable_fraction": float(stable.mean()),
    }


def fitted_scores(
    methods: Sequence[Method],
    calibration: Sequence[Mapping[str, Any]],
    evaluation: Sequence[Mapping[str, Any]],
    settings: RunSettings,
    context: Mapping[str, Any],
) -> tuple[dict[str, float], dict[str, Any]]:
    """Every score of each method's fit (its ``fit``, as ``calidist report`` calls it), but the
    model's own confidence (``_common`` scores it): (metrics, {confidence: fits.Fitted or None}).
    A method undefined for these records (None) has NaN scores."""
    results: dict[str, float] = {}
    fitted: dict[str, Any] = {}
    for method in methods:
        if method.own:
            continue
        fitted[method.confidence] = found = method.fit(calibration, evaluation, settings, context)
        if found is None:  # skipped (vector scaling on documents with different option counts)
            results.update({method.metric(score): math.nan for score in SCORES})
        else:
            results.update(_scores(found.confidence, found.correct, evaluation,
                                   method.confidence))
    return results, fitted


def summarize_baselines(
    records: Sequence[Mapping[str, Any]], settings: RunSettings, context: Mapping[str, Any]
) -> dict[str, float]:
    """Vanilla confidence and the logit baselines (TS, Platt, isotonic, vector scaling)."""
    calibration, evaluation = split_records(records)
    if not calibration:
        raise ValueError(f"{context['task']}: no calibration documents to fit the baselines on")
    scores, fitted = fitted_scores(fitted_methods(False, LOGIT), calibration, evaluation,
                                   settings, context)
    vector = fitted.get(VECTOR_SCALING)
    extras = {"temperature": float(fitted[TEMPERATURE_SCALING].estimator.temperature_),
              metric_name("acc", VECTOR_SCALING):
                  math.nan if vector is None else float(vector.correct.mean())}
    return {**_common(calibration, evaluation), **scores, **extras}


# ------------------------------------------------- generation tasks (verbalized, consistency, SPUQ)
# Above this share of unreadable replies the scores describe the parser's fallback (1/c), not
# the model: every calibration score is then NaN, with a warning, so no table shows a good ECE.
UNREADABLE_LIMIT = 0.5


def parse_fail_rate(records: Sequence[Mapping[str, Any]]) -> float:
    """Share of the records' generations whose answer (or needed confidence) was unreadable."""
    generations = sum(r["generations"] for r in records)
    return float(sum(r["parse_failures"] for r in records) / generations)


def summarize_generations(
    records: Sequence[Mapping[str, Any]],
    settings: RunSettings,
    context: Mapping[str, Any],
    confidence: str,
    distracted: bool,
) -> dict[str, float]:
    """Metrics of a generation task; a distracted verbalized task is CaliDist's summary."""
    results = _summarize_generations(records, settings, context, confidence, distracted)
    results.update(reasoning_metrics(split_records(records)[1]))
    logprobs = summarize_logprobs(records, settings, context, distracted)
    if confidence == CONSISTENCY:  # samples that were not sampled (a server, greedy)
        message = consistency.identical_samples_warning(split_records(records)[1])
        if message:
            warnings.warn(message, CalibrationWarning, stacklevel=2)
    return {**unless_unreadable(results), **logprobs}


def logprob_metric_names(distracted: bool) -> list[str]:
    """A verbalized task's CaliDist (log-prob) metrics: the logit task's, suffixed."""
    return [metric_name(name, LOGPROB)
            for name in (*metric_names(distracted), *unreadable_metrics(distracted))]


def summarize_logprobs(
    records: Sequence[Mapping[str, Any]],
    settings: RunSettings,
    context: Mapping[str, Any],
    distracted: bool,
) -> dict[str, float]:
    """The log-prob readings of a verbalized task's replies (``answer_logprobs``) summarized as
    a logit task's (``summarize_letters``), names suffixed ``_logprob``; {} when the records hold
    none. A saved fit (``calibrator``) applies to both readings; only the verbalized one is saved
    (``save_calibrator``): ``fits.reading_settings``, as the report's log-prob rows fit it."""
    scored = second_reading(records, LOGPROB)
    if not scored:
        return {}
    results = summarize_letters(scored, reading_settings(settings, saved_fit=True), context,
                                distracted, "replies had no readable answer letter")
    return {metric_name(name, LOGPROB): value for name, value in results.items()}


def summarize_letters(
    records: Sequence[Mapping[str, Any]],
    settings: RunSettings,
    context: Mapping[str, Any],
    distracted: bool,
    what: str = "replies were unreadable",
) -> dict[str, float]:
    """Replies read by their answer letter's log-probabilities, summarized as a logit task's
    (CaliDist, or vanilla and the logit baselines) with the readings' ``parse_fail_rate``;
    every score NaN when most were unreadable (``unless_unreadable``, ``what`` says how)."""
    summarize = summarize_calidist if distracted else summarize_baselines
    evaluation = split_records(records)[1]
    results = {**summarize(records, settings, context),
               "parse_fail_rate": parse_fail_rate(evaluation),
               **unreadable_counts(evaluation, distracted)}
    return unless_unreadable(results, what)


def unless_unreadable(results: dict[str, float],
                      what: str = "replies were unreadable") -> dict[str, float]:
    """``results``, or, when more than ``UNREADABLE_LIMIT`` of the replies were unreadable
    (``parse_fail_rate``; ``what`` says how), every score of SCORES (under any suffix) NaN with
    a warning; accuracy and counts kept."""
    if not results["parse_fail_rate"] > UNREADABLE_LIMIT:
        return results
    warnings.warn(
        f"{results['parse_fail_rate']:.0%} of the evaluation {what} (more than "
        f"{UNREADABLE_LIMIT:.0%}): every calibration score of this reading is NaN, since it "
        "would measure the parser's fallback, not the model; see docs/backends.md",
        CalibrationWarning, stacklevel=2)
    return {name: math.nan if name.startswith(tuple(SCORES)) else value
            for name, value in results.items()}


def _summarize_generations(
    records: Sequence[Mapping[str, Any]],
    settings: RunSettings,
    context: Mapping[str, Any],
    confidence: str,
    distracted: bool,
) -> dict[str, float]:
    calibration, evaluation = split_records(records)
    results = {"parse_fail_rate": parse_fail_rate(evaluation),
               **unreadable_counts(evaluation, distracted)}
    if distracted:
        return {**summarize_calidist(records, settings, context), **results}
    results.update(_common(calibration, evaluation))
    if confidence not in SAMPLING_KINDS and not calibration:  # verbalized: Platt, isotonic
        raise ValueError(f"{context['task']}: no calibration documents to fit the baselines on")
    scores, _ = fitted_scores(fitted_methods(False, confidence), calibration, evaluation,
                              settings, context)
    results.update(scores)
    if confidence == CONSISTENCY:
        results["identical_samples_rate"] = consistency.identical_samples_rate(evaluation)
    return results
