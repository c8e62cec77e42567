"""Aggregation: a task's metrics from its per-document records.

Functions of the records that ``joining`` builds; the task class only routes lm-eval's
aggregation calls here. Each method's confidence comes from its fit in the registry
(``registry.Method.fit``, functions in ``fits``, which also keeps the saved-fit policy), the same
call ``calidist report`` makes; the metric names and their directions are the registry's; a
task logs the calibration warnings with ``calibration_warnings``. Numbers are fractions in
[0, 1] (the paper prints them x100). Each summary also logs on every evaluation record the
confidence each method gave its answer (``log_confidences``, records.CALIBRATED), from which
``metric_stderr`` gives lm-eval's stderr of each score.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from calidist_metrics import STABILITY_EPSILON, CalibrationWarning
from calidist_tasks.confidence import consistency
from calidist_tasks.registry import (
    LOGIT,
    SCORES,
    Method,
    calidist_method,
    fitted_methods,
    metric_names,
    unreadable_metrics,
)
from calidist_tasks.scoring.fits import (
    column,
    reading_settings,
    save_fit,
    second_reading,
    split_records,
)
from calidist_tasks.scoring.records import (
    CALIBRATED,
    CALIBRATED_CORRECT,
    CALIDIST,
    CALIDIST_KEY,
    CONSISTENCY,
    LOGPROB,
    SAMPLING_KINDS,
    STABLE_LAMBDA_RAW,
    TEMPERATURE_SCALING,
    VANILLA,
    VECTOR_SCALING,
    Record,
    confidence_key,
    metric_name,
)
from calidist_tasks.settings import RunSettings


def _scores(confidence: np.ndarray, correct: np.ndarray, suffix: str = "") -> dict[str, float]:
    """Every score of one confidence (``suffix``: its metric suffix, "" for CaliDist's)."""
    return {metric_name(score, suffix): float(fn(confidence, correct))
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
    the share whose answer and confidence were read; ``copied_rate``, the share that repeat a
    line of an exemplar word for word; ``output_tokens_per_reply`` (the paper's
    Table 4 reports 74 for a Vanilla reply). {} when the records carry no shapes."""
    shapes = [r["reply_shape"] for r in evaluation if r.get("reply_shape")]
    replies = sum(shape["replies"] for shape in shapes)
    if not replies:
        return {}
    total = {key: sum(shape.get(key, 0.0) for shape in shapes)
             for key in ("reasoned", "cut", "readable", "copied", "output_tokens")}
    return {"reasoned_rate": total["reasoned"] / replies, "cut_rate": total["cut"] / replies,
            "readable_rate": total["readable"] / replies,
            "copied_rate": total["copied"] / replies,
            "output_tokens_per_reply": total["output_tokens"] / replies}


def _common(calibration: list, evaluation: list) -> dict[str, float]:
    correct = column(evaluation, "correct")
    mark_calibration(calibration)
    log_confidences(evaluation, VANILLA, column(evaluation, "confidence"), correct)
    return {
        "acc": float(correct.mean()),
        "requests_per_doc": float(column(evaluation, "requests").mean()),
        "n_calibration": float(len(calibration)),
        "n_evaluation": float(len(evaluation)),
        **_scores(column(evaluation, "confidence"), correct, VANILLA),
    }


def summarize_calidist(
    records: Sequence[Mapping[str, Any]], settings: RunSettings, context: Mapping[str, Any]
) -> dict[str, float]:
    """CaliDist metrics on the evaluation documents, fitted on the calibration documents."""
    calibration, evaluation = split_records(records)
    fitted = calidist_method().fit(calibration, evaluation, settings, context)
    calibrator = fitted.estimator
    save_fit(calibrator, settings, context)
    log_confidences(evaluation, CALIDIST, fitted.confidence, fitted.correct)
    return {
        **_common(calibration, evaluation),
        **_scores(fitted.confidence, fitted.correct),
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
    of calibration documents whose confidence did not move (delta < epsilon, 0 up to rounding;
    ``calidist_metrics.STABILITY_EPSILON``) and whose answer not every hint changed (mu < 1):
    their lambda_raw = (1 - mu) / epsilon, up to 1 / epsilon = 1e10, is set by epsilon rather
    than measured.

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
    stable = ((delta < STABILITY_EPSILON) & (raw > 0)) | (raw >= STABLE_LAMBDA_RAW)  # raw 0: mu = 1
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
    model's own confidence (``_common`` scores it): (metrics, {suffix: fits.Fitted or None}).
    A method undefined for these records (None) has NaN scores."""
    results: dict[str, float] = {}
    fitted: dict[str, Any] = {}
    for method in methods:
        if method.own:
            continue
        fitted[method.suffix] = found = method.fit(calibration, evaluation, settings, context)
        if found is None:  # skipped (vector scaling on documents with different option counts)
            results.update({method.metric(score): math.nan for score in SCORES})
        else:
            log_confidences(evaluation, method.suffix, found.confidence, found.correct)
            results.update(_scores(found.confidence, found.correct, method.suffix))
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
    source: str,
    distracted: bool,
) -> dict[str, float]:
    """Metrics of a generation task of confidence source ``source``; a distracted verbalized
    task is CaliDist's summary."""
    results = _summarize_generations(records, settings, context, source, distracted)
    results.update(reasoning_metrics(split_records(records)[1]))
    logprobs = summarize_logprobs(records, settings, context, distracted)
    if source == CONSISTENCY:  # samples that were not sampled (a server, greedy)
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
    lift_reading(records, LOGPROB)
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
    source: str,
    distracted: bool,
) -> dict[str, float]:
    calibration, evaluation = split_records(records)
    results = {"parse_fail_rate": parse_fail_rate(evaluation),
               **unreadable_counts(evaluation, distracted)}
    if distracted:
        return {**summarize_calidist(records, settings, context), **results}
    results.update(_common(calibration, evaluation))
    if source not in SAMPLING_KINDS and not calibration:  # verbalized: Platt, isotonic
        raise ValueError(f"{context['task']}: no calibration documents to fit the baselines on")
    scores, _ = fitted_scores(fitted_methods(False, source), calibration, evaluation,
                              settings, context)
    results.update(scores)
    if source == CONSISTENCY:
        results["identical_samples_rate"] = consistency.identical_samples_rate(evaluation)
    return results


# ------------------------------------------------- per-document confidences (records.CALIBRATED)
def log_confidences(evaluation: Sequence[Record], suffix: str, values: Any,
                    correct: Any) -> None:
    """Log the value and correctness of the confidence of metric suffix ``suffix`` on each
    evaluation record, in their order: in
    one process these are the very dicts lm-eval logs in its samples file after the aggregation
    (docs/python_api.md, "Per-answer calibrated confidence")."""
    key = confidence_key(suffix)
    for record, value, right in zip(evaluation, np.asarray(values, dtype=float).tolist(),
                                    np.asarray(correct, dtype=float).tolist(), strict=True):
        record.setdefault(CALIBRATED, {})[key] = value
        record.setdefault(CALIBRATED_CORRECT, {})[key] = int(right)


def mark_calibration(calibration: Sequence[Record]) -> None:
    """Mark the calibration records: the fits were made on them, they have no scored answer."""
    for record in calibration:
        record[CALIBRATED] = record[CALIBRATED_CORRECT] = None


def lift_reading(records: Sequence[Record], reading: str) -> None:
    """Move the confidences logged on each record's second reading ``record[reading]`` into the
    record's own, keyed as that reading's metrics are named: "ts" of the "logprob" reading under
    "ts_logprob" (``registry._logprob``), its CaliDist under "logprob"."""
    for record in records:
        sub = record.get(reading)
        if not isinstance(sub, dict) or CALIBRATED not in sub:
            continue
        for field in (CALIBRATED, CALIBRATED_CORRECT):
            logged = sub.pop(field)
            if logged is None:  # a calibration document
                record[field] = None
                continue
            own = record.setdefault(field, {})
            for key, value in logged.items():
                own[reading if key == CALIDIST_KEY else f"{key}_{reading}"] = value


# ------------------------------------------------- lm-eval's <metric>_stderr
# At most this many resamples per metric, whatever bootstrap_iters asks (simple_evaluate's
# default, and the only value of lm-eval 0.4.13's CLI, is 100000), as lm-eval caps its own costly
# metrics (BLEU, chrF, TER) at 100: a task reports up to 45 scores, each resampled in Python.
# Enough for a +- column (the report's intervals use calidist report --bootstrap).
STDERR_RESAMPLES = 200
# smooth ECE solves for its bandwidth in every resample (~7 ms at 300 documents)
STDERR_RESAMPLES_OF = {"smece": 100}


def interval_score(name: str) -> tuple[str, str] | None:
    """(score, confidence suffix) of a metric that has an interval: accuracy or a score of
    SCORES under any confidence ("ece_ts_logprob" -> ("ece", "ts_logprob")); None for a
    diagnostic (alpha, counts, rates), which gets no stderr."""
    for score in sorted(("acc", *SCORES), key=len, reverse=True):
        if name == score or name.startswith(score + "_"):
            return score, name[len(score) + 1:]
    return None


def metric_stderr(name: str, records: Sequence[Mapping[str, Any]],
                  summary: Mapping[str, float], iters: int, seed: int = 0) -> float | str:
    """lm-eval's ``<name>_stderr`` of a metric with an interval (``interval_score``), "N/A"
    where its value is not a number. Accuracy: lm-eval's own ``mean_stderr`` of the 0/1
    outcomes, sqrt(acc (1 - acc) / (n - 1)). A score: the standard deviation (ddof 1, as
    lm-eval's ``bootstrap_stderr``) of the score over at most ``iters`` resamples
    (``STDERR_RESAMPLES``) of the evaluation documents with each document's confidence as logged
    (``log_confidences``): the fit is fixed, only the documents scored vary."""
    value = summary.get(name)
    score, suffix = interval_score(name) or (None, "")
    if score is None or value is None or not math.isfinite(value):
        return "N/A"
    if score == "acc":
        n = summary.get(metric_name("n_evaluation", suffix), summary.get("n_evaluation", 0))
        return math.sqrt(value * (1.0 - value) / (n - 1)) if n > 1 else "N/A"
    key = confidence_key(suffix)
    logged = [r for r in records if (r.get(CALIBRATED) or {}).get(key) is not None]
    if len(logged) < 2:
        return "N/A"
    confidence = np.fromiter((r[CALIBRATED][key] for r in logged), float, len(logged))
    correct = np.fromiter((r[CALIBRATED_CORRECT][key] for r in logged), float, len(logged))
    rng = np.random.default_rng(seed)
    count = min(iters, STDERR_RESAMPLES_OF.get(score, STDERR_RESAMPLES))
    if count < 2:  # a standard deviation needs two resamples
        return "N/A"
    resamples = rng.integers(0, len(logged), size=(count, len(logged)))
    with warnings.catch_warnings():  # a resample of one class only: AUROC's defined 0.5
        warnings.simplefilter("ignore", CalibrationWarning)
        values = [SCORES[score](confidence[i], correct[i]) for i in resamples]
    return float(np.std(values, ddof=1))
