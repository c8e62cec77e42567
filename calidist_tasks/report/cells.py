"""Leaderboard cells: which rows a task fills, and their per-document confidences.

A task fills the registry's rows (``calidist_tasks.registry.METHODS``) that list its variant, found
from the task's own config (``registry.task_variant``), with the results file's ECE, Brier and
AUROC of the row's confidence (named by ``records.metric_name``). Where the logged records allow
it, each row's confidence on every evaluation document is rebuilt with the row's own fit
(``Method.fit``, the function the task's aggregation called), and its scores replace the results
file's: the same fit on the same records gives the same numbers (the tests check it on real
lm-eval output of every task kind). CaliDist is refitted with the run's own settings as lm-eval
logged them in the task's config metadata (``lambda_scale`` and ``fit``; the records'
lambda_raw already follow its ``delta_mode``), else the defaults (the paper's grid search
alone): never with ``refine`` unless the run asked for it.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from calidist_metrics import CalibrationWarning, CaliDistCalibrator
from calidist_tasks.registry import (
    METHODS,
    SCORES,
    Method,
    calidist_method,
    methods_of,
    paired_variants,
    task_variant,
)
from calidist_tasks.report import refits
from calidist_tasks.report.runs import TaskRun
from calidist_tasks.scoring import fits
from calidist_tasks.scoring.aggregation import UNREADABLE_LIMIT
from calidist_tasks.scoring.fits import calibrator_context, split_records
from calidist_tasks.scoring.joining import hint_instability
from calidist_tasks.scoring.records import Hint, hints_of, metric_name
from calidist_tasks.settings import RunSettings

__all__ = ["METHODS", "Cell", "Method", "leaderboard_cells", "task_cells"]

log = logging.getLogger(__name__)  # progress of the refits (stderr in `calidist report`)


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
    variant: str = ""  # the run's ``registry.Variant`` name

    @property
    def rank(self) -> int:
        """Where the run's variant stands among the row's (0: preferred)."""
        return self.method.variants.index(self.variant)

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
        return metrics.get(self.method.metric("acc"), self.of_reading("acc"))

    @property
    def parse_fail_rate(self) -> float | None:
        """The task's unreadable share of the replies the row reads (generation tasks; None for
        scored tasks)."""
        return self.of_reading("parse_fail_rate")

    def of_reading(self, name: str) -> float | None:
        """The results file's ``name`` of the reading the row is fitted on (``Method.reading``:
        "parse_fail_rate_logprob" for a log-prob row) where the task reports one, else ``name``."""
        metrics = self.run.metrics if self.run is not None else {}
        return metrics.get(metric_name(name, self.method.reading), metrics.get(name))

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


def settings_of(run: TaskRun) -> RunSettings:
    """The run's settings, from the metadata lm-eval saved in the task's config."""
    return RunSettings.from_metadata(run.config.get("metadata"))


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
    """CaliDist's calibrated confidence per evaluation record and its calibrator, fitted as the
    task's own aggregation fits it (the registry's CaliDist fit with the given settings)."""
    fitted = calidist_method().fit(calibration, evaluation, settings, context)
    return fitted.confidence, fitted.estimator


def run_context(run: TaskRun, settings: RunSettings) -> dict[str, Any]:
    """The calibrator context of a logged run (``fits.calibrator_context``)."""
    return calibrator_context(run.task, run.config.get("doc_to_choice"), settings.model)


def refit(run: TaskRun, methods: Sequence[Method]) -> dict[str, fits.Fitted | None]:
    """Each method's fit on the run's records: {label: fits.Fitted, None where undefined or
    where nothing can be fitted (no calibration records: results-file numbers only)}."""
    calibration, evaluation = split_records(run.records)
    settings = settings_of(run)
    context = run_context(run, settings)
    found: dict[str, fits.Fitted | None] = {}
    for method in methods:
        try:
            found[method.label] = refits.fitted(method.fit, run, run, calibration, evaluation,
                                                settings, context)
        except fits.NoCalibration:
            found[method.label] = None
    return found


def task_cells(run: TaskRun, problems: list[str], notes: list[str]) -> list[Cell]:
    """The leaderboard cells one task fills, rebuilt from its records where possible."""
    benchmark, variant = task_variant(run.task, run.config)
    log.info("refitting the methods of %s", run.name)
    if variant is None:
        problems.append(f"{run.name}: no leaderboard row for this task's variant (its config "
                        "names no registered style and confidence); register it in "
                        "calidist_tasks/registry.py")
        return []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CalibrationWarning)
        cells = _cells(run, benchmark, variant.name, methods_of(variant), problems)
    notes.extend(dict.fromkeys(f"{run.name}: {w.message}" for w in caught
                               if issubclass(w.category, CalibrationWarning)))
    return cells


def _cells(run: TaskRun, benchmark: str, variant: str, methods: list[Method],
           problems: list[str]) -> list[Cell]:
    per_doc: dict[str, fits.Fitted | None] = {}
    if run.records is not None:
        try:
            per_doc = refit(run, methods)
        except (KeyError, TypeError, ValueError, OSError) as error:
            problems.append(f"{run.name}: cannot rebuild its confidences from the samples "
                            f"({type(error).__name__}: {error}); results-file numbers only")
    own = next((per_doc.get(m.label) for m in methods if m.own), None)
    cells = []
    for method in methods:
        saved = {s: run.metrics[method.metric(s)] for s in SCORES
                 if method.metric(s) in run.metrics}
        cell = Cell(run.group, benchmark, method, run, saved, variant=variant)
        fitted = per_doc.get(method.label)
        if fitted is not None:
            confidence, correct = fitted.confidence, fitted.correct
            cell.values = {s: float(fn(confidence, correct)) for s, fn in SCORES.items()}
            cell.confidence, cell.correct = confidence, correct
            if not method.own and own is not None and variant in paired_variants():
                cell.vanilla = (own.confidence, own.correct)
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
            old = chosen.get(key)
            if old is None or cell.rank < old.rank:
                chosen[key] = cell
    return list(chosen.values())
