"""The report's Thresholds table: from which confidence on to act on an answer.

For each model, benchmark and method, and each target accuracy: the lowest confidence threshold
whose kept answers reach the target (``calidist_metrics.selective_threshold``), the share of the
evaluation documents it keeps with its bootstrap interval, and the accuracy of the kept ones; the
risk-coverage curves behind them are the report's ``risk_coverage_*`` figures.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

from calidist_metrics import (
    CalibrationWarning,
    selective_threshold,
    selective_threshold_interval,
)
from calidist_tasks.registry import METHODS
from calidist_tasks.report.cells import Cell
from calidist_tasks.report.tables import UNREADABLE, Table, benchmark_order, benchmark_title

TARGET_ACCURACIES = (0.8, 0.9, 0.95)  # `calidist report --target-accuracy` changes them


def parse_targets(text: str) -> tuple[float, ...]:
    """``--target-accuracy``'s comma-separated accuracies ("0.9,0.95"), each in (0, 1];
    ValueError naming the bad one."""
    targets = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            value = math.nan
        if not 0.0 < value <= 1.0:
            raise ValueError(f"--target-accuracy: {part.strip()!r} is not an accuracy in (0, 1] "
                             "(give fractions, comma-separated: 0.8,0.9,0.95)")
        targets.append(value)
    return tuple(targets)


def thresholds_table(cells: Sequence[Cell], names: dict[str, str],
                     targets: Sequence[float] = TARGET_ACCURACIES, n_resamples: int = 1000,
                     seed: int = 0) -> Table:
    """One row per model, benchmark, method and target accuracy, x100: the threshold, the
    coverage it keeps with its 95% percentile bootstrap interval (``n_resamples`` resamples of
    the evaluation documents, each choosing its own threshold; none when 0) and the accuracy of
    the kept answers; "–" where no threshold reaches the target. Cells with results-file
    numbers only (no per-document confidences) have no row."""
    table = Table(["model", "benchmark", "method", "n", "target acc", "threshold", "coverage",
                   "coverage low", "coverage high", "acc kept"],
                  keys=["model", "benchmark", "method", "n", "target_accuracy", "threshold",
                        "coverage", "coverage_low", "coverage_high", "accuracy_kept"])
    order = {m.label: i for i, m in enumerate(METHODS)}
    benchmarks = benchmark_order(cells)
    ranked = sorted((c for c in cells if c.confidence is not None),
                    key=lambda c: (names[c.model], benchmarks.index(c.benchmark),
                                   order[c.method.label]))
    for cell in ranked:
        label = cell.method.label + (f" {UNREADABLE}" if cell.unreadable else "")
        for target in targets:
            if n_resamples:
                with warnings.catch_warnings():  # resamples of one class only are defined
                    warnings.simplefilter("ignore", CalibrationWarning)
                    found, low, high = selective_threshold_interval(
                        cell.confidence, cell.correct, target, n_resamples, seed=seed)
                interval = [100 * low, 100 * high]
            else:
                found = selective_threshold(cell.confidence, cell.correct, target)
                interval = [None, None]
            table.rows.append([names[cell.model], benchmark_title(cell.benchmark),
                               label, str(cell.n), 100 * target, _percent(found.threshold),
                               100 * found.coverage, *interval, _percent(found.accuracy)])
    return table


def _percent(value: float) -> float | None:
    return None if math.isnan(value) else 100 * value
