"""Tables of the report (Markdown and CSV from one structure): leaderboard and intervals.

Every score is printed x100, as in the paper. The leaderboard has one row per model and method
and, per benchmark, ECE / Brier / AUROC, plus their average over the benchmarks (only for rows
with a value on every benchmark, so that averages compare like with like); the best value of
each column within a model is marked (bold in Markdown, listed in the CSV's ``best`` column).
"""

from __future__ import annotations

import csv
import io
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from calidist_metrics import CalibrationWarning, bootstrap_interval, paired_bootstrap_test
from calidist_tasks.aggregation import SCORES
from calidist_tasks.report.methods import METHODS, Cell

# (score, title, higher is better)
LEADERBOARD_SCORES = (("ece", "ECE", False), ("brier", "Brier", False), ("auroc", "AUROC", True))
PAPER_ORDER = ("mscinli", "mnli", "ppdb", "yahoo", "hellaswag", "csqa", "aqua", "gsm8k",
               "contractnli")
TITLES = {"mscinli": "MSciNLI", "mnli": "MNLI", "ppdb": "PPDB", "yahoo": "Yahoo", "csqa": "CSQA",
          "hellaswag": "HellaSwag", "aqua": "AQuA", "gsm8k": "GSM8K",
          "contractnli": "ContractNLI"}
FROM_RESULTS = "†"  # a cell with results-file numbers only (no logged documents behind it)
SIGNIFICANT = 0.05


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

    def markdown(self) -> str:
        def text(i: int, j: int, value) -> str:
            if value is None:
                shown = "–"
            elif isinstance(value, float):
                shown = f"{value:.{self.digits}f}"
            else:
                shown = escape(str(value))
            return f"**{shown}**" if (i, j) in self.marks else shown

        numeric = [any(isinstance(r[j], float) for r in self.rows)
                   for j in range(len(self.columns))]
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


def _best(values: Sequence[float | None], higher: bool) -> set[int]:
    # ties at the printed precision are all marked
    shown = [None if v is None else round(v, 2) for v in values]
    present = [v for v in shown if v is not None]
    if not present:
        return set()
    target = max(present) if higher else min(present)
    return {i for i, v in enumerate(shown) if v == target}


def leaderboard(cells: list[Cell], names: dict[str, str]) -> Table:
    """Rows model x method, columns benchmark x (ECE, Brier, AUROC) and their average, x100."""
    benchmarks = benchmark_order(cells)
    groups = [*benchmarks, "average"] if len(benchmarks) > 1 else benchmarks
    table = Table(
        ["model", "method"] + [f"{TITLES.get(g, g.capitalize())} {title}{'↑' if higher else '↓'}"
                               for g in groups for _, title, higher in LEADERBOARD_SCORES],
        keys=["model", "method"] + [f"{g}_{s}" for g in groups for s, _, _ in LEADERBOARD_SCORES],
    )
    by_key = {(c.model, c.benchmark, c.method.label): c for c in cells}
    for model in sorted({c.model for c in cells}, key=lambda m: names[m]):
        first = len(table.rows)
        for method in METHODS:
            found = [by_key.get((model, b, method.label)) for b in benchmarks]
            if not any(found):
                continue
            row = [names[model], method.label + ("" if all(
                c is None or c.confidence is not None for c in found) else f" {FROM_RESULTS}")]
            values = [[None if c is None or s not in c.values else 100 * c.values[s]
                       for s, _, _ in LEADERBOARD_SCORES] for c in found]
            if len(benchmarks) > 1:
                values.append([None if None in column else float(np.mean(column))
                               for column in zip(*values, strict=True)])
            table.rows.append(row + [v for per_group in values for v in per_group])
        for j in range(2, len(table.columns)):
            higher = LEADERBOARD_SCORES[(j - 2) % len(LEADERBOARD_SCORES)][2]
            column = [r[j] for r in table.rows[first:]]
            table.marks |= {(first + i, j) for i in _best(column, higher)}
    return table


def significant(test: dict[str, float]) -> bool:
    """p < 0.05 and a difference that shows at the printed precision (x100, 2 decimals)."""
    return test["p_value"] < SIGNIFICANT and round(100 * test["difference"], 2) != 0


def intervals(cells: list[Cell], names: dict[str, str], n_resamples: int, seed: int = 0,
              notes: list[str] | None = None) -> tuple[Table, Table]:
    """95% bootstrap intervals and the paired test against vanilla: (Markdown, long CSV).

    Documents of the evaluation set are resampled with replacement (``n_resamples`` times,
    numpy seed ``seed``); the paired test resamples the same documents for both confidences.
    A significant difference is bold in the Markdown. Resamples holding one class only (AUROC
    undefined, 0.5 used) are counted in ``notes``.
    """
    scores = [s for s, _, _ in LEADERBOARD_SCORES]
    wide = Table(["model", "benchmark", "method", "n"]
                 + [f"{t} (95% CI)" for _, t, _ in LEADERBOARD_SCORES]
                 + [f"Δ{t} vs vanilla (95% CI), p" for _, t, _ in LEADERBOARD_SCORES])
    long = Table(["model", "benchmark", "task", "method", "score", "n", "value", "ci_low",
                  "ci_high", "diff_vs_vanilla", "diff_low", "diff_high", "p_value"], digits=4)
    order = {m.label: i for i, m in enumerate(METHODS)}
    benchmarks = benchmark_order(cells)
    ranked = sorted((c for c in cells if c.confidence is not None),
                    key=lambda c: (names[c.model], benchmarks.index(c.benchmark),
                                   order[c.method.label]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CalibrationWarning)
        for cell in ranked:
            shown, tests = [], []
            for score in scores:
                value, low, high = bootstrap_interval(SCORES[score], cell.confidence,
                                                      cell.correct, n_resamples, seed=seed)
                shown.append(f"{100 * value:.2f} ({100 * low:.2f} to {100 * high:.2f})")
                if not cell.paired:
                    tests.append("–")
                    long.rows.append([names[cell.model], cell.benchmark, cell.run.task,
                                      cell.method.label, score, cell.n, 100 * value, 100 * low,
                                      100 * high, None, None, None, None])
                    continue
                test = paired_bootstrap_test(SCORES[score], cell.confidence, cell.vanilla[0],
                                             cell.correct, n_resamples, seed=seed)
                diff = [100 * test["difference"], 100 * test["low"], 100 * test["high"]]
                tests.append(f"{diff[0]:+.2f} ({diff[1]:+.2f} to {diff[2]:+.2f}), "
                             f"p={test['p_value']:.3f}")
                if significant(test):
                    wide.marks.add((len(wide.rows), 4 + len(scores) + len(tests) - 1))
                long.rows.append([names[cell.model], cell.benchmark, cell.run.task,
                                  cell.method.label, score, cell.n, 100 * value, 100 * low,
                                  100 * high, *diff, test["p_value"]])
            wide.rows.append([names[cell.model], TITLES.get(cell.benchmark, cell.benchmark),
                              cell.method.label, str(cell.n), *shown, *tests])
    degenerate = [w for w in caught if issubclass(w.category, CalibrationWarning)]
    if degenerate and notes is not None:
        notes.append(f"bootstrap: {len(degenerate)} of the intervals and tests met resamples "
                     "holding only correct or only wrong documents (AUROC 0.5 used for those); "
                     "such intervals are wide and rough")
    return wide, long
