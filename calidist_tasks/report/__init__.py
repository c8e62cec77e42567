"""``calidist report``: tables, intervals, diagrams, cost and transfer from lm-eval output folders.

``write_report(["runs/a", "runs/b"], "report")`` (or ``calidist report runs/a runs/b --out
report``) reads every results file and ``--log_samples`` file under the folders and writes into
the output folder:

- ``report.md``: everything below in one page, then the problems found (files or runs left out,
  by name) and the calibration warnings of the refits;
- ``leaderboard.md`` / ``leaderboard.csv``: rows model x method, columns benchmark x (accuracy,
  ECE, Brier, AUROC, unreadable share) and their average, x100, best per column within a model
  marked, methods with mostly unreadable replies flagged;
- ``scores.csv``: one-bin ECE, MCE, smooth ECE, AURC, accuracy at 80% coverage;
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
import os
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from calidist_tasks.aggregation import ECE_BINNING, UNREADABLE_LIMIT
from calidist_tasks.records import EVALUATION
from calidist_tasks.report.cost import cost_table
from calidist_tasks.report.loading import (
    RESULTS_NAME,
    SAMPLES_NAME,
    Loaded,
    TaskRun,
    load_runs,
    short_names,
)
from calidist_tasks.report.methods import (
    METHODS,
    VANILLA_LABELS,
    Cell,
    column,
    leaderboard_cells,
    split_task,
)
from calidist_tasks.report.plots import (
    FORMATS,
    Series,
    figure_title,
    instability_figure,
    reliability_figure,
    risk_coverage_figure,
    slug,
)
from calidist_tasks.report.tables import (
    ALWAYS_ZERO,
    FROM_RESULTS,
    IDENTICAL,
    UNREADABLE,
    Table,
    escape,
    intervals,
    leaderboard,
    more_scores,
)
from calidist_tasks.report.transfer import parse_pair, transfer_table

__all__ = ["Report", "run_command", "write_report", "write_report_from_results"]


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
        series = [(c.method.label, c.confidence, c.correct) for c in mine]
        vanilla = next((c.vanilla for c in mine if c.vanilla is not None), None)
        if vanilla is not None and all(c.method.label not in VANILLA_LABELS for c in mine):
            variant = split_task(mine[0].run.task)[1]
            label = next(m.label for m in METHODS
                         if m.label in VANILLA_LABELS and variant in m.variants)
            series.insert(0, (label, *vanilla))
        found.append((mine[0], series))
    return found


def _figures(cells: list[Cell], runs: list[TaskRun], names: dict[str, str],
             folder: Path) -> list[dict[str, Any]]:
    folder.mkdir(parents=True, exist_ok=True)
    drawn = []

    def entry(kind: str, base: Path, model: str, task: str, title: str, data: dict) -> dict:
        files = [str(base.with_name(base.name + s).relative_to(folder.parent)) for s in FORMATS]
        return {"file": files[0], "vector": files[1], "kind": kind, "model": model,
                "task": task, "title": title, **data}

    for cell, series in sorted(task_series(cells),
                               key=lambda found: (names[found[0].model], found[0].run.task)):
        model, task = names[cell.model], cell.run.task
        first_is_vanilla = series[0][0] in VANILLA_LABELS
        parts = [f"n={cell.n} evaluation documents", "scores ×100"]
        base = folder / f"reliability_{slug(model)}_{slug(task)}"
        title = figure_title(model, task, ["reliability", *parts])
        data = reliability_figure(base, title, series, first_is_vanilla)
        drawn.append(entry("reliability", base, model, task, title,
                           {"n": cell.n, "methods": [s[0] for s in series], **data}))
        base = folder / f"risk_coverage_{slug(model)}_{slug(task)}"
        title = figure_title(model, task, ["risk-coverage", *parts])
        data = risk_coverage_figure(base, title, series)
        drawn.append(entry("risk_coverage", base, model, task, title,
                           {"n": cell.n, "methods": [s[0] for s in series], **data}))
    for run in runs:
        evaluation = [r for r in run.records or [] if r.get("split") == EVALUATION]
        if not evaluation or "mu" not in evaluation[0]:
            continue
        model = names[run.model]
        base = folder / f"instability_{slug(model)}_{slug(run.task)}"
        title = figure_title(model, run.task, ["accuracy vs prediction instability μ",
                                               f"n={len(evaluation)} evaluation documents"])
        data = instability_figure(base, title, column(evaluation, "mu"),
                                  column(evaluation, "correct"))
        drawn.append(entry("instability", base, model, run.task, title, data))
    return drawn


def _models(runs: list[TaskRun], names: dict[str, str]) -> Table:
    table = Table(["model", "name in the results file", "tasks", "results files"])
    for model in sorted({r.model for r in runs}, key=lambda m: names[m]):
        mine = [r for r in runs if r.model == model]
        table.rows.append([names[model], model, ", ".join(r.task for r in mine),
                           ", ".join(sorted({r.results_file.name for r in mine}))])
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
) -> Report:
    """Read lm-eval output under ``paths`` and write the report into ``out`` (see module doc)."""
    pairs = [parse_pair(t) for t in transfers]
    return _write(load_runs(paths), out, pairs, n_resamples, seed, figures)


def write_report_from_results(
    results: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    out: str | Path,
    transfers: Sequence[str] = (),
    n_resamples: int = 1000,
    seed: int = 0,
    figures: bool = True,
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

        return _write(load_runs([root]), out, pairs, n_resamples, seed, figures, display)


def save_like_lm_eval(results: Mapping[str, Any], folder: str | os.PathLike,
                      label: str = "results") -> dict[str, str]:
    """Save one simple_evaluate dict into ``folder`` with lm-eval's EvaluationTracker, as its CLI
    does (what ``calidist report`` and a later stage read); return {path of each file written:
    how to name it in problems}."""
    folder = Path(folder)
    from lm_eval.loggers import EvaluationTracker

    data = dict(results)  # the tracker adds keys to the results and rewrites samples in place
    samples = {task: [_unsaved(doc) for doc in docs]
               for task, docs in (data.pop("samples", None) or {}).items()}
    tracker = EvaluationTracker(output_path=str(folder))
    tracker.save_results_aggregated(results=data, samples=samples or None)
    for task in data.get("configs") or {}:
        if task in samples:
            tracker.save_results_samples(task_name=task, samples=samples[task])
    written = {}
    for file in sorted(folder.rglob("*.json*")):
        if RESULTS_NAME.match(file.name):
            written[str(file)] = label
        elif match := SAMPLES_NAME.match(file.name):
            written[str(file)] = f"{label}['samples'][{match['task']!r}]"
    if label not in written.values():  # the tracker logs its errors instead of raising them
        raise RuntimeError(f"lm-eval could not save {label} (see its log above)")
    written[str(folder) + os.sep] = ""
    return written


def _unsaved(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of one logged document as simple_evaluate returns it: its ``arguments`` as a list
    of tuples again when a tracker already saved it (which rewrites them to {"gen_args_i":
    {"arg_j": ...}} in place; saving that again would split each name into characters)."""
    doc = dict(doc)
    arguments = doc.get("arguments")
    if isinstance(arguments, Mapping):
        doc["arguments"] = [tuple(arg.values()) if isinstance(arg, Mapping) else arg
                            for arg in arguments.values()]
    return doc


def _write(
    loaded: Loaded,
    out: str | Path,
    pairs: Sequence[tuple[str, str]],
    n_resamples: int,
    seed: int,
    figures: bool,
    display: Callable[[str], str] | None = None,
) -> Report:
    """The report of runs already read; ``display`` rewrites the problems and notes (file
    names)."""
    report = Report(Path(out))
    report.out.mkdir(parents=True, exist_ok=True)
    report.problems, report.runs = loaded.problems, len(loaded.runs)
    names = short_names(r.model for r in loaded.runs)
    cells = leaderboard_cells(loaded.runs, report.problems, report.notes)
    board = leaderboard(cells, names)
    extra = more_scores(cells, names)
    wide, long = (intervals(cells, names, n_resamples, seed, report.notes) if n_resamples
                  else (None, None))
    moved = transfer_table(pairs, loaded.runs, names, report.problems) if pairs else None
    costs = cost_table(loaded.runs, names)
    if figures:
        report.figures = _figures(cells, loaded.runs, names, report.out / "figures")

    tables = {"leaderboard.csv": board.csv("best"), "leaderboard.md": board.markdown() + "\n",
              "scores.csv": extra.csv(), "cost.csv": costs.csv()}
    if long is not None:
        tables["intervals.csv"] = long.csv()
    if moved is not None:
        tables["transfer.csv"] = moved.csv()
    tables["figures.json"] = json.dumps(report.figures, indent=1)
    sections = [
        ("Models", "Short names used below.", _models(loaded.runs, names)),
        ("Leaderboard", "Scores x100 on the evaluation documents; ↓ lower is better, ↑ higher "
         f"is better; {ECE_BINNING}. **bold** = best ECE / Brier / AUROC of the column within "
         "the model. Acc = "
         "accuracy of the method's predictions; Unreadable = share of the task's replies the "
         "parser could not read (– for tasks that score the option letters). "
         f"{UNREADABLE} = more than {UNREADABLE_LIMIT:.0%} of the replies unreadable: the "
         "scores describe the parser's fallback, not the model (lm-eval's results file holds "
         "NaN for them), and are never marked best. Average = mean over the benchmarks, for "
         f"rows with every benchmark. {FROM_RESULTS} = numbers from the results file only (no "
         "usable logged samples: no intervals or diagrams).", board),
        ("More scores: one-bin ECE, MCE, smooth ECE, selective prediction",
         "x100 on the evaluation documents (definitions: the README's Metrics table). ECE 1 bin "
         "= \\|mean confidence − accuracy\\| (HELM); MCE = largest bin gap of the 10 "
         "equal-width bins; smECE = smooth ECE (Błasiok & Nakkiran 2023, relplot); AURC = area "
         "under the risk-coverage curve; Acc@80% coverage = accuracy of the 80% most confident "
         f"documents. {FROM_RESULTS}: results-file numbers only (– where the file has none).",
         extra),
        ("95% bootstrap intervals and paired test against vanilla",
         f"{n_resamples} resamples of the evaluation documents (seed {seed}). Δ = method − "
         "vanilla on the same documents (negative is better for ECE and Brier, positive for "
         "AUROC); p = two-sided paired bootstrap p-value; **bold** = p < 0.05 (and a difference "
         "that shows at two decimals). – = no paired vanilla "
         "(a vanilla row itself, or a method that changes the predictions); "
         f"\"{IDENTICAL}\" = the method's confidences equal vanilla's to numerical precision "
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
    no run could be read at all (2 for a malformed --transfer)."""
    try:
        report = write_report(args.run_dirs, args.out, args.transfer, args.bootstrap, args.seed,
                              figures=not args.no_figures)
    except ValueError as error:  # a malformed --transfer, before anything is read
        print(f"calidist report: {error}", file=sys.stderr)
        return 2
    print(f"wrote {report.out / 'report.md'} ({len(report.files)} files)")
    for problem in report.problems:
        print(f"left out: {problem}", file=sys.stderr)
    return 0 if report.runs else 1
