"""Out-of-domain transfer of a CaliDist fit, from logged samples alone (no model is run).

The paper tunes alpha and beta on one task and applies them to another (its OOD experiment).
Here the whole fit (lambda bounds, alpha, beta) is refitted on the SOURCE task's calibration
documents and applied to the TARGET task's evaluation documents, per model, beside the target's
vanilla confidence and the target's own (in-domain) fit. The fit reads only lambda_raw and
the confidence, so source and target may have different label spaces.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

from calidist_metrics import CalibrationWarning
from calidist_tasks.registry import SCORES, calidist_method
from calidist_tasks.report import refits
from calidist_tasks.report.cells import run_context, settings_of
from calidist_tasks.report.runs import TaskRun
from calidist_tasks.report.tables import LEADERBOARD_SCORES, Table
from calidist_tasks.scoring.fits import Fitted, column, split_records

CONFIDENCES = ("vanilla", "in-domain", "transferred")


def parse_pair(text: str) -> tuple[str, str]:
    """``SOURCE_TASK:TARGET_TASK`` -> (source, target)."""
    source, sep, target = text.partition(":")
    if not sep or not source or not target or ":" in target:
        raise ValueError(f"--transfer {text!r}: expected SOURCE_TASK:TARGET_TASK, e.g. "
                         "calidist_mnli_assertion:calidist_mscinli_assertion")
    return source.strip(), target.strip()


def refit_calidist(run: TaskRun, target: TaskRun) -> Fitted:
    """CaliDist (the registry's fit) refitted on ``run``'s calibration documents with ``run``'s
    settings, applied to ``target``'s evaluation documents.

    ``lambda_scale`` and ``fit`` come from the run's logged metadata, else the defaults (the
    paper's grid search alone); lambda_raw in the records already follows its ``delta_mode``.
    """
    settings = replace(settings_of(run), calibrator=None)  # refit even if the run loaded a fit
    calibration, _ = split_records(run.records)
    _, evaluation = split_records(target.records)
    # the in-domain fit (run is target) is the leaderboard's where the run loaded no fit
    return refits.fitted(calidist_method().fit, run, target, calibration, evaluation, settings,
                         run_context(run, settings))


def transfer_table(pairs: list[tuple[str, str]], runs: list[TaskRun], names: dict[str, str],
                   problems: list[str]) -> Table:
    """Per pair and model: target scores with vanilla, in-domain and transferred fits (x100)."""
    scores = [s for s, _, _ in LEADERBOARD_SCORES]
    table = Table(
        ["model", "source", "target", "n", "α source", "β source", "α target", "β target"]
        + [f"{title} {c}" for _, title, _ in LEADERBOARD_SCORES for c in CONFIDENCES],
        keys=["model", "source", "target", "n", "alpha_source", "beta_source", "alpha_target",
              "beta_target"] + [f"{s}_{c.replace('-', '_')}" for s in scores for c in CONFIDENCES],
        digits=2,
    )
    by_key = {(r.group, r.task): r for r in runs}
    for source, target in pairs:
        models = sorted({r.group for r in runs if r.task in (source, target)},
                        key=lambda m: names[m])
        if not models:
            problems.append(f"transfer {source} -> {target}: neither task is in the runs")
        for model in models:
            pair = [by_key.get((model, source)), by_key.get((model, target))]
            where = f"transfer {source} -> {target} [{names[model]}]"
            if None in pair or any(r.records is None for r in pair):
                missing = [t for t, r in zip((source, target), pair, strict=True)
                           if r is None or r.records is None]
                problems.append(f"{where}: no usable logged samples of {', '.join(missing)}")
                continue
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", CalibrationWarning)  # the leaderboard notes
                    transferred, in_domain = (refit_calidist(r, pair[1]) for r in pair)
                _, evaluation = split_records(pair[1].records)
                correct = column(evaluation, "correct")
                confidences = [column(evaluation, "confidence"), in_domain.confidence,
                               transferred.confidence]
                fits = [transferred.estimator, in_domain.estimator]
            except (KeyError, TypeError, ValueError) as error:
                problems.append(f"{where}: cannot refit ({type(error).__name__}: {error})")
                continue
            table.rows.append(
                [names[model], source, target, str(correct.size), fits[0].alpha_, fits[0].beta_,
                 fits[1].alpha_, fits[1].beta_]
                + [100 * SCORES[s](c, correct) for s in scores for c in confidences])
    return table
