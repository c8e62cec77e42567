"""Aggregation: fit calibrators on the calibration records, score the evaluation records.

Pure functions of the per-document records that ``joining`` builds; the task class only routes
lm-eval's aggregation calls here. Numbers are fractions in [0, 1] (the paper prints them x100).
"""

from __future__ import annotations

import logging
import math
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from calidist_metrics import (
    CalibrationWarning,
    CaliDistCalibrator,
    IsotonicCalibration,
    PlattScaling,
    TemperatureScaling,
    VectorScaling,
    aurc,
    auroc,
    brier_score,
    expected_calibration_error,
    load_calibrator,
    maximum_calibration_error,
    save_calibrator,
    smooth_ece,
)
from calidist_tasks import consistency
from calidist_tasks.records import (
    CALIBRATION,
    CONSISTENCY,
    EVALUATION,
    ISOTONIC,
    LOGIT_BASELINES,
    PLATT,
    SAMPLING_KINDS,
    SPUQ,
    STABLE_LAMBDA_RAW,
    TEMPERATURE_SCALING,
    VANILLA,
    VECTOR_SCALING,
    VERBALIZED_BASELINES,
    metric_name,
)
from calidist_tasks.settings import RunSettings

log = logging.getLogger(__name__)

# How ``ece`` and ``ece_adaptive`` bin (calidist_metrics.reliability_bins), printed wherever
# results are: libraries differ here (a 5%-step confidence of exactly 0.7 falls in another bin
# under a right-closed rule) by up to 0.014 ECE.
ECE_BINNING = ("ECE: top-label, 10 equal-width bins [0, 0.1), [0.1, 0.2), ..., [0.9, 1.0], "
               "each closed on the left (a confidence of exactly 0.7 is in [0.7, 0.8); 1.0 in "
               "the last bin); adaptive ECE: 10 equal-mass bins")
SCORES: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "ece": lambda c, y: expected_calibration_error(c, y, n_bins=10, strategy="uniform"),
    "ece_adaptive": lambda c, y: expected_calibration_error(c, y, n_bins=10, strategy="quantile"),
    "brier": brier_score,
    "auroc": auroc,
    "mce": lambda c, y: maximum_calibration_error(c, y, n_bins=10, strategy="uniform"),
    "smece": smooth_ece,
    "aurc": aurc,
}
DIAGNOSTICS = (
    "flip_rate", "mu_mean", "delta_mean", "alpha", "beta", "lambda_min", "lambda_max",
    "stable_fraction", "requests_per_doc", "n_calibration", "n_evaluation",
)
# reliability_score's epsilon: a document whose delta is below it (0 up to rounding) did not move,
# and its lambda_raw = (1 - mu) / (delta + epsilon) is set by epsilon (STABLE_LAMBDA_RAW = 1 /
# epsilon when mu = 0 too), not measured; lambda_min / lambda_max leave such documents out.
EPSILON = 1.0 / STABLE_LAMBDA_RAW
# the fitted temperature, and vector scaling's own accuracy (it may change the prediction)
BASELINE_EXTRAS = ("temperature", metric_name("acc", VECTOR_SCALING), "requests_per_doc",
                   "n_calibration", "n_evaluation")


def metric_names(distracted: bool) -> list[str]:
    """The metrics a task reports: CaliDist's (distracted) or the logit baselines' (original)."""
    vanilla = [metric_name(name, VANILLA) for name in SCORES]
    if distracted:
        return ["acc", *SCORES, *vanilla, *DIAGNOSTICS]
    baselines = [metric_name(name, b) for b in LOGIT_BASELINES for name in SCORES]
    return ["acc", *vanilla, *baselines, *BASELINE_EXTRAS]


def higher_is_better(name: str) -> bool | None:
    """True for accuracy and AUROC, False for ECE, MCE, smECE, Brier, AURC and the unreadable
    share; None (lm-eval then prints no arrow) for diagnostics such as alpha, beta, lambda bounds
    and counts."""
    if name.startswith(("acc", "auroc")):
        return True
    if name.startswith(("ece", "mce", "smece", "brier", "aurc", "parse_fail_rate")):
        return False
    return None


def _scores(confidence: np.ndarray, correct: np.ndarray, name: str = "") -> dict[str, float]:
    """Every score of one confidence (``name``: its metric suffix, "" for CaliDist's)."""
    return {metric_name(score, name): float(fn(confidence, correct))
            for score, fn in SCORES.items()}


def split_records(records: Sequence[Mapping[str, Any]]) -> tuple[list, list]:
    """(calibration, evaluation) records, each in document order; no evaluation -> ValueError."""
    ordered = sorted(records, key=lambda r: r["index"])  # ranks gather in any order
    calibration = [r for r in ordered if r["split"] == CALIBRATION]
    evaluation = [r for r in ordered if r["split"] == EVALUATION]
    if not evaluation:
        raise ValueError(
            "no evaluation documents reached the aggregation (did --samples name calibration "
            f"documents only? {len(calibration)} calibration documents were scored)"
        )
    return calibration, evaluation


def _column(records: Sequence[Mapping[str, Any]], key: str) -> np.ndarray:
    return np.asarray([r[key] for r in records], dtype=float)


def _common(calibration: list, evaluation: list) -> dict[str, float]:
    return {
        "acc": float(_column(evaluation, "correct").mean()),
        "requests_per_doc": float(_column(evaluation, "requests").mean()),
        "n_calibration": float(len(calibration)),
        "n_evaluation": float(len(evaluation)),
        **_scores(_column(evaluation, "confidence"), _column(evaluation, "correct"), VANILLA),
    }


@contextmanager
def warnings_named(task: str) -> Iterator[None]:
    """Log the calibration warnings (``CalibrationWarning``) raised in the block once each, as
    one line naming the task (``warning_lines``): a group run fits one set per task, and the same
    cause (a one-class calibration set for Platt and isotonic, AUROC of one class for every
    confidence) is one line, with no source line echoed. Other warnings pass on unchanged."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
    finally:  # also when the block fails: what it warned about may explain why
        ours = [str(w.message) for w in caught if issubclass(w.category, CalibrationWarning)]
        for line in warning_lines(task, ours):
            log.warning("%s", line)
        for w in caught:
            if not issubclass(w.category, CalibrationWarning):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


_OWNER = re.compile(r"^(\w+): (.+)$", re.S)  # "PlattScaling: the calibration set is all-correct"


def warning_lines(task: str, messages: Sequence[str]) -> list[str]:
    """One line per distinct warning of ``task``, in order: messages that differ only in the
    estimator or score they start with ("IsotonicCalibration: ...") are one line naming them all;
    line breaks are folded."""
    grouped: dict[str, list[str]] = {}
    for message in messages:
        text = " ".join(str(message).split())
        match = _OWNER.match(text)
        owner, rest = (match[1], match[2]) if match else ("", text)
        owners = grouped.setdefault(rest, [])
        if owner and owner not in owners:
            owners.append(owner)
    return [f"{task}: {', '.join(owners) + ': ' if owners else ''}{rest}"
            for rest, owners in grouped.items()]


def calibrator_path(template: str, context: Mapping[str, Any]) -> str:
    """A ``calibrator`` / ``save_calibrator`` path; ``{task}`` in it stands for the task's name.

    ``--metadata`` reaches every task of a run, so a group run needs ``{task}`` to keep one file
    per task instead of each task overwriting the same file.
    """
    return str(template).replace("{task}", str(context["task"]))


def applied_calibrator(
    settings: RunSettings, context: Mapping[str, Any], log_model: bool = True
) -> CaliDistCalibrator | None:
    """The saved fit named by ``--metadata calibrator``, checked against this task (or None).

    The task calls this when it is built too, so that a wrong file fails before any model time
    (and logs a fit of another model then; ``log_model=False`` does not log it again).
    """
    if not settings.calibrator:
        return None
    path = calibrator_path(settings.calibrator, context)
    calibrator, saved = load_calibrator(path)
    check_calibrator_context(path, calibrator, saved, context, settings, log_model)
    return calibrator


def calidist_calibrator(
    calibration: list, settings: RunSettings, context: Mapping[str, Any]
) -> CaliDistCalibrator:
    """The saved fit named by ``--metadata calibrator``, else a fit on the calibration records.

    The fit uses the run's ``lambda_scale`` and ``fit`` (default "grid": the paper's search
    alone, Appendix I); the records' lambda_raw already follow its ``delta_mode``.
    """
    calibrator = applied_calibrator(settings, context, log_model=False)  # logged at task build
    if calibrator is not None:
        return calibrator
    if not calibration:
        raise ValueError(
            f"{context['task']}: no calibration documents to fit on; raise --metadata calib_size "
            "or pass a saved fit with --metadata calibrator=FILE"
        )
    return CaliDistCalibrator(lambda_scale=settings.lambda_scale, method=settings.fit).fit(
        _column(calibration, "lambda_raw"),
        _column(calibration, "confidence"),
        _column(calibration, "correct"),
    )


def check_calibrator_context(
    path: str,
    calibrator: Any,
    saved: Mapping[str, Any],
    context: Mapping[str, Any],
    settings: RunSettings,
    log_model: bool = True,
) -> None:
    """Refuse a saved fit made for another kind of calibrator, label space or task; log one made
    for another model (unless ``log_model`` is False)."""
    if not isinstance(calibrator, CaliDistCalibrator):
        raise ValueError(f"{path}: holds a {type(calibrator).__name__}, not a CaliDist fit")
    if saved.get("labels") != context["labels"]:
        raise ValueError(
            f"{path}: fitted for labels {saved.get('labels')} of task {saved.get('task')!r}; "
            f"{context['task']} has labels {context['labels']}"
        )
    if saved.get("task") != context["task"] and not settings.allow_transfer:
        raise ValueError(
            f"{path}: fitted on task {saved.get('task')!r}, not {context['task']!r}; pass "
            "--metadata allow_transfer=true to apply it to another task (out-of-domain transfer)"
        )
    if log_model and saved.get("model") != context.get("model"):
        log.warning("%s: fitted for model %r, applied to %r", path, saved.get("model"),
                    context.get("model"))


def summarize_calidist(
    records: Sequence[Mapping[str, Any]], settings: RunSettings, context: Mapping[str, Any]
) -> dict[str, float]:
    """CaliDist metrics on the evaluation documents, fitted on the calibration documents."""
    calibration, evaluation = split_records(records)
    calibrator = calidist_calibrator(calibration, settings, context)
    if settings.save_calibrator:
        path = Path(calibrator_path(settings.save_calibrator, context))
        path.parent.mkdir(parents=True, exist_ok=True)
        save_calibrator(calibrator, path, **context)
    correct = _column(evaluation, "correct")
    calibrated = calibrator.predict(
        _column(evaluation, "lambda_raw"), _column(evaluation, "confidence")
    )
    return {
        **_common(calibration, evaluation),
        **_scores(calibrated, correct),
        "flip_rate": float(_column(evaluation, "flipped").mean()),
        "mu_mean": float(_column(evaluation, "mu").mean()),
        "delta_mean": float(_column(evaluation, "delta").mean()),
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
    raw = _column(calibration, "lambda_raw")
    delta = np.asarray([r.get("delta", math.nan) for r in calibration], dtype=float)
    stable = ((delta < EPSILON) & (raw > 0)) | (raw >= STABLE_LAMBDA_RAW)  # raw 0: mu = 1
    moved = raw[~stable]
    return {
        "lambda_min": float(moved.min()) if moved.size else math.nan,
        "lambda_max": float(moved.max()) if moved.size else math.nan,
        "stable_fraction": float(stable.mean()),
    }


def recalibrated_confidences(
    calibration: Sequence[Mapping[str, Any]], evaluation: Sequence[Mapping[str, Any]]
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Platt and isotonic maps of the records' own confidence (a letter's probability or a
    verbalized number), fitted on the calibration records: {name: (confidence, correct) per
    evaluation document}."""
    conf_c, conf_e = _column(calibration, "confidence"), _column(evaluation, "confidence")
    correct_c, correct_e = _column(calibration, "correct"), _column(evaluation, "correct")
    return {
        PLATT: (PlattScaling().fit(conf_c, correct_c).predict(conf_e), correct_e),
        ISOTONIC: (IsotonicCalibration().fit(conf_c, correct_c).predict(conf_e), correct_e),
    }


def baseline_confidences(
    calibration: Sequence[Mapping[str, Any]], evaluation: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict[str, float]]:
    """Logit baselines fitted on the calibration records, applied to the evaluation records.

    Returns ({baseline: (confidence, correct) per evaluation document}, {"temperature", vector
    scaling's accuracy}); ``calidist report`` uses the per-document values for intervals and
    plots.
    """
    logits_c = [r["letter_logprobs"] for r in calibration]
    logits_e = [r["letter_logprobs"] for r in evaluation]
    labels_c = _column(calibration, "label").astype(int)
    labels_e = _column(evaluation, "label").astype(int)
    correct_e = _column(evaluation, "correct")

    temperature = TemperatureScaling().fit(logits_c, labels_c)  # any option count per document
    confidences = {
        TEMPERATURE_SCALING: (temperature.predict_proba(logits_e).max(axis=1), correct_e),
        **recalibrated_confidences(calibration, evaluation),
    }
    vector_accuracy = metric_name("acc", VECTOR_SCALING)
    extras = {"temperature": float(temperature.temperature_), vector_accuracy: math.nan}
    counts = sorted({len(row) for row in logits_c + logits_e})
    if len(counts) > 1:  # one weight per option: undefined when the option count varies
        warnings.warn(f"vector scaling skipped (its metrics are NaN): the documents have "
                      f"{' and '.join(map(str, counts))} options, and vector scaling needs the "
                      "same number in every document", CalibrationWarning, stacklevel=2)
        return confidences, extras
    vector = VectorScaling().fit(np.asarray(logits_c), labels_c)
    vector_probs = vector.predict_proba(np.asarray(logits_e))  # may change the prediction
    vector_correct = (vector_probs.argmax(axis=1) == labels_e).astype(float)
    confidences[VECTOR_SCALING] = (vector_probs.max(axis=1), vector_correct)
    extras[vector_accuracy] = float(vector_correct.mean())
    return confidences, extras


def summarize_baselines(
    records: Sequence[Mapping[str, Any]], settings: RunSettings, context: Mapping[str, Any]
) -> dict[str, float]:
    """Vanilla confidence and the logit baselines (TS, Platt, isotonic, vector scaling)."""
    calibration, evaluation = split_records(records)
    if not calibration:
        raise ValueError(f"{context['task']}: no calibration documents to fit the baselines on")
    confidences, extras = baseline_confidences(calibration, evaluation)
    results = _common(calibration, evaluation)
    for name in LOGIT_BASELINES:
        if name in confidences:
            results.update(_scores(*confidences[name], name))
        else:  # skipped (vector scaling on documents with different option counts)
            results.update({metric_name(score, name): math.nan for score in SCORES})
    return {**results, **extras}


# ------------------------------------------------- generation tasks (verbalized, consistency, SPUQ)
# A sampling baseline's confidences (records.SAMPLING_KINDS) are each scored with SCORES under
# their own suffix.
GENERATION_EXTRAS = ("parse_fail_rate", "requests_per_doc", "n_calibration", "n_evaluation")
# sampling_temperature: the samples' temperature (ConfidenceSource.summary_extras)
SAMPLING_EXTRAS = {CONSISTENCY: ("identical_samples_rate", "sampling_temperature"), SPUQ: ()}


def generation_metric_names(confidence: str, distracted: bool) -> list[str]:
    """The metrics of a generation task (``confidence`` = verbalized, consistency or spuq)."""
    if confidence in SAMPLING_KINDS:
        kinds = SAMPLING_KINDS[confidence]
        return ["acc", *(metric_name(name, k) for k in kinds for name in SCORES),
                *GENERATION_EXTRAS, *SAMPLING_EXTRAS[confidence]]
    if distracted:
        return [*metric_names(distracted=True), "parse_fail_rate"]
    vanilla = [metric_name(name, VANILLA) for name in SCORES]
    baselines = [metric_name(name, b) for b in VERBALIZED_BASELINES for name in SCORES]
    return ["acc", *vanilla, *baselines, *GENERATION_EXTRAS]


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
    if confidence == CONSISTENCY:  # samples that were not sampled (a server, greedy)
        message = consistency.identical_samples_warning(split_records(records)[1])
        if message:
            warnings.warn(message, CalibrationWarning, stacklevel=2)
    return unless_unreadable(results)


def unless_unreadable(results: dict[str, float]) -> dict[str, float]:
    """``results``, or, when more than ``UNREADABLE_LIMIT`` of the replies were unreadable
    (``parse_fail_rate``), every score of SCORES (under any suffix) NaN with a warning;
    accuracy and counts kept."""
    if not results["parse_fail_rate"] > UNREADABLE_LIMIT:
        return results
    warnings.warn(
        f"{results['parse_fail_rate']:.0%} of the evaluation replies were unreadable (more "
        f"than {UNREADABLE_LIMIT:.0%}): every calibration score of this task is NaN, since it "
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
    results = {"parse_fail_rate": parse_fail_rate(evaluation)}
    if distracted:
        return {**summarize_calidist(records, settings, context), **results}
    results.update(_common(calibration, evaluation))
    correct = _column(evaluation, "correct")
    if confidence in SAMPLING_KINDS:
        for kind in SAMPLING_KINDS[confidence]:
            scores = np.asarray([r["confidences"][kind] for r in evaluation], dtype=float)
            results.update(_scores(scores, correct, kind))
        if confidence == CONSISTENCY:
            results["identical_samples_rate"] = consistency.identical_samples_rate(evaluation)
        return results
    if not calibration:
        raise ValueError(f"{context['task']}: no calibration documents to fit the baselines on")
    for name, (scores, _) in recalibrated_confidences(calibration, evaluation).items():
        results.update(_scores(scores, correct, name))
    return results
