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

A wrapped group's members (docs/wrap.md "Groups: one calibration pool") log their pool in their
config's ``metadata.calibration_pool``; the members of one pool in one results file (one lm-eval
run, as the task pools them) are refitted on every member's calibration records, in the task's
order (member name, then document), each scored on its own evaluation records
(``calibration_pools``); each pool adds a row ``<pool>_pooled`` (``pooled_benchmark``) over every
member's evaluation records, the results file's ``<metric>_pooled``. A member whose pool-mates
are not in its results file is fitted on the members there, with a note naming the others.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
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
from calidist_tasks.scoring.records import CALIBRATION, Hint, hints_of, metric_name
from calidist_tasks.settings import RunSettings

__all__ = ["METHODS", "Cell", "Method", "Pool", "calibration_pools", "leaderboard_cells",
           "task_cells"]

log = logging.getLogger(__name__)  # progress of the refits (stderr in `calidist report`)

POOLED = "_pooled"  # a pool's row and its results-file metrics (``tasks.wrapped.POOLED``)


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


def refit(run: TaskRun, methods: Sequence[Method],
          pool: Pool | None = None) -> dict[str, fits.Fitted | None]:
    """Each method's fit on the run's records (a pool member's: on its pool's calibration
    records, ``Pool.records_of``): {label: fits.Fitted, None where undefined or where nothing
    can be fitted (no calibration records: results-file numbers only)}."""
    source = run if pool is None else pool.source
    calibration, evaluation = split_records(run.records if pool is None
                                            else pool.records_of(run))
    settings = settings_of(run)
    context = run_context(run, settings)
    found: dict[str, fits.Fitted | None] = {}
    for method in methods:
        try:
            found[method.label] = refits.fitted(method.fit, source, run, calibration, evaluation,
                                                settings, context)
        except fits.NoCalibration:
            found[method.label] = None
    return found


@dataclass
class Pool:
    """The members of one calibration pool in one results file (one lm-eval run)."""

    name: str
    logged: list[str]  # the pool's members as the config names them
    runs: dict[str, TaskRun]  # the members in the results file, by task name
    source: TaskRun  # its records: every member's calibration records, in the task's order
    refitted: bool  # whether every member here has usable records (else results-file numbers)

    def records_of(self, run: TaskRun) -> list[Any]:
        """The pool's calibration records, then ``run``'s evaluation records: what the task
        fitted and scored ``run`` on (``tasks.wrapped.pooled_records``)."""
        return [*self.source.records, *(r for r in _ordered(run) if r["split"] != CALIBRATION)]

    def pooled_run(self) -> TaskRun:
        """The pool's own row: every member's records, and its ``<metric>_pooled`` numbers."""
        first = self.runs[min(self.runs)]
        records = None
        if self.refitted:
            records = [*self.source.records, *(r for name in sorted(self.runs)
                                               for r in _ordered(self.runs[name])
                                               if r["split"] != CALIBRATION)]
        metrics = {k.removesuffix(POOLED): v for k, v in first.metrics.items()
                   if k.endswith(POOLED)}
        return dataclasses.replace(first, task=self.name, metrics=metrics, records=records,
                                   expected_docs=None, samples_file=None, prompts=None,
                                   generations=None, sources=None, stage1_samples=None,
                                   prompt_tokens=None)


def _ordered(run: TaskRun) -> list[Any]:
    return sorted(run.records or [], key=itemgetter("index"))


def pool_of(run: TaskRun) -> dict[str, Any] | None:
    """The calibration pool a wrapped group's member logged (``metadata.calibration_pool``)."""
    pool = (run.config.get("metadata") or {}).get("calibration_pool")
    return pool if isinstance(pool, dict) and pool.get("name") else None


def pooled_benchmark(pool: str, run: TaskRun) -> str:
    """The benchmark name of a pool's row: the pool's name without ``calidist_`` and the
    variant's suffix (a member's task is ``calidist_<benchmark><suffix>``), then ``_pooled``:
    ``calidist_mmlu_assertion`` -> ``mmlu_pooled``."""
    benchmark, _ = task_variant(run.task, run.config)
    suffix = run.task.removeprefix(f"calidist_{benchmark}")
    name = pool.removeprefix("calidist_")
    if suffix != run.task and suffix and name.endswith(suffix):
        name = name.removesuffix(suffix)
    return name + POOLED


def calibration_pools(runs: Sequence[TaskRun], notes: list[str]) -> dict[int, Pool]:
    """{id of a member's run: its Pool}, per pool and results file; a note per member whose
    pool-mates are not in its results file, and per pool whose records cannot all be used."""
    found: dict[tuple[str, str, str], dict[str, TaskRun]] = {}
    logged: dict[tuple[str, str, str], list[str]] = {}
    for run in runs:
        pool = pool_of(run)
        if pool is not None:
            key = (run.group, str(run.results_file), str(pool["name"]))
            found.setdefault(key, {})[run.task] = run
            logged.setdefault(key, [str(m) for m in pool.get("members") or []])
    pools: dict[int, Pool] = {}
    for key, members in found.items():
        name = key[2]
        refitted = all(run.records is not None for run in members.values())
        calibration = [r for task in sorted(members) for r in _ordered(members[task])
                       if r["split"] == CALIBRATION] if refitted else None
        first = members[min(members)]
        source = dataclasses.replace(first, task=name, records=calibration)
        pool = Pool(name, logged[key], members, source, refitted)
        absent = sorted(set(pool.logged) - set(members))
        for run in (members[task] for task in sorted(members)):
            if absent:
                notes.append(f"{run.name}: its calibration pool {name} has {len(members)} of "
                             f"its {len(pool.logged)} tasks in {run.results_file.name} (not "
                             f"there: {', '.join(absent)}); fitted on the tasks there, as the "
                             "task was")
            pools[id(run)] = pool
        if not refitted:
            notes.append(f"{name} [{first.model}]: not every member's samples are usable; its "
                         "members' pooled fit is the results file's numbers only")
    return pools


def pool_cells(pool: Pool, problems: list[str], notes: list[str]) -> list[Cell]:
    """The cells of a pool's own row (``pooled_benchmark``): with two or more members here."""
    if len(pool.runs) < 2:
        return []
    first = pool.runs[min(pool.runs)]
    _, variant = task_variant(first.task, first.config)
    if variant is None:
        return []
    run = pool.pooled_run()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CalibrationWarning)
        cells = _cells(run, pooled_benchmark(pool.name, first), variant.name,
                       methods_of(variant), problems)
    notes.extend(dict.fromkeys(f"{run.name}: {w.message}" for w in caught
                               if issubclass(w.category, CalibrationWarning)))
    return cells


def task_cells(run: TaskRun, problems: list[str], notes: list[str],
               pool: Pool | None = None) -> list[Cell]:
    """The leaderboard cells one task fills, rebuilt from its records where possible (a pool
    member's: with its pool's fit, ``Pool.records_of``)."""
    benchmark, variant = task_variant(run.task, run.config)
    log.info("refitting the methods of %s", run.name)
    if variant is None:
        problems.append(f"{run.name}: no leaderboard row for this task's variant (its config "
                        "names no registered style and confidence); register it in "
                        "calidist_tasks/registry.py")
        return []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CalibrationWarning)
        cells = _cells(run, benchmark, variant.name, methods_of(variant), problems, pool)
    notes.extend(dict.fromkeys(f"{run.name}: {w.message}" for w in caught
                               if issubclass(w.category, CalibrationWarning)))
    return cells


def _cells(run: TaskRun, benchmark: str, variant: str, methods: list[Method],
           problems: list[str], pool: Pool | None = None) -> list[Cell]:
    per_doc: dict[str, fits.Fitted | None] = {}
    if run.records is not None and (pool is None or pool.refitted):
        try:
            per_doc = refit(run, methods, pool)
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
    """One cell per model, benchmark and method: from the method's preferred task variant; a
    calibration pool's members fitted on the pool, and its own row (``calibration_pools``)."""
    chosen: dict[tuple[str, str, str], Cell] = {}
    pools = calibration_pools(runs, notes)
    found = [cell for run in runs for cell in task_cells(run, problems, notes, pools.get(id(run)))]
    for pool in {id(p): p for p in pools.values()}.values():
        found += pool_cells(pool, problems, notes)
    for cell in found:
        key = (cell.model, cell.benchmark, cell.method.label)
        old = chosen.get(key)
        if old is None or cell.rank < old.rank:
            chosen[key] = cell
    return list(chosen.values())
