"""Tables of the report (Markdown and CSV from one structure): leaderboard, intervals, scores.

Every score is printed x100, as in the paper. The leaderboard has one row per model and method
and, per benchmark, accuracy, ECE / Brier / AUROC and the share of unreadable replies, plus
their average over the benchmarks (only for rows with a value on every benchmark, so that
averages compare like with like); the best ECE / Brier / AUROC of each benchmark's column
within a block (model and run settings) is marked where a paired bootstrap finds it
significantly better than the next best (bold in Markdown, listed in the CSV's ``best`` column),
never for a method whose replies were mostly unreadable (flagged ⚠).
"""

from __future__ import annotations

import csv
import io
import logging
import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from calidist_metrics import (
    CalibrationWarning,
    bootstrap_interval,
    paired_bootstrap_test,
)
from calidist_tasks.data.yaml_configs import benchmark_titles
from calidist_tasks.registry import LEADERBOARD, METHODS, MORE, SCORES, scores_shown
from calidist_tasks.report.cells import POOLED, Cell
from calidist_tasks.scoring.records import VANILLA, metric_name

# (score, title, higher is better)
LEADERBOARD_SCORES = tuple((s.name, s.title, s.higher_is_better)
                           for s in scores_shown(LEADERBOARD).values())
# the leaderboard's columns per benchmark; None = context, never marked best
LEADERBOARD_COLUMNS = (("acc", "Acc", None), *LEADERBOARD_SCORES,
                       ("parse_fail_rate", "Unreadable", None))
UNREADABLE = "⚠"  # after a method whose replies were mostly unreadable
# paired test: the same confidences as the task's own vanilla (which can differ from the Vanilla
# row's, taken from another task), nothing to test
IDENTICAL = "equal to its task's own vanilla confidence"
ALWAYS_ZERO = "Δ = 0 in every resample"  # paired test: e.g. AUROC after a monotone map
PAPER_ORDER = ("mscinli", "mnli", "ppdb", "yahoo", "hellaswag", "csqa", "aqua", "gsm8k",
               "contractnli")
FROM_RESULTS = "†"  # a cell with results-file numbers only (no logged documents behind it)
SIGNIFICANT = 0.05
log = logging.getLogger(__name__)  # progress of the bootstrap (stderr in `calidist report`)


def benchmark_title(benchmark: str) -> str:
    """A benchmark's title in tables and figures: its YAML's ``metadata: title``, else its
    name."""
    return benchmark_titles().get(benchmark, benchmark)


def _heading(text: str) -> str:
    """A column heading starts with a capital ("average" -> "Average"; "AQuA" unchanged)."""
    return text[:1].upper() + text[1:]


@dataclass
class Table:
    """Rows of cells (str, float or None); ``marks`` = (row, column) cells to highlight.

    ``keys`` name the CSV columns (default: the Markdown titles).
    """

    columns: list[str]
    rows: list[list] = field(default_factory=list)
    marks: set[tuple[int, int]] = field(default_factory=set)
    digits: int = 2
    keys: list[str] | None = None

    def shown(self, value, escape_text: Callable[[str], str], missing: str = "–") -> str:
        """One cell as printed: a number at ``digits``, text escaped, ``missing`` for None."""
        if value is None:
            return missing
        if isinstance(value, float):
            return f"{value:.{self.digits}f}"
        return escape_text(str(value))

    def numeric(self) -> list[bool]:
        """Per column: whether it holds numbers (right-aligned)."""
        return [any(isinstance(r[j], float) for r in self.rows) for j in range(len(self.columns))]

    def markdown(self) -> str:
        def text(i: int, j: int, value) -> str:
            shown = self.shown(value, escape)
            return f"**{shown}**" if (i, j) in self.marks else shown

        numeric = self.numeric()
        lines = ["| " + " | ".join(escape(c) for c in self.columns) + " |",
                 "|" + "|".join("---:" if n else "---" for n in numeric) + "|"]
        lines += ["| " + " | ".join(text(i, j, v) for j, v in enumerate(row)) + " |"
                  for i, row in enumerate(self.rows)]
        return "\n".join(lines)

    def csv(self, mark_column: str | None = None) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        keys = self.keys or self.columns
        writer.writerow(keys + ([mark_column] if mark_column else []))
        for i, row in enumerate(self.rows):
            cells = ["" if v is None else round(v, 4) if isinstance(v, float) else v for v in row]
            if mark_column:
                cells.append(";".join(keys[j] for (r, j) in sorted(self.marks) if r == i))
            writer.writerow(cells)
        return out.getvalue()


def escape(text: str) -> str:
    """Markdown table cell text: names from files cannot break the table or add markup."""
    text = " ".join(text.split())
    for char in "\\`*_[]<>|#":
        text = text.replace(char, "\\" + char)
    return text


def benchmark_order(cells: Iterable[Cell]) -> list[str]:
    found = {c.benchmark for c in cells}
    known = [b for b in PAPER_ORDER if b in found]
    return known + sorted(found - set(known))


def _best(values: Sequence[float | None], higher: bool, excluded: set[int],
          beats: Callable[[int, int], bool]) -> set[int]:
    """The rows to mark in one column of a block: those at the best printed value, each only
    where ``beats(best, runner_up)`` (a significant paired test) holds against every row at the
    next value; none where every value ties. ``excluded`` rows and numbers that are not finite
    (an edited or broken results file) are never marked."""
    shown = [None if v is None or i in excluded or not math.isfinite(v) else round(v, 2)
             for i, v in enumerate(values)]
    present = sorted({v for v in shown if v is not None}, reverse=higher)
    if len(present) < 2:  # one row, or every value ties: nothing is best
        return set()
    best = [i for i, v in enumerate(shown) if v == present[0]]
    runners_up = [i for i, v in enumerate(shown) if v == present[1]]
    return {i for i in best if all(beats(i, j) for j in runners_up)}


def _beats(cells: Sequence[Cell | None], score: str, n_resamples: int, seed: int, i: int,
           k: int) -> bool:
    """Whether ``cells[i]``'s ``score`` differs from ``cells[k]``'s significantly
    (``significant``) in the paired bootstrap over the documents both scored; False without
    per-document data for both (results-file numbers only, other documents) or resamples."""
    a, b = cells[i], cells[k]
    if (n_resamples == 0 or a is None or b is None or a.confidence is None
            or b.confidence is None or a.correct.size != b.correct.size):
        return False
    return significant(paired_difference(SCORES[score], a.confidence, a.correct, b.confidence,
                                         b.correct, n_resamples, seed))


def _value(cell: Cell | None, name: str) -> float | None:
    """A leaderboard number x100 (None when absent or NaN)."""
    if cell is None:
        return None
    if name == "acc":
        value = cell.accuracy
    elif name == "parse_fail_rate":
        value = cell.parse_fail_rate
    else:
        value = cell.values.get(name)
    return None if value is None or math.isnan(value) else 100 * float(value)


def leaderboard(cells: list[Cell], names: dict[str, str], n_resamples: int = 1000,
                seed: int = 0) -> Table:
    """Rows model x method; per benchmark (and their average): accuracy, ECE, Brier, AUROC and
    the share of unreadable replies, x100.

    The best ECE / Brier / AUROC of a benchmark's column within a block (model and run
    settings) is marked where it is significantly better than the next best (paired bootstrap
    over the documents, ``n_resamples`` resamples, p < 0.05: ``_best``); never where every
    value ties, in the average columns (no test over benchmarks) or without per-document data.
    A method whose replies were mostly unreadable (``Cell.unreadable``) is flagged with
    UNREADABLE after its name and never marked best.
    """
    benchmarks = benchmark_order(cells)
    groups = [*benchmarks, "average"] if len(benchmarks) > 1 else benchmarks
    table = Table(
        ["model", "method"] + [f"{_heading(benchmark_title(g))} {title}"
                               f"{'' if higher is None else '↑' if higher else '↓'}"
                               for g in groups for _, title, higher in LEADERBOARD_COLUMNS],
        keys=["model", "method"] + [f"{g}_{s}" for g in groups for s, _, _ in LEADERBOARD_COLUMNS],
    )
    by_key = {(c.model, c.benchmark, c.method.label): c for c in cells}
    width = len(LEADERBOARD_COLUMNS)
    for model in sorted({c.model for c in cells}, key=lambda m: names[m]):
        first, flagged = len(table.rows), []  # flagged: per row, the groups not to mark
        row_cells: list[list[Cell | None]] = []
        for method in METHODS:
            found = [by_key.get((model, b, method.label)) for b in benchmarks]
            if not any(found):
                continue
            row_cells.append(found)
            bad = {g for g, c in enumerate(found) if c is not None and c.unreadable}
            if bad and len(benchmarks) > 1:
                bad.add(len(benchmarks))  # the average includes the unreadable benchmark
            label = method.label
            if not all(c is None or c.confidence is not None for c in found):
                label += f" {FROM_RESULTS}"
            if bad:
                label += f" {UNREADABLE}"
            values = [[_value(c, s) for s, _, _ in LEADERBOARD_COLUMNS] for c in found]
            if len(benchmarks) > 1:  # a pool's own row is left out: its members are there
                averaged = [v for b, v in zip(benchmarks, values, strict=True)
                            if not b.endswith(POOLED)] or values
                values.append([None if None in column else float(np.mean(column))
                               for column in zip(*averaged, strict=True)])
            table.rows.append([names[model], label] + [v for group in values for v in group])
            flagged.append(bad)
        for j in range(2, 2 + width * len(benchmarks)):  # the average columns: never
            score, _, higher = LEADERBOARD_COLUMNS[(j - 2) % width]
            if higher is None:  # accuracy and unreadable share: context, never marked
                continue
            group = (j - 2) // width
            excluded = {i for i, bad in enumerate(flagged) if group in bad}
            column = [r[j] for r in table.rows[first:]]
            beats = partial(_beats, [found[group] for found in row_cells], score, n_resamples,
                            seed)
            table.marks |= {(first + i, j) for i in _best(column, higher, excluded, beats)}
    return table


def accuracy(confidence: np.ndarray, correct: np.ndarray) -> float:
    """Share of correct documents (a score of the same signature, for its interval)."""
    return float(np.mean(correct))


def score_intervals(confidence: np.ndarray, correct: np.ndarray, n_resamples: int,
                    seed: int = 0, scores: Mapping[str, Callable] | None = None
                    ) -> dict[str, tuple[float, float, float]]:
    """(value, 95% low, 95% high) per score (default ``registry.SCORES``), each a percentile
    bootstrap over the documents (``calidist_metrics.bootstrap_interval``, numpy seed ``seed``).
    Degenerate resamples warn (CalibrationWarning) as in ``bootstrap_interval``."""
    return {name: bootstrap_interval(fn, confidence, correct, n_resamples, seed=seed)
            for name, fn in (scores or SCORES).items()}


def paired_difference(metric: Callable, confidence_a: np.ndarray, correct_a: np.ndarray,
                      confidence_b: np.ndarray, correct_b: np.ndarray | None = None,
                      n_resamples: int = 1000, seed: int = 0) -> dict[str, float]:
    """metric(a) - metric(b) on the same documents, with its 95% paired bootstrap interval
    (``calidist_metrics.paired_bootstrap_test``).

    Two methods that predict differently (vector scaling, verbalized or sampled answers) score
    the same documents with their own correctness (``correct_b``): the documents are resampled
    jointly (same resample indices) and each method is scored on its own correctness.
    Returns ``difference``, ``low``, ``high``, ``p_value`` and ``n``.
    """
    confidence_a, confidence_b = np.asarray(confidence_a, float), np.asarray(confidence_b, float)
    correct_a = np.asarray(correct_a, float)
    correct_b = correct_a if correct_b is None else np.asarray(correct_b, float)
    if not (confidence_a.size == confidence_b.size == correct_a.size == correct_b.size):
        raise ValueError("paired_difference: a and b must score the same documents")
    test = paired_bootstrap_test(metric, confidence_a, confidence_b, correct_a, n_resamples,
                                 seed=seed, correct_b=correct_b)
    return {**test, "n": int(correct_a.size)}


def verdict(test: Mapping[str, float], higher_is_better: bool = False) -> str:
    """"better", "worse" or "not distinguishable": whether the paired 95% interval of
    a - b excludes 0, and on which side (lower is better unless ``higher_is_better``)."""
    if test["high"] < 0:
        return "worse" if higher_is_better else "better"
    if test["low"] > 0:
        return "better" if higher_is_better else "worse"
    return "not distinguishable"


def significant(test: dict[str, float]) -> bool:
    """p < 0.05 and a difference that shows at the printed precision (x100, 2 decimals)."""
    return test["p_value"] < SIGNIFICANT and round(100 * test["difference"], 2) != 0


def p_text(p_value: float, n_resamples: int) -> str:
    """``p=0.012``, or ``p < 0.001`` for B = 1000 resamples when none crossed 0: a bootstrap
    p-value below 1/B is not resolved, and "p=0.000" would claim it is."""
    if p_value < 1.0 / n_resamples:
        return f"p < {1.0 / n_resamples:.2g}"
    return f"p={p_value:.3f}"


def identical(confidence_a: np.ndarray, confidence_b: np.ndarray) -> bool:
    """Whether two confidences of the same documents are equal to numerical precision."""
    return bool(np.allclose(confidence_a, confidence_b, rtol=1e-9, atol=1e-12))


def intervals(cells: list[Cell], names: dict[str, str], n_resamples: int, seed: int = 0,
              notes: list[str] | None = None) -> tuple[Table, Table]:
    """95% bootstrap intervals and the paired test against vanilla: (Markdown, long CSV).

    Documents of the evaluation set are resampled with replacement (``n_resamples`` times,
    numpy seed ``seed``); the paired test resamples the same documents for both confidences.
    A significant difference is bold in the Markdown. No p-value is given where the method's
    confidences equal vanilla's to numerical precision (IDENTICAL) or the difference is 0 in
    every resample (ALWAYS_ZERO, e.g. AUROC after a monotone map); the CSV's ``note`` says
    which. Resamples holding one class only (AUROC undefined, 0.5 used) are counted in
    ``notes``.
    """
    scores = [s for s, _, _ in LEADERBOARD_SCORES]
    wide = Table(["model", "benchmark", "method", "n"]
                 + [f"{t} (95% CI)" for _, t, _ in LEADERBOARD_SCORES]
                 + [f"Δ{t} vs vanilla (95% CI), p" for _, t, _ in LEADERBOARD_SCORES])
    long = Table(["model", "benchmark", "task", "method", "score", "n", "value", "ci_low",
                  "ci_high", "diff_vs_vanilla", "diff_low", "diff_high", "p_value", "note"],
                 digits=4)
    order = {m.label: i for i, m in enumerate(METHODS)}
    benchmarks = benchmark_order(cells)
    ranked = sorted((c for c in cells if c.confidence is not None),
                    key=lambda c: (names[c.model], benchmarks.index(c.benchmark),
                                   order[c.method.label]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CalibrationWarning)
        for number, cell in enumerate(ranked, start=1):
            log.info("bootstrap %d/%d: %s, %s", number, len(ranked), cell.run.name,
                     cell.method.label)
            shown, tests = [], []
            label = cell.method.label + (f" {UNREADABLE}" if cell.unreadable else "")
            same = cell.paired and identical(cell.confidence, cell.vanilla[0])
            found = score_intervals(cell.confidence, cell.correct, n_resamples, seed,
                                    {score: SCORES[score] for score in scores})
            for score in scores:
                value, low, high = found[score]
                shown.append(f"{100 * value:.2f} ({100 * low:.2f} to {100 * high:.2f})")
                if not cell.paired:
                    tests.append("–")
                    long.rows.append([names[cell.model], cell.benchmark, cell.run.task, label,
                                      score, cell.n, 100 * value, 100 * low, 100 * high, None,
                                      None, None, None, ""])
                    continue
                row = [names[cell.model], cell.benchmark, cell.run.task, label, score, cell.n,
                       100 * value, 100 * low, 100 * high]
                if same:  # no test: the difference is 0 in every resample by construction
                    tests.append(f"– ({IDENTICAL}, {cell.run.task}: no test)")
                    long.rows.append([*row, 0.0, 0.0, 0.0, None, IDENTICAL])
                    continue
                test = paired_difference(SCORES[score], cell.confidence, cell.correct,
                                         cell.vanilla[0], None, n_resamples, seed=seed)
                diff = [100 * test["difference"], 100 * test["low"], 100 * test["high"]]
                if test["difference"] == test["low"] == test["high"] == 0.0:
                    tests.append(f"+0.00 (+0.00 to +0.00), p – ({ALWAYS_ZERO})")
                    long.rows.append([*row, *diff, None, ALWAYS_ZERO])
                    continue
                tests.append(f"{diff[0]:+.2f} ({diff[1]:+.2f} to {diff[2]:+.2f}), "
                             f"{p_text(test['p_value'], n_resamples)}")
                if significant(test):
                    wide.marks.add((len(wide.rows), 4 + len(scores) + len(tests) - 1))
                long.rows.append([*row, *diff, test["p_value"], ""])
            wide.rows.append([names[cell.model], benchmark_title(cell.benchmark),
                              label, str(cell.n), *shown, *tests])
    degenerate = [w for w in caught if issubclass(w.category, CalibrationWarning)]
    if degenerate and notes is not None:
        notes.append(f"bootstrap: {len(degenerate)} of the intervals and tests met resamples "
                     "holding only correct or only wrong documents (AUROC 0.5 used for those); "
                     "such intervals are wide and rough")
    return wide, long


def more_scores(cells: list[Cell], names: dict[str, str]) -> Table:
    """Per model, benchmark and method: accuracy and every score the registry shows here
    (``registry.MORE``: adaptive and one-bin ECE, MCE, smooth ECE, AURC, the accuracy of the
    80% most confident documents, PRR, NLL, RMS calibration error), x100.

    Computed from the per-document data; a cell with results-file numbers only (†) shows the
    scores its results file holds (MCE, smECE, AURC of runs made since they exist), "–" else.
    """
    shown = list(scores_shown(MORE).values())  # read now: a registered score is a column
    table = Table(["model", "benchmark", "method", "n", "Acc"] + [s.title + s.arrow for s in shown],
                  keys=["model", "benchmark", "method", "n", "acc"] + [s.name for s in shown])
    order = {m.label: i for i, m in enumerate(METHODS)}
    benchmarks = benchmark_order(cells)
    for cell in sorted(cells, key=lambda c: (names[c.model], benchmarks.index(c.benchmark),
                                             order[c.method.label])):
        label = cell.method.label + (f" {UNREADABLE}" if cell.unreadable else "")
        if cell.confidence is None:
            label += f" {FROM_RESULTS}"
            values = [_value(cell, score.name) for score in shown]
        else:
            values = [100 * float(score(cell.confidence, cell.correct)) for score in shown]
        table.rows.append([names[cell.model], benchmark_title(cell.benchmark), label,
                           None if cell.n is None else str(cell.n), _value(cell, "acc"),
                           *values])
    return table


def model_summary(cells: list[Cell], names: dict[str, str]) -> Table:
    """One row per block (model and run settings), HELM style: over the benchmarks it has, the
    mean accuracy, the mean ECE of its vanilla confidence and of its best method per benchmark
    (which method, how often), and the mean rank of that best ECE among the blocks that have
    the benchmark (1 = best). Mostly unreadable methods (⚠) are never a block's best."""
    table = Table(["model", "benchmarks", "Acc", "Vanilla ECE↓", "best ECE↓", "best method",
                   "mean rank↓"],
                  keys=["model", "benchmarks", "acc", metric_name("ece", VANILLA), "ece_best",
                        "best_method", "mean_rank"])
    best: dict[tuple[str, str], Cell] = {}
    vanilla: dict[tuple[str, str], Cell] = {}
    for cell in cells:
        ece = _value(cell, "ece")
        if ece is None or cell.unreadable:
            continue
        key = (cell.model, cell.benchmark)
        if key not in best or ece < _value(best[key], "ece"):
            best[key] = cell
        if cell.method.own and key not in vanilla:
            vanilla[key] = cell
    ranks: dict[tuple[str, str], int] = {}
    for benchmark in {b for _, b in best}:
        ranked = sorted((k for k in best if k[1] == benchmark),
                        key=lambda k: _value(best[k], "ece"))
        ranks.update({key: position for position, key in enumerate(ranked, start=1)})
    for model in sorted({m for m, _ in best}, key=lambda m: names[m]):
        mine = [k for k in best if k[0] == model and not k[1].endswith(POOLED)] or [
            k for k in best if k[0] == model]  # a pool's own row: its members are there
        labels = [best[k].method.label for k in mine]
        common = max(set(labels), key=labels.count)
        table.rows.append([
            names[model], str(len(mine)),
            _mean([_value(best[k], "acc") for k in mine]),
            _mean([_value(vanilla.get(k), "ece") for k in mine]),
            _mean([_value(best[k], "ece") for k in mine]),
            f"{common} ({labels.count(common)}/{len(mine)})",
            float(np.mean([ranks[k] for k in mine]))])
    return table


def _mean(values: list[float | None]) -> float | None:
    """The mean, or None when a value is missing (averages compare like with like)."""
    return None if not values or None in values else float(np.mean(values))
