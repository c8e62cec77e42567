"""Leaderboard rows: which task reports which method, and its per-document confidences.

The mapping is data: a task ``calidist_<benchmark>_<variant>`` fills the rows of ``METHODS`` that
list its variant, with the results file's ECE, Brier and AUROC of the row's confidence (named by
``records.metric_name``). A new method is one more line here. Where the logged records allow it,
the method's confidence on every evaluation document is rebuilt (``refit``) the way the task's own
aggregation built it; the rebuilt scores must equal the results file's, otherwise the mismatch
is reported and the results-file numbers are used without per-document data. CaliDist is refitted
with the run's own settings as lm-eval logged them in the task's config metadata (``lambda_scale``
and ``fit``; the records' lambda_raw already follow its ``delta_mode``), else the defaults (the
paper's grid search alone): never with ``refine`` unless the run asked for it.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from calidist_metrics import CalibrationWarning, CaliDistCalibrator
from calidist_tasks.aggregation import (
    SCORES,
    UNREADABLE_LIMIT,
    baseline_confidences,
    calidist_calibrator,
    recalibrated_confidences,
    split_records,
)
from calidist_tasks.joining import hint_instability
from calidist_tasks.records import (
    CALIDIST,
    CONSISTENCY,
    ENTROPY,
    FSD,
    ISOTONIC,
    PLATT,
    SPUQ,
    TEMPERATURE_SCALING,
    VANILLA,
    VECTOR_SCALING,
    Hint,
    hints_of,
    metric_name,
)
from calidist_tasks.report.loading import TASK_PREFIX, TaskRun
from calidist_tasks.settings import RunSettings

log = logging.getLogger(__name__)  # progress of the refits (stderr in `calidist report`)
TOLERANCE = 1e-6  # rebuilt vs saved score; both come from the same float64 records


@dataclass(frozen=True)
class Method:
    """One leaderboard row."""

    label: str
    variants: tuple[str, ...]  # task-name suffixes that report it, preferred first ("" = original)
    # the confidence its metrics are named after: ``records.metric_name(score, confidence)``
    confidence: str
    # How to rebuild its per-document confidence from the records: "vanilla" (the original
    # prompt's), "calidist" (refit), "baseline:<name>" (logit baselines, refit),
    # "recalibrated:<name>" (Platt or isotonic of the records' own confidence, refit),
    # "sampled:<kind>" (record["confidences"][kind]). Where that fails, results-file numbers.
    refit: str

    def metric(self, score: str) -> str:
        """The results-file name of ``score`` for this row."""
        return metric_name(score, self.confidence)


REFIT_CALIDIST = "calidist"
# refit kinds: "baseline:<name>", "recalibrated:<name>", "sampled:<kind>"
BASELINE, RECALIBRATED, SAMPLED = "baseline:", "recalibrated:", "sampled:"
LOGIT = ("", "assertion", "probe", "corruption")
VERBALIZED = ("verbalized", "assertion_verbalized", "probe_verbalized", "corruption_verbalized")
METHODS: tuple[Method, ...] = (
    Method("Vanilla", LOGIT, VANILLA, VANILLA),
    Method("Temperature scaling", ("",), TEMPERATURE_SCALING, BASELINE + TEMPERATURE_SCALING),
    Method("Platt", ("",), PLATT, BASELINE + PLATT),
    Method("Isotonic", ("",), ISOTONIC, BASELINE + ISOTONIC),
    Method("Vector scaling", ("",), VECTOR_SCALING, BASELINE + VECTOR_SCALING),
    Method("Verbalized", VERBALIZED, VANILLA, VANILLA),
    Method("Verbalized + Platt", ("verbalized",), PLATT, RECALIBRATED + PLATT),
    Method("Verbalized + isotonic", ("verbalized",), ISOTONIC, RECALIBRATED + ISOTONIC),
    Method("Consistency", ("consistency",), CONSISTENCY, SAMPLED + CONSISTENCY),
    Method("Entropy", ("consistency",), ENTROPY, SAMPLED + ENTROPY),
    Method("FSD", ("consistency",), FSD, SAMPLED + FSD),
    Method("SPUQ", ("spuq",), SPUQ, SAMPLED + SPUQ),
    Method("CaliDist (As.)", ("assertion",), CALIDIST, REFIT_CALIDIST),
    Method("CaliDist (Pr.)", ("probe",), CALIDIST, REFIT_CALIDIST),
    Method("CaliDist (Sa.)", ("corruption",), CALIDIST, REFIT_CALIDIST),
    Method("CaliDist verbalized (As.)", ("assertion_verbalized",), CALIDIST, REFIT_CALIDIST),
    Method("CaliDist verbalized (Pr.)", ("probe_verbalized",), CALIDIST, REFIT_CALIDIST),
    Method("CaliDist verbalized (Sa.)", ("corruption_verbalized",), CALIDIST, REFIT_CALIDIST),
)
VARIANTS = sorted({v for m in METHODS for v in m.variants if v}, key=len, reverse=True)
# Tasks whose record "confidence" is a vanilla row: their other rows are paired with it.
PAIRED_VARIANTS = {v for m in METHODS if m.refit == VANILLA for v in m.variants}
VANILLA_LABELS = {m.label for m in METHODS if m.refit == VANILLA}  # the model's own confidence


@dataclass
class Cell:
    """One method's scores for one model and benchmark."""

    model: str  # the run group (``TaskRun.group``: the model, and its settings when read)
    benchmark: str
    method: Method
    run: TaskRun
    values: dict[str, float]  # SCORES name -> fraction
    confidence: np.ndarray | None = None  # per evaluation document; None: results file only
    correct: np.ndarray | None = None
    # the same task's vanilla (confidence, correct) on the same documents, to compare with
    vanilla: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def n(self) -> int | None:
        return None if self.correct is None else int(self.correct.size)

    @property
    def accuracy(self) -> float | None:
        """Share of correct evaluation documents: from the per-document data, else the results
        file's accuracy of the row's confidence (vector scaling's own) or ``acc``."""
        if self.correct is not None:
            return float(np.mean(self.correct))
        metrics = self.run.metrics if self.run is not None else {}
        return metrics.get(self.method.metric("acc"), metrics.get("acc"))

    @property
    def parse_fail_rate(self) -> float | None:
        """The task's unreadable share of replies (generation tasks; None for scored tasks)."""
        return self.run.metrics.get("parse_fail_rate") if self.run is not None else None

    @property
    def unreadable(self) -> bool:
        """Mostly unreadable replies (above ``aggregation.UNREADABLE_LIMIT``): the scores
        describe the parser's fallback, not the model (lm-eval's results file holds NaN)."""
        rate = self.parse_fail_rate
        return rate is not None and rate > UNREADABLE_LIMIT

    @property
    def paired(self) -> bool:
        """Whether the paired test against vanilla applies (same documents, same predictions)."""
        return self.vanilla is not None and np.array_equal(self.vanilla[1], self.correct)


def split_task(task: str) -> tuple[str, str]:
    """(benchmark, variant) of a task name: ``calidist_ppdb_assertion`` -> ("ppdb", "assertion")."""
    rest = task.removeprefix(TASK_PREFIX)
    for variant in VARIANTS:
        if rest.endswith("_" + variant):
            return rest[: -len(variant) - 1], variant
    return rest, ""


def column(records: list[Mapping[str, Any]], key: str) -> np.ndarray:
    return np.asarray([r[key] for r in records], dtype=float)


def settings_of(run: TaskRun) -> RunSettings:
    """The run's settings, from the metadata lm-eval saved in the task's config."""
    return RunSettings.from_metadata(run.config.get("metadata"))


def _fit_hint(run: TaskRun, method: Method) -> str:
    """Why a CaliDist refit may differ: the run's metadata does not name its fit."""
    metadata = run.config.get("metadata") or {}
    if method.refit != REFIT_CALIDIST or "fit" in metadata:
        return ""
    return ("; the run's metadata names no fit, so it was refitted with the paper's grid "
            "search alone (runs made before --metadata fit existed refined it by default)")


def first_m(hints: Sequence[Hint], m: int | None) -> list[int]:
    """Positions of the hints among the first ``m`` per label (all when ``m`` is None).

    The templates of a run with m distractors per label start with those of a run with fewer
    (``distractors.choose_templates``), so the first m per label are what an m-run sends.
    """
    seen: dict[Any, int] = {}
    kept = []
    for position, hint in enumerate(hints):
        seen[hint.label] = seen.get(hint.label, 0) + 1
        if m is None or seen[hint.label] <= m:
            kept.append(position)
    return kept


def hints_per_label(record: Mapping[str, Any]) -> int:
    """The m a record was logged with: the largest number of hints naming one label."""
    counts: dict[Any, int] = {}
    for hint in hints_of(record):
        counts[hint.label] = counts.get(hint.label, 0) + 1
    return max(counts.values(), default=0)


def instability(record: Mapping[str, Any], m: int | None = None,
                delta_mode: str = "mean") -> tuple[float, float, float]:
    """(mu, delta, lambda_raw) of a record from its logged hints, as ``joining`` computes them.

    Only hints naming a label other than the original prediction count; ``m`` keeps the first
    m hints per label (the subsample an m-run would have sent), ``delta_mode`` is the run's
    (``mean``) or the ablation's (``worst_case``). With ``m=None`` and the run's delta_mode this
    reproduces the record's logged mu, delta and lambda_raw (``joining.hint_instability``).
    """
    hints = hints_of(record)
    kept = [hints[i] for i in first_m(hints, m)]
    if all(hint.label == record["prediction"] for hint in kept):
        raise ValueError(f"record {record.get('index')}: no hint naming another label than the "
                         f"prediction among the first m={m} per label")
    mu, delta, lambda_raw, _ = hint_instability(record["prediction"], record["confidence"], kept,
                                                delta_mode)
    return mu, delta, lambda_raw


def with_instability(records: Sequence[Mapping[str, Any]], m: int | None = None,
                     delta_mode: str = "mean") -> list[dict[str, Any]]:
    """Copies of the records with mu, delta and lambda_raw recomputed by ``instability``
    (records without hints are copied unchanged): the ablations' input to the usual refit."""
    found = []
    for record in records:
        copy = dict(record)
        if record.get("hints"):
            copy["mu"], copy["delta"], copy["lambda_raw"] = instability(record, m, delta_mode)
        found.append(copy)
    return found


def calidist_confidences(calibration: Sequence[Mapping[str, Any]],
                         evaluation: Sequence[Mapping[str, Any]], settings: RunSettings,
                         context: Mapping[str, Any]) -> tuple[np.ndarray, CaliDistCalibrator]:
    """CaliDist's calibrated confidence per evaluation record, fitted as the task's own
    aggregation fits it (``aggregation.calidist_calibrator`` with the given settings)."""
    calibrator = calidist_calibrator(list(calibration), settings, context)
    calibrated = calibrator.predict(column(evaluation, "lambda_raw"),
                                    column(evaluation, "confidence"))
    return np.asarray(calibrated, dtype=float), calibrator


def calidist_context(run: TaskRun, settings: RunSettings) -> dict[str, Any]:
    choices = run.config.get("doc_to_choice")
    labels = list(choices) if isinstance(choices, list) else f"per-document {choices}"
    return {"task": run.task, "labels": labels, "model": settings.model}


def refit(run: TaskRun, kinds: set[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per evaluation document (confidence, correct) for each refit kind the run's rows need."""
    calibration, evaluation = split_records(run.records)
    correct = column(evaluation, "correct")
    found = {VANILLA: (column(evaluation, "confidence"), correct)}
    if REFIT_CALIDIST in kinds:
        settings = settings_of(run)
        calibrated, _ = calidist_confidences(calibration, evaluation, settings,
                                             calidist_context(run, settings))
        found[REFIT_CALIDIST] = (calibrated, correct)
    if any(kind.startswith(BASELINE) for kind in kinds):
        baselines, _ = baseline_confidences(calibration, evaluation)
        found.update({BASELINE + name: pair for name, pair in baselines.items()})
    if calibration and any(kind.startswith(RECALIBRATED) for kind in kinds):
        recalibrated = recalibrated_confidences(calibration, evaluation)
        found.update({RECALIBRATED + name: pair for name, pair in recalibrated.items()})
    for kind in kinds:
        if kind.startswith(SAMPLED):
            name = kind.removeprefix(SAMPLED)
            found[kind] = (np.asarray([r["confidences"][name] for r in evaluation], float),
                           correct)
    return found


def _mismatch(values: dict[str, float], saved: dict[str, float],
              unreadable: bool = False) -> list[str]:
    """Scores the samples do not reproduce; a NaN in the results file matches only for a task
    with mostly unreadable replies (its aggregation writes NaN on purpose)."""
    return [f"{name} {values[name]:.6f} from the samples, {saved[name]:.6f} in the results file"
            for name in saved if (not unreadable if math.isnan(saved[name])
                                  else not abs(values[name] - saved[name]) <= TOLERANCE)]


def task_cells(run: TaskRun, problems: list[str], notes: list[str]) -> list[Cell]:
    """The leaderboard cells one task fills, rebuilt from its records where possible."""
    benchmark, variant = split_task(run.task)
    methods = [m for m in METHODS if variant in m.variants]
    log.info("refitting the methods of %s", run.name)
    if not variant and "_" in benchmark:
        problems.append(f"{run.name}: no leaderboard row for this task's variant (known: "
                        f"{', '.join(VARIANTS)}); add a line to METHODS in "
                        "calidist_tasks/report/methods.py")
        return []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CalibrationWarning)
        cells = _cells(run, benchmark, variant, methods, problems)
    notes.extend(dict.fromkeys(f"{run.name}: {w.message}" for w in caught
                               if issubclass(w.category, CalibrationWarning)))
    return cells


def _cells(run: TaskRun, benchmark: str, variant: str, methods: list[Method],
           problems: list[str]) -> list[Cell]:
    per_doc: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    if run.records is not None:
        try:
            per_doc = refit(run, {m.refit for m in methods})
        except (KeyError, TypeError, ValueError, OSError) as error:
            problems.append(f"{run.name}: cannot rebuild its confidences from the samples "
                            f"({type(error).__name__}: {error}); results-file numbers only")
    cells = []
    for method in methods:
        saved = {s: run.metrics[method.metric(s)] for s in SCORES
                 if method.metric(s) in run.metrics}
        cell = Cell(run.group, benchmark, method, run, saved)
        if method.refit in per_doc:
            confidence, correct = per_doc[method.refit]
            values = {s: float(fn(confidence, correct)) for s, fn in SCORES.items()}
            rate = run.metrics.get("parse_fail_rate")
            wrong = _mismatch(values, saved, rate is not None and rate > UNREADABLE_LIMIT)
            if wrong:
                problems.append(f"{run.name}: {method.label}: the samples do not reproduce the "
                                f"results file ({'; '.join(wrong)}){_fit_hint(run, method)}; "
                                "results-file numbers only")
            else:
                cell.values, cell.confidence, cell.correct = values, confidence, correct
                if method.refit != VANILLA and variant in PAIRED_VARIANTS:
                    cell.vanilla = per_doc[VANILLA]
        if cell.values:
            cells.append(cell)
    return cells


def leaderboard_cells(runs: list[TaskRun], problems: list[str],
                      notes: list[str]) -> list[Cell]:
    """One cell per model, benchmark and method: from the method's preferred task variant."""
    chosen: dict[tuple[str, str, str], Cell] = {}
    for run in runs:
        for cell in task_cells(run, problems, notes):
            key = (cell.model, cell.benchmark, cell.method.label)
            rank = cell.method.variants.index(split_task(cell.run.task)[1])
            old = chosen.get(key)
            if old is None or rank < old.method.variants.index(split_task(old.run.task)[1]):
                chosen[key] = cell
    return list(chosen.values())
