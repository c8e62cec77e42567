"""Fits: calibration records -> per-document confidences of the evaluation records.

One function per way a method's confidence is made (``Fit``): the task's aggregation and
``calidist report`` call the same functions on the same records (the registry,
``calidist_tasks.registry``, names which method uses which). Also here: CaliDist's fit, and the
policy for a saved fit (``--metadata calibrator`` / ``save_calibrator``).
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from calidist_metrics import (
    BEHAVIOUR_COLUMNS,
    CALIDIST_COLUMNS,
    DELTA_MODES,
    BehaviourCalibrator,
    CalibrationWarning,
    CaliDistCalibrator,
    IsotonicCalibration,
    PlattScaling,
    TemperatureScaling,
    VectorScaling,
    load_calibrator,
    save_calibrator,
    stack_columns,
)
from calidist_tasks.scoring.records import CALIBRATION, EVALUATION
from calidist_tasks.settings import RunSettings

log = logging.getLogger(__name__)


class Fitted(NamedTuple):
    """A method's confidence per evaluation document, which of them are correct (a calibrator
    that changes the prediction changes it), and the fitted estimator (None: nothing fitted)."""

    confidence: np.ndarray
    correct: np.ndarray
    estimator: Any = None


def as_scored(fitted: Fitted, evaluation: Sequence[Mapping[str, Any]]) -> Fitted:
    """``fitted`` as every method is scored: an evaluation document whose original reply was
    unreadable keeps the unreadable rule's outcome of its record (wrong at 1/c), whatever the
    method made of it, so that every method scores the same documents the same way there
    (docs/paper_fidelity.md, "Unreadable replies")."""
    unreadable = np.fromiter((bool(r.get("unreadable_original")) for r in evaluation),
                             dtype=bool, count=len(evaluation))
    if not unreadable.any():
        return fitted
    confidence = np.array(fitted.confidence, dtype=float)
    correct = np.array(fitted.correct, dtype=float)
    confidence[unreadable] = column(evaluation, "confidence")[unreadable]
    correct[unreadable] = column(evaluation, "correct")[unreadable]
    return fitted._replace(confidence=confidence, correct=correct)


class NoCalibration(ValueError):
    """A fit was asked of an empty calibration set (a task that sent evaluation documents only,
    or ``--metadata calib_size`` left none)."""


def _fit_on(calibration: Sequence[Mapping[str, Any]], what: str) -> None:
    if not calibration:
        raise NoCalibration(f"no calibration documents to fit {what} on")


# (calibration records, evaluation records, the run's settings, calibrator context) -> Fitted,
# or None where the method is undefined for these records (vector scaling, varying option counts)
Fit = Callable[[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]], RunSettings,
                Mapping[str, Any]], "Fitted | None"]


def split_records(records: Sequence[Mapping[str, Any]]) -> tuple[list, list]:
    """(calibration, evaluation) records, each in document order; no evaluation -> ValueError.
    A calibration document whose original reply was unreadable fits nothing (its 1/c is the
    unreadable rule's, not the model's): it is left out of the calibration records, unless
    every one is unreadable (then they are kept, so that the run still reports; its
    ``unreadable_original`` and ``parse_fail_rate`` say so, and the ⚠ rule of
    ``aggregation.unless_unreadable`` applies above half unreadable)."""
    ordered = sorted(records, key=itemgetter("index"))  # ranks gather in any order
    calibration = [r for r in ordered if r["split"] == CALIBRATION]
    calibration = [r for r in calibration if not r.get("unreadable_original")] or calibration
    evaluation = [r for r in ordered if r["split"] == EVALUATION]
    if not evaluation:
        raise ValueError(
            "no evaluation documents reached the aggregation (did --samples name calibration "
            f"documents only? {len(calibration)} calibration documents were scored)"
        )
    return calibration, evaluation


def column(records: Sequence[Mapping[str, Any]], key: str) -> np.ndarray:
    """One field of every record, as floats."""
    # fromiter over a C-level map: a list comprehension per field was most of an aggregation
    return np.fromiter(map(itemgetter(key), records), dtype=float, count=len(records))


def calidist_inputs(records: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """``CaliDistCalibrator``'s X of the records: their lambda_raw and confidence."""
    return stack_columns(CALIDIST_COLUMNS, lambda_raw=column(records, "lambda_raw"),
                         confidence=column(records, "confidence"))


def behaviour_inputs(records: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """``BehaviourCalibrator``'s X of the records: their confidence, mu and delta."""
    return stack_columns(BEHAVIOUR_COLUMNS,
                         **{name: column(records, name) for name in BEHAVIOUR_COLUMNS})


def save_fit(calibrator: CaliDistCalibrator, settings: RunSettings,
             context: Mapping[str, Any]) -> None:
    """Write the fit to ``--metadata save_calibrator`` (its folder made if missing), with
    ``context``, so that ``--metadata calibrator`` can apply it; nothing when unset."""
    if settings.save_calibrator:
        path = Path(calibrator_path(settings.save_calibrator, context))
        path.parent.mkdir(parents=True, exist_ok=True)
        save_calibrator(calibrator, path, **context)


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
    found = saved_fit(settings, context, log_model)
    return found[1] if found else None


def saved_fit(settings: RunSettings, context: Mapping[str, Any], log_model: bool = True
              ) -> tuple[str, CaliDistCalibrator, dict[str, Any]] | None:
    """(path, calibrator, saved context) of ``--metadata calibrator``, checked against this
    task (``check_calibrator_context``), or None."""
    if not settings.calibrator:
        return None
    path = calibrator_path(settings.calibrator, context)
    calibrator, saved = load_calibrator(path)
    check_calibrator_context(path, calibrator, saved, context, settings, log_model)
    return path, calibrator, saved


# The run settings that shape a fit's lambda, as RunSettings names them; a saved fit records
# them (lambda_scale and fit as the calibrator's own fields, delta_mode in its context).
FIT_SETTINGS = ("lambda_scale", "delta_mode", "fit")


def settings_with_saved_fit(settings: RunSettings, metadata: Mapping[str, Any] | None,
                            context: Mapping[str, Any]) -> RunSettings:
    """The run's settings for applying ``--metadata calibrator`` (checked now, at task build):
    a FIT_SETTINGS value the run set explicitly (in ``metadata``) must equal the file's
    (ValueError naming both); one it did not set takes the file's value, with one warning
    naming them. A file without delta_mode (written before it was stored) keeps the run's."""
    found = saved_fit(settings, context)
    if found is None:
        return settings
    path, calibrator, saved = found
    recorded = {"lambda_scale": calibrator.lambda_scale, "fit": calibrator.method,
                "delta_mode": saved.get("delta_mode")}
    explicit = {key for key in FIT_SETTINGS if (metadata or {}).get(key) is not None}
    taken = {}
    for key in FIT_SETTINGS:
        ours, theirs = getattr(settings, key), recorded[key]
        if theirs is None or theirs == ours:
            continue
        if key in explicit:
            raise ValueError(f"{path}: fitted with {key} {theirs!r}, this run sets {key} "
                             f"{ours!r}; drop --metadata {key} to apply the file's, or refit")
        taken[key] = theirs
    if taken:
        shown = ", ".join(f"{key} {value!r}" for key, value in taken.items())
        log.warning("%s: the saved fit's %s apply to %s (the run did not set them)", path,
                    shown, context["task"])
    return dataclasses.replace(settings, **taken)


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
        raise NoCalibration(
            f"{context['task']}: no calibration documents to fit on; raise --metadata calib_size "
            "or pass a saved fit with --metadata calibrator=FILE"
        )
    return CaliDistCalibrator(lambda_scale=settings.lambda_scale, method=settings.fit).fit(
        calidist_inputs(calibration), column(calibration, "correct"))


def check_calibrator_context(
    path: str,
    calibrator: Any,
    saved: Mapping[str, Any],
    context: Mapping[str, Any],
    settings: RunSettings,
    log_model: bool = True,
) -> None:
    """Refuse a saved fit made for another kind of calibrator, label space or task, or holding a
    ``delta_mode`` no fit writes; log one made for another model (unless ``log_model`` is
    False)."""
    if not isinstance(calibrator, CaliDistCalibrator):
        raise ValueError(f"{path}: holds a {type(calibrator).__name__}, not a CaliDist fit")
    if "delta_mode" in saved and saved["delta_mode"] not in DELTA_MODES:
        raise ValueError(f"{path}: field 'delta_mode' is {saved['delta_mode']!r}, which no fit "
                         f"writes (one of {', '.join(DELTA_MODES)}); refit, or correct the file")
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


def calibrator_context(task: str, choices: Any, model: str | None,
                       **extra: Any) -> dict[str, Any]:
    """What a saved fit records, so that it is refused by a task it does not fit: the task, its
    labels (``doc_to_choice``), the model, and ``extra`` (benchmark, style)."""
    labels = list(choices) if isinstance(choices, list) else f"per-document {choices}"
    return {"task": task, **extra, "labels": labels, "model": model}


# ------------------------------------------------------------------ one function per method
def own_confidence(calibration: Sequence[Mapping[str, Any]],
                   evaluation: Sequence[Mapping[str, Any]], settings: RunSettings,
                   context: Mapping[str, Any]) -> Fitted:
    """The model's own confidence (a letter's probability, a verbalized number): no fit."""
    return Fitted(column(evaluation, "confidence"), column(evaluation, "correct"))


def calidist_fit(calibration: Sequence[Mapping[str, Any]],
                 evaluation: Sequence[Mapping[str, Any]], settings: RunSettings,
                 context: Mapping[str, Any]) -> Fitted:
    """CaliDist's calibrated confidence (``calidist_calibrator``: a saved fit, else a fit on the
    calibration records with the run's settings)."""
    calibrator = calidist_calibrator(list(calibration), settings, context)
    calibrated = calibrator.predict(calidist_inputs(evaluation))
    return Fitted(np.asarray(calibrated, dtype=float), column(evaluation, "correct"), calibrator)


def behaviour_calibrated(calibration: Sequence[Mapping[str, Any]],
                         evaluation: Sequence[Mapping[str, Any]], settings: RunSettings,
                         context: Mapping[str, Any]) -> Fitted:
    """The behaviour calibrator (beyond the paper: a logistic regression of correctness on
    logit(p), mu and delta), fitted on the calibration records; a calibrator variant of
    BENCHMARKS.md, no task's metric."""
    _fit_on(calibration, "the behaviour calibrator")
    behaviour = BehaviourCalibrator().fit(behaviour_inputs(calibration),
                                          column(calibration, "correct"))
    return Fitted(behaviour.predict(behaviour_inputs(evaluation)),
                  column(evaluation, "correct"), behaviour)


def platt_scaled(calibration: Sequence[Mapping[str, Any]],
                 evaluation: Sequence[Mapping[str, Any]], settings: RunSettings,
                 context: Mapping[str, Any]) -> Fitted:
    """Platt scaling of the records' own confidence, fitted on the calibration records."""
    _fit_on(calibration, "Platt scaling")
    platt = PlattScaling().fit(column(calibration, "confidence"), column(calibration, "correct"))
    return Fitted(platt.predict(column(evaluation, "confidence")),
                  column(evaluation, "correct"), platt)


def isotonic_calibrated(calibration: Sequence[Mapping[str, Any]],
                        evaluation: Sequence[Mapping[str, Any]], settings: RunSettings,
                        context: Mapping[str, Any]) -> Fitted:
    """Isotonic regression of the records' own confidence, fitted on the calibration records."""
    _fit_on(calibration, "isotonic regression")
    isotonic = IsotonicCalibration().fit(column(calibration, "confidence"),
                                         column(calibration, "correct"))
    return Fitted(isotonic.predict(column(evaluation, "confidence")),
                  column(evaluation, "correct"), isotonic)


def temperature_scaled(calibration: Sequence[Mapping[str, Any]],
                       evaluation: Sequence[Mapping[str, Any]], settings: RunSettings,
                       context: Mapping[str, Any]) -> Fitted:
    """Temperature scaling of the option letters' log-likelihoods (any option count per
    document)."""
    _fit_on(calibration, "temperature scaling")
    temperature = TemperatureScaling().fit([r["letter_logprobs"] for r in calibration],
                                           column(calibration, "label").astype(int))
    return Fitted(temperature.predict([r["letter_logprobs"] for r in evaluation]),
                  column(evaluation, "correct"), temperature)


def vector_scaled(calibration: Sequence[Mapping[str, Any]],
                  evaluation: Sequence[Mapping[str, Any]], settings: RunSettings,
                  context: Mapping[str, Any]) -> Fitted | None:
    """Vector scaling of the letters' log-likelihoods; it may change the prediction, so its
    own ``correct``. None (with a warning) when the documents' option counts differ."""
    _fit_on(calibration, "vector scaling")
    logits_c = [r["letter_logprobs"] for r in calibration]
    logits_e = [r["letter_logprobs"] for r in evaluation]
    counts = sorted({len(row) for row in logits_c + logits_e})
    if len(counts) > 1:  # one weight per option: undefined when the option count varies
        warnings.warn(f"vector scaling skipped (its metrics are NaN): the documents have "
                      f"{' and '.join(map(str, counts))} options, and vector scaling needs the "
                      "same number in every document", CalibrationWarning, stacklevel=2)
        return None
    vector = VectorScaling().fit(np.asarray(logits_c), column(calibration, "label").astype(int))
    probs = vector.predict_proba(np.asarray(logits_e))
    correct = (probs.argmax(axis=1) == column(evaluation, "label").astype(int)).astype(float)
    return Fitted(probs.max(axis=1), correct, vector)


def reading_settings(settings: RunSettings, saved_fit: bool = False) -> RunSettings:
    """The run's settings for a second reading of its records: ``save_calibrator`` writes the
    first reading's fit only; a saved ``calibrator`` applies to the second one only with
    ``saved_fit`` (a chat API's log-prob reading of a verbalized task, docs/backends.md), else
    it is fitted on its own calibration records (a reasoned task's stated confidence)."""
    kept = {} if saved_fit else {"calibrator": None}
    return dataclasses.replace(settings, save_calibrator=None, **kept)


def second_reading(records: Sequence[Mapping[str, Any]], key: str) -> list[Mapping[str, Any]]:
    """The second reading ``record[key]`` of each record that holds one, in their order."""
    return [r[key] for r in records if key in r]


def of_reading(key: str, fit: Fit, saved_fit: bool = False) -> Fit:
    """``fit`` on the records' second reading (``second_reading``: a reasoned task's stated
    confidence, ``reasoned``; a chat API's log-prob reading of a verbalized task's replies,
    ``answer_logprobs``) with ``reading_settings``; None when no evaluation record holds that
    reading (a verbalized run on a backend that returns no token log-probabilities). The fit's
    ``reading`` names ``key``."""
    def reading_fit(calibration: Sequence[Mapping[str, Any]],
                    evaluation: Sequence[Mapping[str, Any]], settings: RunSettings,
                    context: Mapping[str, Any]) -> Fitted | None:
        evaluated = second_reading(evaluation, key)
        if not evaluated:
            return None
        return fit(second_reading(calibration, key), evaluated,
                   reading_settings(settings, saved_fit), context)

    reading_fit.reading = key  # type: ignore[attr-defined]
    return reading_fit


def sampled(kind: str) -> Fit:
    """The fit of a sampling baseline's confidence ``kind`` (a record's ``confidences``): none,
    the records hold it."""
    def fit(calibration: Sequence[Mapping[str, Any]], evaluation: Sequence[Mapping[str, Any]],
            settings: RunSettings, context: Mapping[str, Any]) -> Fitted:
        return Fitted(np.asarray([r["confidences"][kind] for r in evaluation], dtype=float),
                      column(evaluation, "correct"))

    fit.__name__ = f"sampled_{kind}"
    return fit
