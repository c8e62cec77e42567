"""``calidist report``: tables, intervals, diagrams, cost and transfer from lm-eval output folders.

``write_report(["runs/a", "runs/b"], "report")`` (or ``calidist report runs/a runs/b --out
report``) reads every results file and ``--log_samples`` file under the folders and writes into
the output folder:

- ``report.md``: everything below in one page, then the problems found (files or runs left out,
  by name) and the calibration warnings of the refits;
- ``leaderboard.html``: the leaderboard as one self-contained page, sortable by every score,
  with the intervals and the figures (``report.html``);
- ``leaderboard.md`` / ``leaderboard.csv``: rows model x method, columns benchmark x (accuracy,
  ECE, Brier, AUROC, unreadable share) and their average, x100, best per column within a
  block (model and run settings, ``report.identity``)
  marked, methods with mostly unreadable replies flagged;
- ``scores.csv``: one-bin ECE, MCE, smooth ECE, AURC, accuracy at 80% coverage;
- ``thresholds.csv``: per target accuracy, the confidence threshold that reaches it and the
  coverage it keeps, with its bootstrap interval (``report.thresholds``);
- ``intervals.csv``: 95% bootstrap intervals of each score and the paired bootstrap test of each
  method against the same task's vanilla confidence;
- ``cost.csv``: requests, distinct prompts and prompt tokens per document, per task;
- ``transfer.csv`` (with ``transfers``): a CaliDist fit moved from one task to another;
- ``figures/*.png`` and ``figures/*.pdf`` (reliability diagrams and risk-coverage curves per
  task, the paper's Figure 1) and ``figures.json`` (the numbers each figure drew).

No model is run: everything comes from the logged per-document records.

``write_report_from_results(results, "report")`` writes the same report from the dict(s)
``lm_eval.simple_evaluate`` / ``calidist_tasks.evaluate`` returned (with ``log_samples``), with no
output folder of your own: see docs/python_api.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from calidist_metrics import reused_resamples
from calidist_tasks.registry import ECE_BINNING, METHODS, vanilla_labels
from calidist_tasks.report.cells import Cell, leaderboard_cells
from calidist_tasks.report.cost import cost_table
from calidist_tasks.report.html import html_leaderboard
from calidist_tasks.report.identity import group_names, identity_table, selected
from calidist_tasks.report.latex import latex_table
from calidist_tasks.report.loading import Loaded, TaskRun, load_runs
from calidist_tasks.report.plots import (
    FORMATS,
    Drawing,
    Series,
    figure_title,
    instability_figure,
    models_figure,
    reliability_figure,
    require_matplotlib,
    risk_coverage_figure,
    slug,
    start_drawing,
)
from calidist_tasks.report.refits import fitted_once
from calidist_tasks.report.tables import (
    ALWAYS_ZERO,
    FROM_RESULTS,
    IDENTICAL,
    UNREADABLE,
    Table,
    benchmark_title,
    escape,
    intervals,
    leaderboard,
    model_summary,
    more_scores,
)
from calidist_tasks.report.thresholds import (
    TARGET_ACCURACIES,
    parse_targets,
    thresholds_table,
)
from calidist_tasks.report.transfer import parse_pair, transfer_table
from calidist_tasks.runs.files import save_like_lm_eval
from calidist_tasks.scoring.aggregation import UNREADABLE_LIMIT
from calidist_tasks.scoring.fits import column
from calidist_tasks.scoring.records import EVALUATION

__all__ = ["Report", "run_command", "write_report", "write_report_from_results"]
log = logging.getLogger(__name__)  # progress, to stderr in `calidist report` (--quiet: none)


@dataclass
class Report:
    """What ``write_report`` wrote and what it had to leave out."""

    out: Path
    runs: int = 0  # calidist tasks read (one per model and task)
    files: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    figures: list[dict[str, Any]] = field(default_factory=list)


def task_series(cells: list[Cell]) -> list[tuple[Cell, list[Series]]]:
    """Per task with per-document data: (one of its cells, [(label, confidence, correct)]),
    the task's own uncalibrated confidence first, then its methods in METHODS order."""
    order = {m.label: i for i, m in enumerate(METHODS)}
    by_run: dict[int, list[Cell]] = {}
    for cell in sorted(cells, key=lambda c: order[c.method.label]):
        if cell.confidence is not None:
            by_run.setdefault(id(cell.run), []).append(cell)
    found = []
    for mine in by_run.values():
        series = [(c.method.label + (f" {UNREADABLE}" if c.unreadable else ""), c.confidence,
                   c.correct) for c in mine]
        vanilla = next((c.vanilla for c in mine if c.vanilla is not None), None)
        if vanilla is not None and all(not c.method.own for c in mine):
            label = next(m.label for m in METHODS if m.own and mine[0].variant in m.variants)
            series.insert(0, (label, *vanilla))
        found.append((mine[0], series))
    return found


def _figures(cells: list[Cell], runs: list[TaskRun], names: dict[str, str],
             folder: Path) -> tuple[list[dict[str, Any]], Drawing]:
    """The figures.json entries of the task figures (without the numbers drawn), and their
    drawing, started (``plots.Drawing``: its results are the numbers, in the same order)."""
    folder.mkdir(parents=True, exist_ok=True)
    planned, jobs = [], []  # per figure: its figures.json entry, and what draws it

    def plan(kind: str, base: Path, model: str, task: str, title: str, extra: dict,
             function: Callable[..., dict[str, Any]], *args: Any) -> None:
        files = [str(base.with_name(base.name + s).relative_to(folder.parent)) for s in FORMATS]
        planned.append({"file": files[0], "vector": files[1], "kind": kind, "model": model,
                        "task": task, "title": title, **extra})
        jobs.append((function, (base, title, *args)))

    for cell, series in sorted(task_series(cells),
                               key=lambda found: (names[found[0].model], found[0].run.task)):
        model, task = names[cell.model], cell.run.task
        first_is_vanilla = series[0][0] in vanilla_labels()
        parts = [f"n={cell.n} evaluation documents", "scores ×100"]
        extra = {"n": cell.n, "methods": [s[0] for s in series]}
        plan("reliability", folder / f"reliability_{slug(model)}_{slug(task)}", model, task,
             figure_title(model, task, ["reliability", *parts]), extra, reliability_figure,
             series, first_is_vanilla)
        plan("risk_coverage", folder / f"risk_coverage_{slug(model)}_{slug(task)}", model, task,
             figure_title(model, task, ["risk-coverage", *parts]), extra, risk_coverage_figure,
             series)
    for run in runs:
        evaluation = [r for r in run.records or [] if r.get("split") == EVALUATION]
        if not evaluation or "mu" not in evaluation[0]:
            continue
        model = names[run.group]
        title = figure_title(model, run.task, ["accuracy vs prediction instability μ",
                                               f"n={len(evaluation)} evaluation documents"])
        plan("instability", folder / f"instability_{slug(model)}_{slug(run.task)}", model,
             run.task, title, {}, instability_figure, column(evaluation, "mu"),
             column(evaluation, "correct"))
    return planned, start_drawing(jobs)


def leaderboard_legend(cells: list[Cell], n_resamples: int) -> str:
    """The caption of the LaTeX leaderboard: scale, documents, marks and intervals."""
    sizes = {}
    for cell in cells:
        if cell.n is not None:
            sizes.setdefault(benchmark_title(cell.benchmark), set()).add(cell.n)
    documents = "; ".join(f"{b}: n = {', '.join(map(str, sorted(n)))}"
                          for b, n in sizes.items())
    return ("Calibration on the held-out evaluation documents, scores ×100 "
            f"({documents or 'results-file numbers only'}). ECE (10 equal-width bins) and Brier: "
            "lower is better; AUROC (confidence as a detector of correct answers): higher is "
            "better. Bold: the best ECE, Brier and AUROC of each benchmark within a model's block "
            "(one model and run settings), where a paired bootstrap test finds it better than "
            "the next best (p < 0.05; none where values tie). "
            + (f"95% bootstrap intervals ({n_resamples} resamples) and paired tests against "
               "vanilla are in intervals.csv. " if n_resamples else "")
            + f"{FROM_RESULTS}: results-file numbers only; {UNREADABLE}: most replies "
            "unreadable, never marked best.")


def _model_figures(long: Table, folder: Path, n_resamples: int) -> list[dict[str, Any]]:
    """Per benchmark with two or more blocks: ECE, Brier and AUROC per method and block, with
    their bootstrap intervals (from ``intervals``' long table)."""
    folder.mkdir(parents=True, exist_ok=True)
    found: dict[str, dict[str, dict[str, dict[str, tuple]]]] = {}
    at = {key: long.columns.index(key) for key in ("model", "benchmark", "method", "score",
                                                   "value", "ci_low", "ci_high")}
    for row in long.rows:
        scores = found.setdefault(row[at["benchmark"]], {})
        scores.setdefault(row[at["score"]], {}).setdefault(row[at["method"]], {})[
            row[at["model"]]] = (row[at["value"]], row[at["ci_low"]], row[at["ci_high"]])
    drawn = []
    for benchmark, scores in found.items():
        blocks = {b for methods in scores.values() for per in methods.values() for b in per}
        if len(blocks) < 2:
            continue
        base = folder / f"models_{slug(benchmark)}"
        title = (f"{benchmark_title(benchmark)}: models compared · 95% bootstrap "
                 f"intervals ({n_resamples} resamples)")
        data = models_figure(base, title, scores)
        files = [str(base.with_name(base.name + s).relative_to(folder.parent)) for s in FORMATS]
        drawn.append({"file": files[0], "vector": files[1], "kind": "models", "model": "",
                      "task": benchmark, "title": title, **data})
    return drawn


def _models(runs: list[TaskRun], names: dict[str, str]) -> Table:
    table = identity_table(runs, names)
    table.columns.append("results files")
    for row, group in zip(table.rows, sorted({r.group for r in runs}, key=lambda g: names[g]),
                          strict=True):
        row.append(", ".join(sorted({r.results_file.name for r in runs if r.group == group})))
    return table


def _markdown(sections: list[tuple[str, str, Table | None]], report: Report) -> str:
    lines = ["# calidist report", ""]
    for title, intro, table in sections:
        if table is None or not table.rows:
            continue
        lines += [f"## {title}", "", intro, "", table.markdown(), ""]
    if report.figures:
        lines += ["## Figures", ""]
        lines += [f"- [{escape(f['file'])}]({f['file']}) ([PDF]({f['vector']}))"
                  for f in report.figures]
        lines.append("")
    lines += ["## Problems (left out of the affected cells)", ""]
    lines += [f"- {escape(p)}" for p in report.problems] or ["None."]
    if report.notes:
        lines += ["", "## Calibration warnings of the refits", ""]
        lines += [f"- {escape(n)}" for n in report.notes]
    return "\n".join(lines) + "\n"


def write_report(
    paths: Sequence[str | Path],
    out: str | Path,
    transfers: Sequence[str] = (),
    n_resamples: int = 1000,
    seed: int = 0,
    figures: bool = True,
    tasks: str | None = None,
    models: str | None = None,
    target_accuracies: Sequence[float] = TARGET_ACCURACIES,
) -> Report:
    """Read lm-eval output under ``paths`` and write the report into ``out`` (see module doc);
    an ``out`` that cannot be written (a file in its place) raises OSError before any work.

    ``tasks`` / ``models``: comma-separated shell patterns; only the runs whose task name and
    model name match are read (``identity.selected``); ``target_accuracies``: the Thresholds
    table's targets."""
    from calidist_tasks.runs.recovery import check_writable

    pairs = [parse_pair(t) for t in transfers]
    if figures:
        require_matplotlib()  # before minutes of reading and refitting
    check_writable(out, "the report folder")
    keep = None if tasks is None and models is None else partial(selected, tasks=tasks,
                                                                  models=models)
    return _write(load_runs(paths, keep), out, pairs, n_resamples, seed, figures,
                  target_accuracies=target_accuracies)


def write_report_from_results(
    results: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    out: str | Path,
    transfers: Sequence[str] = (),
    n_resamples: int = 1000,
    seed: int = 0,
    figures: bool = True,
    target_accuracies: Sequence[float] = TARGET_ACCURACIES,
) -> Report:
    """``write_report`` for what ``lm_eval.simple_evaluate`` (or ``calidist_tasks.evaluate``)
    returned: one results dict, or a list of them (several models; for the same model and task a
    later dict supersedes an earlier one). Run with ``log_samples=True`` (``results["samples"]``)
    for intervals, diagrams, cost and transfer; without samples only the results numbers are
    used, as for a folder run without ``--log_samples``. The dicts are not modified.

    Each dict is saved as ``lm_eval --output_path DIR --log_samples`` saves it (lm-eval's own
    ``EvaluationTracker``) into a temporary folder and read back by the folder reader, so both
    entry points build the same runs and the same report. Problems name ``results`` (or
    ``results[i]``) instead of the temporary files.
    """
    pairs = [parse_pair(t) for t in transfers]
    if figures:
        require_matplotlib()
    single = isinstance(results, Mapping) or not isinstance(results, Sequence)
    given = [results] if single else list(results)
    labels = ["results"] if single else [f"results[{i}]" for i in range(len(given))]
    for one, label in zip(given, labels, strict=True):
        if not isinstance(one, Mapping) or not isinstance(one.get("results"), Mapping):
            raise ValueError(f"{label} is not what lm_eval.simple_evaluate returns (a dict with "
                             f"a 'results' dict), got {type(one).__name__}")
    with tempfile.TemporaryDirectory(prefix="calidist-results-") as tmp:
        root = Path(tmp).resolve()
        names: dict[str, str] = {}
        for i, (one, label) in enumerate(zip(given, labels, strict=True)):
            names.update(save_like_lm_eval(one, root / str(i), label))
        names[str(root)] = "(results)"

        def display(text: str) -> str:
            for path in sorted(names, key=len, reverse=True):  # files before their folder
                text = text.replace(path, names[path])
            return text

        return _write(load_runs([root]), out, pairs, n_resamples, seed, figures, display,
                      target_accuracies)


def _write(
    loaded: Loaded,
    out: str | Path,
    pairs: Sequence[tuple[str, str]],
    n_resamples: int,
    seed: int,
    figures: bool,
    display: Callable[[str], str] | None = None,
    target_accuracies: Sequence[float] = TARGET_ACCURACIES,
) -> Report:
    """The report of runs already read; ``display`` rewrites the problems and notes (file
    names)."""
    report = Report(Path(out))
    report.problems, report.runs = loaded.problems, len(loaded.runs)
    if not loaded.runs:  # nothing to report: no empty tables either
        report.problems = [display(p) for p in report.problems] if display else report.problems
        return report
    report.out.mkdir(parents=True, exist_ok=True)
    log.info("read %d tasks in %d blocks", len(loaded.runs), len({r.group for r in loaded.runs}))
    names = group_names(loaded.runs)
    with fitted_once():  # the transfer's in-domain fits are the leaderboard's
        cells = leaderboard_cells(loaded.runs, report.problems, report.notes)
        moved = (transfer_table(pairs, loaded.runs, names, report.problems) if pairs
                 else None)
    planned, drawing = [], None
    if figures:  # drawn in other processes (two or more CPUs) while the tables are computed
        log.info("drawing the figures")
        planned, drawing = _figures(cells, loaded.runs, names, report.out / "figures")
    try:
        with reused_resamples():  # each score resampled once per method and task, not per test
            board = leaderboard(cells, names, n_resamples, seed)
            thresholds = thresholds_table(cells, names, target_accuracies, n_resamples, seed)
            wide, long = (intervals(cells, names, n_resamples, seed, report.notes)
                          if n_resamples else (None, None))
        extra = more_scores(cells, names)
        costs = cost_table(loaded.runs, names, report.notes)
        if drawing is not None:
            report.figures = [{**entry, **data} for entry, data
                              in zip(planned, drawing.results(), strict=True)]
    finally:
        if drawing is not None:
            drawing.close()

    summary = model_summary(cells, names)
    if figures and long is not None and len(names) > 1:
        report.figures += _model_figures(long, report.out / "figures", n_resamples)
    tables = {"leaderboard.csv": board.csv("best"), "leaderboard.md": board.markdown() + "\n",
              "leaderboard.tex": latex_table(board, leaderboard_legend(cells, n_resamples),
                                             "tab:calidist-leaderboard"),
              "models.csv": summary.csv(), "scores.csv": extra.csv(), "cost.csv": costs.csv(),
              "thresholds.csv": thresholds.csv()}
    if long is not None:
        tables["intervals.csv"] = long.csv()
    if moved is not None:
        tables["transfer.csv"] = moved.csv()
    tables["figures.json"] = json.dumps(report.figures, indent=1)
    tables["leaderboard.html"] = html_leaderboard(
        board, leaderboard_legend(cells, n_resamples), identity_table(loaded.runs, names), long,
        report.figures, report.out)
    sections = [
        ("Runs", "One block of rows per model and run settings (few-shot examples, chat "
         "template, --limit, model arguments, calidist's settings): bold \"best\", averages "
         "and paired tests never cross blocks. A block's name adds the settings that tell it "
         "apart from the same model's other blocks, or its number among them where those are "
         "long (then \"differs by\" spells them out).", _models(loaded.runs, names)),
        ("Leaderboard", "Scores x100 on the evaluation documents; ↓ lower is better, ↑ higher "
         f"is better; {ECE_BINNING}. **bold** = best ECE / Brier / AUROC of the benchmark's "
         "column within the block (model and run settings), where the paired bootstrap test "
         "against the next best gives p < 0.05 (never where the values tie, nor in the "
         "averages). Acc = "
         "accuracy of the method's predictions; Unreadable = share of the task's replies the "
         "parser could not read (– for tasks that score the option letters). "
         f"{UNREADABLE} = more than {UNREADABLE_LIMIT:.0%} of the replies unreadable: the "
         "scores describe the parser's fallback, not the model (lm-eval's results file holds "
         "NaN for them), and are never marked best. Average = mean over the benchmarks, for "
         "rows with every benchmark (a calibration pool's own <pool>_pooled column left out: "
         f"its members are there). {FROM_RESULTS} = numbers from the results file only (no "
         "usable logged samples: no intervals or diagrams).", board),
        ("Per model", "One row per block over the benchmarks it has (HELM style): mean "
         "accuracy, mean ECE of its vanilla confidence and of its best method per benchmark "
         "(which one, how often), and the mean rank of that best ECE among the blocks that "
         "have the benchmark (1 = best); x100.", summary),
        ("More scores: one-bin ECE, MCE, smooth ECE, selective prediction",
         "x100 on the evaluation documents (definitions: the README's Metrics table). ECE 1 bin "
         "= \\|mean confidence − accuracy\\| (HELM); MCE = largest bin gap of the 10 "
         "equal-width bins; smECE = smooth ECE (Błasiok & Nakkiran 2023, relplot); AURC = area "
         "under the risk-coverage curve; Acc@80% coverage = accuracy of the 80% most confident "
         f"documents. {FROM_RESULTS}: results-file numbers only (– where the file has none).",
         extra),
        ("Thresholds: when to act on an answer",
         "To be right at least the target accuracy of the time on these evaluation documents, "
         "act on an answer only when the method's confidence is at least the threshold (the "
         "lowest such threshold); coverage = share of the answers kept, with its 95% bootstrap "
         f"interval ({n_resamples} resamples, each choosing its own threshold), acc kept = their "
         "accuracy; x100. The threshold is chosen on the documents it is measured on: hold "
         "some out before relying on it. – = no threshold reaches the target. The curves "
         "behind it: the risk-coverage figures (risk = 1 − accuracy of the kept answers).",
         thresholds),
        ("95% bootstrap intervals and paired test against vanilla",
         f"{n_resamples} resamples of the evaluation documents (seed {seed}). Δ = method − "
         "vanilla on the same documents (negative is better for ECE and Brier, positive for "
         "AUROC); p = two-sided paired bootstrap p-value; **bold** = p < 0.05 (and a difference "
         "that shows at two decimals). – = no paired vanilla "
         "(a vanilla row itself, or a method that changes the predictions); "
         f"\"{IDENTICAL}\" = the method's confidences equal those of its own task's vanilla "
         "(the task named; the block's Vanilla row may come from another task) to numerical "
         "precision "
         f"(no test, no p-value); \"{ALWAYS_ZERO}\" = no p-value either (e.g. AUROC after a "
         "monotone map such as Platt scaling).", wide),
        ("Transfer of the CaliDist fit", "Fit (λ bounds, α, β) refitted on the source task's "
         "calibration documents and applied to the target task's evaluation documents, beside "
         "the target's vanilla confidence and its own (in-domain) fit; scores x100.", moved),
        ("Cost per document", "Every request as sent (a loglikelihood prompt once per option "
         "letter, a sampled prompt once per sample). × original prompt = prompt tokens relative "
         "to one original prompt sent once: (forward passes) counts every distinct prompt once "
         "(what a backend that scores all letters in one pass computes), (requests) counts "
         "every request as sent (once per letter or sample).", costs),
    ]
    if display is not None:
        report.problems = [display(p) for p in report.problems]
        report.notes = [display(n) for n in report.notes]
    tables["report.md"] = _markdown(sections, report)
    for name, text in tables.items():
        path = report.out / name
        path.write_text(text, encoding="utf-8")
        report.files.append(path)
    report.files += [report.out / f[key] for f in report.figures for key in ("file", "vector")]
    return report


def run_command(args: argparse.Namespace) -> int:
    """``calidist report``: write the report, list what was left out; exit status 0, or 1 when
    no run could be read at all (2 for a malformed --transfer or an --out that cannot be
    written)."""
    show_progress(not args.quiet)
    try:
        report = write_report(args.run_dirs, args.out, args.transfer, args.bootstrap, args.seed,
                              figures=not args.no_figures, tasks=args.tasks, models=args.models,
                              target_accuracies=parse_targets(args.target_accuracy)
                              if args.target_accuracy else TARGET_ACCURACIES)
    except (ValueError, OSError) as error:  # a malformed --transfer or --out, before any work
        print(f"calidist report: {error}", file=sys.stderr)
        return 2
    except ImportError as error:  # no matplotlib, before anything is read
        print(f"calidist report: {error}", file=sys.stderr)
        return 1
    for problem in report.problems:
        print(f"left out: {problem}", file=sys.stderr)
    if not report.runs:
        print("calidist report: no calidist or multiple-choice task could be read; nothing written",
              file=sys.stderr)
        return 1
    print(f"wrote {report.out / 'report.md'} ({len(report.files)} files)")
    return 0


def show_progress(shown: bool = True) -> None:
    """Progress of the report's long steps (reading, refits, bootstrap, figures) on the current
    stderr, or none."""
    logger = logging.getLogger(__name__)
    logger.handlers = [h for h in logger.handlers if not getattr(h, "calidist_progress", False)]
    logger.setLevel(logging.INFO if shown else logging.WARNING)
    if shown:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[calidist report] %(message)s"))
        handler.calidist_progress = True
        logger.addHandler(handler)
